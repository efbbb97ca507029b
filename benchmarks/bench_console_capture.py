"""The CPU one agent spends reading its boards' consoles: 16 serial consoles at 115,200 baud and one at
3 Mbaud, all printing at once.

Each console is a pseudo-terminal whose other end a writer process of its own prints numbered lines into,
paced at the console's baud (10 bits a byte on the wire, 8N1). Like a UART it never waits: what the terminal
cannot take is lost and counted. In this process the agent's own console readers
(:class:`~kerrigan.runner.boards.console.Console`, pyserial on the terminal, as a devices file's
``serial:`` console is read) hand what they read to a job's console log
(:class:`~kerrigan.runner.boards.console_log.ConsoleLog`, masked with two secrets), sent every 0.5 s to a
stand-in of the server that keeps the chunks, as the agent does for 17 jobs. Measured: this process's CPU
time (user + system, every thread: ``getrusage``) over the printing, as % of one core. After it, every
line is checked to have arrived at the stand-in server, whole and in order.

Baseline, in the same run: the same writers, read by a bare loop (a thread a console: ``select`` then
``os.read`` of 64 KiB) that keeps the bytes.

Target (issue 29): under 10% of one core, no line lost.

    python benchmarks/bench_console_capture.py            # 30 s of printing
    python benchmarks/bench_console_capture.py --quick    # 5 s
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import select
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kerrigan.core.masking import Masker
from kerrigan.runner.boards.console import Console
from kerrigan.runner.boards.console_log import ConsoleLog
from kerrigan.runner.devices_file.wiring import SerialConsole
from kerrigan.runner.wired_jobs import CONSOLE_SEND_S

BAUDS = (115_200,) * 16 + (3_000_000,)
TARGET_PERCENT = 10.0
LINE_BYTES = 80  # a line as printed, its CR LF included
TICK_S = 0.01  # how often a writer prints what is due
STARTUP_S = 3.0  # the writers start printing together, this long after they are started
SECRETS = ("hunter2-very-secret-token-0001", "another-secret-value-abcdef")
OUTPUT_MAX_BYTES = 1 << 30


def line(console: int, number: int) -> bytes:
    head = f"[{console:02d} {number:09d}] usb 1-1: device descriptor read/64, error -71 "
    return (head + "x" * (LINE_BYTES - len(head) - 2) + "\r\n").encode()


# The writer process (no import of Kerrigan's: 17 of them start at once): from the time ``start`` (epoch),
# numbered lines at ``baud`` for ``seconds``, never waiting; prints how many lines and the bytes lost.
WRITER = """\
import os, sys, time
fd, console, baud, seconds, start, size = (float(word) for word in sys.argv[1:])
fd, console, size = int(fd), int(console), int(size)
def line(number):
    head = f"[{console:02d} {number:09d}] usb 1-1: device descriptor read/64, error -71 "
    return (head + "x" * (size - len(head) - 2) + "\\r\\n").encode()
os.set_blocking(fd, False)
time.sleep(max(0.0, start - time.time()))
started = time.monotonic()
number = sent = lost = 0
while (elapsed := time.monotonic() - started) < seconds:
    due = int(elapsed * baud / 10)
    block = bytearray()
    while sent + len(block) + size <= due:
        block += line(number)
        number += 1
    if block:
        try:
            written = os.write(fd, block)
        except BlockingIOError:
            written = 0
        lost += len(block) - written
        sent += len(block)
    time.sleep(TICK_S)
print(number, lost, flush=True)
""".replace("TICK_S", repr(TICK_S))


@dataclass
class Pty:
    console: int
    baud: int
    master: int
    slave: int
    path: str
    received: int = 0  # bytes read
    lines: int = 0  # what its writer printed
    lost: int = 0  # bytes its writer could not write


def open_ptys() -> list[Pty]:
    ptys = []
    for console, baud in enumerate(BAUDS):
        master, slave = os.openpty()
        tty.setraw(slave)  # a serial port's bytes, not a terminal's cooked lines
        ptys.append(Pty(console, baud, master, slave, os.ttyname(slave)))
    return ptys


def close_ptys(ptys: list[Pty]) -> None:
    for pty in ptys:
        os.close(pty.master)
        os.close(pty.slave)


async def print_for(ptys: list[Pty], seconds: float, received: Callable[[], int]) -> tuple[float, float]:
    """Start the writers, wait for them and for what they wrote to be read; (CPU seconds, wall seconds)
    from the writers' first line to the last read."""
    start = time.time() + STARTUP_S
    writers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WRITER,
            *(str(value) for value in (pty.master, pty.console, pty.baud, seconds, start, LINE_BYTES)),
            stdout=subprocess.PIPE,
            pass_fds=(pty.master,),
        )
        for pty in ptys
    ]
    await asyncio.sleep(max(0.0, start - time.time()))
    before, started = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    for pty, writer in zip(ptys, writers, strict=True):
        out, _ = await writer.communicate()
        pty.lines, pty.lost = (int(word) for word in out.split())
    expected = sum(pty.lines * LINE_BYTES - pty.lost for pty in ptys)
    deadline = time.monotonic() + 5
    while received() < expected and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    after, ended = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, ended - started


@dataclass
class StandInServer:
    """What the server is sent of a job's console log: every chunk's text, acknowledged at once."""

    chunks: list[str] = field(default_factory=list)

    async def call(self, method: str, path: str, body: dict[str, Any], **_: Any) -> dict[str, Any]:
        self.chunks.append(body["data"])
        return {"next_seq": body["seq"] + 1}


async def send_every(log: ConsoleLog, server: StandInServer) -> None:
    while True:
        await asyncio.sleep(CONSOLE_SEND_S)
        await log.send(server, "job")  # type: ignore[arg-type]


def lost_lines(pty: Pty, text: str) -> int:
    """How many of the lines ``pty``'s writer printed are not in ``text`` whole and in order."""
    arrived = text.splitlines(keepends=True)
    if arrived == [line(pty.console, number).decode() for number in range(pty.lines)]:
        return 0
    whole = set(arrived)
    return sum(1 for number in range(pty.lines) if line(pty.console, number).decode() not in whole)


async def kerrigan(ptys: list[Pty], seconds: float) -> tuple[float, float, int]:
    """The agent's readers; (CPU s, wall s, lines lost)."""
    masker = Masker.for_secrets({f"secret {number}": value for number, value in enumerate(SECRETS)})
    consoles, logs, servers, senders = [], [], [], []
    for pty in ptys:
        log = ConsoleLog(masker, OUTPUT_MAX_BYTES)
        server = StandInServer()
        console = Console(SerialConsole(pty.path, pty.baud), sink=lambda at, data, log=log: log.feed(data))
        await console.open()
        consoles.append(console)
        logs.append(log)
        servers.append(server)
        senders.append(asyncio.create_task(send_every(log, server)))
    cpu, wall = await print_for(ptys, seconds, lambda: sum(console.bytes_read for console in consoles))
    for console, log, server, sender in zip(consoles, logs, servers, senders, strict=True):
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        await console.close()
        log.finish()
        await log.send(server, "job")  # type: ignore[arg-type]
    lost = sum(lost_lines(pty, "".join(server.chunks)) for pty, server in zip(ptys, servers, strict=True))
    return cpu, wall, lost


async def bare(ptys: list[Pty], seconds: float) -> tuple[float, float, int]:
    """A thread a console, ``select`` then ``os.read``; (CPU s, wall s, lines lost)."""
    stop = threading.Event()
    kept: list[list[bytes]] = [[] for _ in ptys]

    def read(pty: Pty, into: list[bytes]) -> None:
        while not stop.is_set():
            if select.select([pty.slave], [], [], 0.25)[0]:
                data = os.read(pty.slave, 65536)
                pty.received += len(data)
                into.append(data)

    threads = [
        threading.Thread(target=read, args=(pty, into), daemon=True)
        for pty, into in zip(ptys, kept, strict=True)
    ]
    for thread in threads:
        thread.start()
    cpu, wall = await print_for(ptys, seconds, lambda: sum(pty.received for pty in ptys))
    stop.set()
    for thread in threads:
        thread.join()
    lost = sum(lost_lines(pty, b"".join(into).decode()) for pty, into in zip(ptys, kept, strict=True))
    return cpu, wall, lost


def report(name: str, cpu: float, wall: float, lost: int, ptys: list[Pty]) -> float:
    percent = cpu / wall * 100
    lines = sum(pty.lines for pty in ptys)
    dropped = sum(pty.lost for pty in ptys)
    print(
        f"{name}: {percent:.1f}% of one core ({cpu:.2f} s CPU over {wall:.1f} s), "
        f"{lines:,} lines printed, {lost} lost, {dropped} bytes the terminals could not take"
    )
    return percent


async def run(seconds: float) -> bool:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    total = sum(baud / 10 for baud in BAUDS)
    print(
        f"{len(BAUDS) - 1} consoles at 115,200 baud and 1 at 3 Mbaud, {seconds:g} s: "
        f"{total / 1000:,.0f} kB/s in all, lines of {LINE_BYTES} bytes"
    )
    ptys = open_ptys()
    try:
        report("baseline, bare select and os.read", *await bare(ptys, seconds), ptys)
    finally:
        close_ptys(ptys)
    ptys = open_ptys()
    try:
        cpu, wall, lost = await kerrigan(ptys, seconds)
        percent = report("kerrigan's console readers and console logs", cpu, wall, lost, ptys)
    finally:
        close_ptys(ptys)
    met = percent < TARGET_PERCENT and lost == 0 and not any(pty.lost for pty in ptys)
    print(f"{'met' if met else 'missed'}: under {TARGET_PERCENT:g}% of one core, no line lost")
    return met


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="5 s of printing instead of 30")
    args = parser.parse_args()
    asyncio.run(run(5.0 if args.quick else 30.0))


if __name__ == "__main__":
    main()
