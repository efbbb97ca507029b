"""Whether ``kerrigan console`` on a board printing at full 115,200 baud loses anything, across real
processes.

``kerrigan serve`` (SQLite), the GitHub stand-in and a ``kerrigan runner`` agent run as their own processes,
and so does the person's ``kerrigan console DEVICE`` (the command itself, its stdout read here); in this
one, the Gude PDU stand-in and a simulated board (``kerrigan.testing.board``, a pty console) wired to the
agent's one device. The person reserves the board, opens its console, powers it on through the power API;
the board (``Mode.FLOOD``) prints a few boot lines, then numbered lines back to back, paced at 115,200 baud
(ten bits a byte) for some seconds, and is switched off. Every numbered line ``kerrigan console`` printed is
checked: lines sent, received, lost (a number missing), damaged (a line that is not one the board printed),
and the bytes a second received against the board's own rate.

Baseline, in the same run: the same board and flood read by the agent's own console reader
(:class:`~kerrigan.runner.boards.console.Console`, a person's short gather) in this process: what the pty
and the reader alone lose, and the board's rate as it printed.

Target (issue 30): ``kerrigan console`` on a board printing at 115,200 baud loses nothing.

    python benchmarks/bench_person_console_throughput.py            # 30 s of flood
    python benchmarks/bench_person_console_throughput.py --quick    # 2 s (about 16 s in all)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from kerrigan.runner.boards.console import INTERACTIVE_GATHER_S, Console
from kerrigan.runner.devices_file.wiring import SerialConsole
from kerrigan.store.tokens import create_token
from kerrigan.testing.board import Mode, SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.process_lab import process_lab, runner_agent

DEVICE = "board-a"
OUTLET = 1
PERSON = "octocat"
BAUD = 115_200
LEAVE = b"\x1d"  # Ctrl-]
DRAIN_S = 0.5  # after the board stops, how long the last lines may take to arrive
NUMBERED = re.compile(rb"\] usb 1-1: device descriptor read/64, error -71 \((\d+)\)\r?$")
INVENTORY = f"""
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [someone-else]
    labels: {{sdk: "2.2.0"}}
    devices:
      - {{id: {DEVICE}, board: modalix, target_type: devkit, os_type: linux, host: rig-01}}
"""


@dataclass
class Flood:
    """One flood as printed and as read."""

    printed: int  # numbered lines the board printed
    printed_bytes: int
    seconds: float  # from its first numbered line to its power-off
    received: set[int]
    received_bytes: int
    damaged: int  # lines read that are neither boot lines nor whole numbered ones
    dropped_bytes: int  # what the board's pty could not take (its reader lagged), as a UART loses it
    drain_s: float  # from the power-off to the last numbered line read

    @property
    def lost(self) -> int:
        return self.printed - len(self.received & set(range(1, self.printed + 1)))

    def line(self, who: str) -> str:
        rate = self.received_bytes / self.seconds if self.seconds else 0.0
        board = self.printed_bytes / self.seconds if self.seconds else 0.0
        return (
            f"{who}: sent {self.printed:,} lines ({self.printed_bytes:,} bytes in {self.seconds:.1f} s, "
            f"{board:,.0f} B/s), received {len(self.received):,}, lost {self.lost:,}, "
            f"damaged {self.damaged}; "
            f"{rate:,.0f} B/s received = {rate / board if board else 0:.1%} of the board's rate; "
            f"pty overflow {self.dropped_bytes:,} bytes; last line {self.drain_s:.3f} s after the power-off"
        )


class Reading:
    """Numbered lines as they arrive, split from a byte stream."""

    def __init__(self) -> None:
        self.numbers: set[int] = set()
        self.flood_bytes = 0
        self.damaged = 0
        self.last_at = 0.0
        self._partial = b""
        self._started = False

    def feed(self, data: bytes) -> None:
        *lines, self._partial = (self._partial + data).split(b"\n")
        for line in lines:
            found = NUMBERED.search(line)
            if found is not None:
                self._started = True
                self.numbers.add(int(found.group(1)))
                self.flood_bytes += len(line) + 1
                self.last_at = time.monotonic()
            elif self._started and line.strip(b"\r"):
                self.damaged += 1  # a line cut or joined: bytes lost inside it


def printed(board: SimulatedBoard) -> tuple[int, int]:
    """The numbered lines the board printed, and their bytes (the last one tells the count)."""
    last = next(line for line in reversed(board.transcript) if "error -71 (" in line)
    count = int(last.rsplit("(", 1)[1].rstrip(")"))
    # Each line as long as the last but for its number's digits (the timestamp has a fixed width), + CR LF.
    fixed = len(last) - len(str(count)) + 2
    return count, count * fixed + sum(len(str(number)) for number in range(1, count + 1))


async def flood(board: SimulatedBoard, seconds: float) -> tuple[float, float]:
    """Let the powered board flood for ``seconds`` from its first numbered line, then switch it off: when
    that line came and when it went off (the loop's clock)."""
    while board.state is not State.FLOODING:
        await asyncio.sleep(0.005)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    board.power(False)
    return started, time.monotonic()


async def baseline(board: SimulatedBoard, seconds: float) -> Flood:
    """The flood read by the agent's console reader as a person's console reads it, in this process."""
    reading = Reading()
    console = Console(SerialConsole(board.path, BAUD), gather_s=INTERACTIVE_GATHER_S)
    await console.open()
    stop = console.tap(reading.feed)
    dropped = board.dropped_bytes
    board.mode, board.baud = Mode.FLOOD, BAUD
    board.power(True)
    started, off = await flood(board, seconds)
    await asyncio.sleep(DRAIN_S)
    stop()
    await console.close()
    count, size = printed(board)
    return Flood(
        count,
        size,
        off - started,
        reading.numbers,
        reading.flood_bytes,
        reading.damaged,
        board.dropped_bytes - dropped,
        max(0.0, reading.last_at - off),
    )


async def served(board: SimulatedBoard, pdu: GudePdu, seconds: float) -> Flood:
    """The flood read by ``kerrigan console`` through server and agent."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        devices = folder / "devices.yml"
        devices.write_text(
            "devices:\n"
            f"  {DEVICE}:\n"
            f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
            "off_s: 1, timeout_s: 10}\n"
            f"    console: {{serial: {{port: {board.path}}}}}\n",
            encoding="utf-8",
        )
        async with (
            process_lab(folder, inventory=INVENTORY, files={}) as lab,
            runner_agent(lab, "rig-01", "--devices-file", str(devices), "--isolation", "off"),
            aiohttp.ClientSession() as http,
        ):
            async with lab.database.sessions() as session, session.begin():
                token = await create_token(session, PERSON, lab.database.clock())
            headers = {"Authorization": f"Bearer {token}"}
            api = f"{lab.base}/api/v1"
            for _ in range(300):  # the agent registered
                async with http.post(
                    f"{api}/reservations", json={"device": DEVICE, "duration_s": 600}, headers=headers
                ) as made:
                    if made.status < 300:
                        reservation = (await made.json())["id"]
                        break
                await asyncio.sleep(0.1)
            for _ in range(300):  # granted once the agent reported the board present
                async with http.get(f"{api}/reservations/{reservation}", headers=headers) as found:
                    if (await found.json()).get("state") == "active":
                        break
                await asyncio.sleep(0.1)
            environment = {k: v for k, v in os.environ.items() if not k.startswith("KERRIGAN_")}
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "kerrigan.cli", "console", DEVICE,
                env=environment | {"KERRIGAN_URL": lab.base, "KERRIGAN_TOKEN": token},
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert process.stdin is not None
            assert process.stdout is not None
            assert process.stderr is not None
            connected = await asyncio.wait_for(process.stderr.readline(), 30)
            if b"connected to" not in connected:
                raise RuntimeError(f"kerrigan console did not connect: {connected!r}")
            reading = Reading()
            stdout = process.stdout

            async def read() -> None:
                while data := await stdout.read(65536):
                    reading.feed(data)

            reader = asyncio.create_task(read())
            dropped = board.dropped_bytes
            board.mode, board.baud = Mode.FLOOD, BAUD
            for _ in range(300):  # the agent's console is open now: every byte the board prints is read
                async with http.post(
                    f"{api}/devices/{DEVICE}/power", json={"action": "on"}, headers=headers
                ) as switched:
                    if switched.status == 200:
                        break
                await asyncio.sleep(0.1)
            started, off = await flood(board, seconds)
            await asyncio.sleep(DRAIN_S)
            process.stdin.write(LEAVE)
            await process.stdin.drain()
            await asyncio.wait_for(process.wait(), 30)
            await reader
    count, size = printed(board)
    return Flood(
        count,
        size,
        off - started,
        reading.numbers,
        reading.flood_bytes,
        reading.damaged,
        board.dropped_bytes - dropped,
        max(0.0, reading.last_at - off),
    )


async def run(seconds: float) -> bool:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    print(f"the board prints numbered lines at {BAUD:,} baud ({BAUD // 10:,} B/s) for {seconds:g} s")
    async with GudePdu(outlets=2) as pdu, SimulatedBoard(boot_s=0.3) as board:
        base = await baseline(board, seconds)
        print(base.line("baseline, the agent's console reader in process"))
        board.attach(pdu, OUTLET)
        through = await served(board, pdu, seconds)
        print(through.line("kerrigan console, through server and agent"))
    met = through.lost == 0 and through.damaged == 0 and through.printed > 0
    print(f"{'met' if met else 'missed'}: kerrigan console at {BAUD:,} baud loses nothing")
    return met


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s of flood instead of 30")
    parser.add_argument("--seconds", type=float, help="seconds of flood")
    args = parser.parse_args()
    asyncio.run(run(args.seconds or (2.0 if args.quick else 30.0)))


if __name__ == "__main__":
    main()
