"""The time Kerrigan adds around a job on a board that boots in 2 s, beyond the board's own.

The agent's own board control (:class:`~kerrigan.runner.boards.control.BoardControl`, as the agent takes a
job's boards) drives a simulated board (``kerrigan.testing.board``, a pty console, 2 s from power-on to
``login:``) on an outlet of the Gude PDU stand-in, through labgrid's gude backend, with ``off_s: 1`` and
``boot.ready: login:``. Per job, from the start of taking the board (what follows the server's
acknowledgement of the job's start) to the moment its command could start: that time, less ``off_s`` and
less the board's own boot (its power-on at the PDU to its ``login:`` written, printed beside), is the
overhead: opening the console, the two PDU calls, seeing ``login:`` on the console. Its parts are printed
too, and the ``after_job`` power-off at the end (not on the way to the command).

Baseline, in the same run: the same cycle with no Kerrigan, labgrid's ``power_set`` called directly (off,
``off_s``, on) and the board's own ``login:`` as the end, so what is left is the PDU calls alone.

Target (issue 29): overhead at most 0.5 s a job.

    python benchmarks/bench_board_overhead.py            # 10 jobs
    python benchmarks/bench_board_overhead.py --quick    # 3 jobs
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory

from kerrigan.core.manifest import PowerChoice
from kerrigan.runner.boards.control import BoardControl
from kerrigan.runner.boards.power import backend_address
from kerrigan.runner.boards.threads import in_own_thread
from kerrigan.runner.devices_file import load_devices_file
from kerrigan.testing.board import HOSTNAME, SimulatedBoard
from kerrigan.testing.pdu import MODEL, GudePdu

BOOT_S = 2.0
OFF_S = 1
OUTLET = 1
TARGET_S = 0.5
DEVICE = "bench-board"


class TimedBoard(SimulatedBoard):
    """The simulated board, noting when it was powered on and when it wrote its login prompt."""

    powered_at = 0.0
    login_at = 0.0

    def power(self, on: bool) -> None:
        if on and not self.powered:
            self.powered_at = time.monotonic()
        super().power(on)

    def _print(self, text: str) -> int:
        if f"{HOSTNAME} login:" in text:
            self.login_at = time.monotonic()
        return super()._print(text)


class TimedPdu(GudePdu):
    """The PDU stand-in, noting when it last switched an outlet on and off (a switch to the state it is in
    too, which its listeners do not hear of)."""

    def __init__(self) -> None:
        super().__init__(outlets=2)
        self.switched_at: dict[bool, float] = {}

    def switch(self, index: int, on: bool) -> None:
        self.switched_at[on] = time.monotonic()
        super().switch(index, on)


@dataclass(frozen=True)
class Job:
    """One job's taking of its board, in seconds."""

    total: float  # from the start of taking the board to its command's start
    boot: float  # the board's own: its power-on at the outlet to its login prompt written
    to_off: float  # from the start to the outlet off: the console opened, the PDU's off call
    to_on: float  # the outlet off to on, less off_s: the PDU's on call
    seen: float  # the login prompt written to the take's end: the console read, the line matched
    after_job: float  # the power-off after the job

    @property
    def overhead(self) -> float:
        return self.total - OFF_S - self.boot


async def kerrigan_jobs(pdu: TimedPdu, board: TimedBoard, devices: Path, count: int) -> list[Job]:
    entry = load_devices_file(devices).devices[DEVICE]
    switched = pdu.switched_at
    jobs = []
    for _ in range(count):
        control = BoardControl.of([(DEVICE, None, entry.wiring)])
        started = time.monotonic()
        await control.take(PowerChoice.CYCLE)
        taken = time.monotonic()
        off_at, on_at = switched[False], switched[True]
        await control.give_back()
        given_back = time.monotonic()
        jobs.append(
            Job(
                total=taken - started,
                boot=board.login_at - board.powered_at,
                to_off=off_at - started,
                to_on=on_at - off_at - OFF_S,
                seen=taken - board.login_at,
                after_job=given_back - taken,
            )
        )
        await asyncio.sleep(0.2)
    return jobs


async def bare_cycles(pdu: TimedPdu, board: TimedBoard, count: int) -> list[tuple[float, float]]:
    """(total, boot) of cycles made with labgrid's backend called directly, ended by the board's login."""
    backend = importlib.import_module(f"labgrid.driver.power.{MODEL}")
    host, port = backend_address(f"127.0.0.1:{pdu.port}", getattr(backend, "PORT", None))
    cycles = []
    for _ in range(count):
        board.login_at = 0.0
        started = time.monotonic()
        await in_own_thread(lambda: backend.power_set(host, port, OUTLET, False))
        await asyncio.sleep(OFF_S)
        await in_own_thread(lambda: backend.power_set(host, port, OUTLET, True))
        while board.login_at == 0.0:
            await asyncio.sleep(0.001)
        cycles.append((board.login_at - started, board.login_at - board.powered_at))
        await in_own_thread(lambda: backend.power_set(host, port, OUTLET, False))
        await asyncio.sleep(0.2)
    return cycles


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.3f} s, max {max(values):.3f} s"


async def run(count: int) -> bool:
    async with TimedPdu() as pdu, TimedBoard(boot_s=BOOT_S) as board:
        board.attach(pdu, OUTLET)
        with TemporaryDirectory() as folder:
            devices = Path(folder) / "devices.yml"
            devices.write_text(
                "devices:\n"
                f"  {DEVICE}:\n"
                f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
                f"off_s: {OFF_S}, timeout_s: 10}}\n"
                f"    console: {{serial: {{port: {board.path}}}}}\n"
                "    boot: {ready: 'login:', timeout_s: 30}\n",
                encoding="utf-8",
            )
            bare = await bare_cycles(pdu, board, count)
            jobs = await kerrigan_jobs(pdu, board, devices, count)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    print(f"{count} jobs on a board that boots in {BOOT_S:g} s (off_s {OFF_S}), PDU stand-in through labgrid")
    bare_left = [total - OFF_S - boot for total, boot in bare]
    print(
        f"baseline, labgrid called directly: cycle to login {spread([t for t, _ in bare])}; "
        f"board's own boot {spread([b for _, b in bare])}; left, the PDU calls: {spread(bare_left)}"
    )
    print(
        f"kerrigan, taking the board: {spread([job.total for job in jobs])}; "
        f"board's own boot {spread([job.boot for job in jobs])}"
    )
    print(
        f"  parts: to the outlet off {spread([job.to_off for job in jobs])}; "
        f"off to on beyond off_s {spread([job.to_on for job in jobs])}; "
        f"login written to seen {spread([job.seen for job in jobs])}"
    )
    print(f"  after_job's power-off (after the command): {spread([job.after_job for job in jobs])}")
    overheads = [job.overhead for job in jobs]
    print(f"overhead a job (taking, less off_s and the board's own boot): {spread(overheads)}")
    met = max(overheads) <= TARGET_S
    print(f"{'met' if met else 'missed'}: overhead a job <= {TARGET_S:g} s (the worst of {count})")
    return met


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 jobs instead of 10")
    args = parser.parse_args()
    asyncio.run(run(3 if args.quick else 10))


if __name__ == "__main__":
    main()
