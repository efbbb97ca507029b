"""How soon a line a board prints on its console can be read on the session page, across real processes.

``kerrigan serve`` (SQLite, public read), the GitHub stand-in and a ``kerrigan runner`` agent run as their
own processes; in this one, the Gude PDU stand-in and a simulated board (``kerrigan.testing.board``, a pty
console) wired to the agent's one device through its devices file (``power`` through labgrid's gude backend,
``console: serial``, ``boot.ready: login:``). A push queues a wired job whose command sleeps; once it runs,
the board prints numbered lines at a steady pace (``LINES_PER_S``), and a reader of the session page's live
console (``/sessions/{id}/jobs/{job}/console/stream``, the server-sent events ``static/session.js``
appends) notes when each line was first readable there. Per line: from its printing on the board to that.

Where the time goes, in the same run:

- baseline: the same board, pace and lines read by the agent's own console reader
  (:class:`~kerrigan.runner.boards.console.Console`) in this process: print to its sink;
- print to stored: each line's arrival at the server (the raw console's ``?timestamps=true``, in ms);
- stored to page: the rest, the page stream's wait for the store.

Target (issue 29): p95 of print to the page within 1 s, no line lost.

    python benchmarks/bench_console_latency.py            # 30 s of printing
    python benchmarks/bench_console_latency.py --quick    # 6 s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import aiohttp

from kerrigan.runner.boards.console import Console
from kerrigan.runner.devices_file.wiring import SerialConsole
from kerrigan.store.models import SessionRow
from kerrigan.testing.board import SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.process_lab import ProcessLab, jobs_of, process_lab, push, runner_agent

SHA = "1a7e" * 10
DEVICE = "board-a"
OUTLET = 1
BOOT_S = 0.5
LINES_PER_S = 20
TARGET_P95_S = 1.0
TICK = re.compile(r"tick (\d{6})")
INVENTORY = f"""
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    labels: {{sdk: "2.2.0"}}
    devices:
      - {{id: {DEVICE}, board: modalix, target_type: devkit, os_type: linux, host: rig-01}}
"""


def manifest(seconds: float) -> str:
    """One wired task that sleeps while the board prints (and a little after: the last lines arrive)."""
    return (
        "name: latency\n"
        "on: {push: {branches: [main]}}\n"
        "retry: {infrastructure: 0}\n"
        "scheduling: {labels: {sdk: '2.2.0'}}\n"
        f"tasks:\n  - {{id: console, run: 'sleep {seconds + 3:.0f}', vcpus: 1}}\n"
    )


class TickingBoard(SimulatedBoard):
    """The simulated board, printing numbered lines on demand and noting when (epoch) each was written."""

    def __init__(self) -> None:
        super().__init__(boot_s=BOOT_S)
        self.printed_at: dict[int, float] = {}

    async def tick(self, count: int, first: int = 0) -> None:
        """``count`` lines at ``LINES_PER_S``, paced from the start (a late wake-up does not slow it)."""
        started = time.monotonic()
        for n in range(count):
            await asyncio.sleep(max(0.0, started + n / LINES_PER_S - time.monotonic()))
            self.printed_at[first + n] = time.time()
            self._print_line(f"tick {first + n:06d} the board is working")


@dataclass
class Seen:
    """When each numbered line was first readable, from text arriving piece by piece."""

    at: dict[int, float] = field(default_factory=dict)
    _partial: str = ""

    def feed(self, text: str) -> None:
        now = time.time()
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()
        for line in lines:
            if (match := TICK.search(line)) is not None:
                self.at.setdefault(int(match.group(1)), now)


async def baseline(board: TickingBoard, count: int) -> list[float]:
    """Print to the sink of the agent's console reader, in this process."""
    seen = Seen()
    console = Console(SerialConsole(board.path, 115_200), sink=lambda at, data: seen.feed(data.decode()))
    await console.open()
    board.power(True)
    while board.state is not State.LOGIN:
        await asyncio.sleep(0.05)
    await board.tick(count)
    await asyncio.sleep(0.5)
    await console.close()
    board.power(False)
    delays = [seen.at[n] - board.printed_at[n] for n in range(count) if n in seen.at]
    board.printed_at.clear()
    return delays


async def read_stream(http: aiohttp.ClientSession, url: str, seen: Seen) -> None:
    """The page's live console, as ``session.js`` reads it: each message's chunk appended, until ``end``
    (reconnecting from the last chunk, as the browser does, if the connection closes before it)."""
    after = -1
    while True:
        async with http.get(url, params={"after": str(after)}) as response:
            event = ""
            async for raw in response.content:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    if event == "end":
                        return
                    chunk = json.loads(line.removeprefix("data: "))
                    seen.feed(chunk["data"])
                    after = chunk["seq"]
                elif not line:
                    event = ""


async def arrivals(http: aiohttp.ClientSession, base: str, job_pk: int) -> dict[int, float]:
    """Each numbered line's arrival at the server (epoch), from the raw console with its times."""
    async with http.get(f"{base}/api/v1/jobs/{job_pk}/console", params={"timestamps": "true"}) as answer:
        text = await answer.text()
    found = {}
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        if (match := TICK.search(rest)) is not None and stamp.endswith("Z"):
            found[int(match.group(1))] = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    return found


async def running_job(lab: ProcessLab, timeout: float = 60) -> tuple[str, int]:
    """The session id and job of the push, once the job runs (its board booted, its command started)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for row in await jobs_of(lab):
            if row.state == "running":
                async with lab.database.sessions() as db:
                    session = await db.get(SessionRow, row.session_pk)
                    assert session is not None
                    return session.id, row.pk
        await asyncio.sleep(0.05)
    raise AssertionError(f"no running job after {timeout} s")


async def served(
    board: TickingBoard, pdu: GudePdu, count: int, seconds: float
) -> tuple[Seen, dict[int, float]]:
    """The lab: the job runs, the board prints ``count`` lines; what the page saw and what the server
    stored when."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(os.environ.get("BENCH_CONSOLE_LATENCY_DIR") or name)  # kept for its logs when set
        devices = folder / "devices.yml"
        devices.write_text(
            "devices:\n"
            f"  {DEVICE}:\n"
            f"    power: {{pdu: {{model: {MODEL}, host: '127.0.0.1:{pdu.port}', index: {OUTLET}}}, "
            "off_s: 1, timeout_s: 10}\n"
            f"    console: {{serial: {{port: {board.path}}}}}\n"
            "    boot: {ready: 'login:', timeout_s: 30}\n",
            encoding="utf-8",
        )
        async with (
            process_lab(
                folder,
                inventory=INVENTORY,
                files={".kerrigan/workflows/latency.yml": manifest(seconds)},
                environment={"KERRIGAN_PUBLIC_READ": "1"},
                github_arguments=["--public"],
            ) as lab,
            runner_agent(lab, "rig-01", "--devices-file", str(devices), "--isolation", "off", graceful=True),
            aiohttp.ClientSession() as http,
        ):
            await push(lab, SHA)
            session_id, job_pk = await running_job(lab)
            seen = Seen()
            url = f"{lab.base}/sessions/{session_id}/jobs/{job_pk}/console/stream"
            reader = asyncio.create_task(read_stream(http, url, seen))
            await asyncio.sleep(0.5)  # the reader is connected and has what the board printed so far
            await board.tick(count)
            await asyncio.wait_for(reader, timeout=seconds + 30)
            stored = await arrivals(http, lab.base, job_pk)
    return seen, stored


def spread(values: list[float]) -> str:
    if not values:
        return "none"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"p50 {statistics.median(ordered):.3f} s, p95 {p95:.3f} s, max {ordered[-1]:.3f} s"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("inf")


async def run(seconds: float) -> bool:
    count = int(seconds * LINES_PER_S)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    print(f"{count} lines at {LINES_PER_S} a second ({seconds:g} s) on a simulated board's console")
    async with GudePdu(outlets=2) as pdu, TickingBoard() as board:
        base = await baseline(board, count)
        board.attach(pdu, OUTLET)
        seen, stored = await served(board, pdu, count, seconds)
    printed = board.printed_at
    print(
        f"baseline, print to the agent's console reader's sink (in process): {spread(base)}; {len(base)} seen"
    )
    page = [seen.at[n] - printed[n] for n in printed if n in seen.at]
    to_store = [stored[n] - printed[n] for n in printed if n in stored]
    store_to_page = [seen.at[n] - stored[n] for n in printed if n in stored and n in seen.at]
    print(f"kerrigan, print to stored at the server: {spread(to_store)}; {len(to_store)} stored")
    print(f"  stored to readable on the session page's stream: {spread(store_to_page)}")
    print(f"  print to readable on the session page: {spread(page)}; {len(page)} of {count} lines seen")
    met = p95(page) <= TARGET_P95_S and len(page) == count
    print(f"{'met' if met else 'missed'}: print to the session page p95 <= {TARGET_P95_S:g} s, no line lost")
    return met


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 s of printing instead of 30")
    args = parser.parse_args()
    asyncio.run(run(6.0 if args.quick else 30.0))


if __name__ == "__main__":
    main()
