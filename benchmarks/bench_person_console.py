"""How soon a keystroke typed on a person's console comes back from the board, across real processes.

``kerrigan serve`` (SQLite), the GitHub stand-in and a ``kerrigan runner`` agent run as their own processes;
in this one, the Gude PDU stand-in and a simulated board (``kerrigan.testing.board``, a pty console) wired to
the agent's one device. The person reserves the board, powers it on (``POST /api/v1/devices/{id}/power``),
opens its console (``GET /api/v1/devices/{id}/console``, a WebSocket), logs in, and types one character at
a time; the board echoes each, as a terminal does. Per keystroke: from its send on the person's WebSocket to
its echo read there (person, server, agent, board and back).

Baseline, in the same run: the same board and keystrokes through the agent's own console reader
(:class:`~kerrigan.runner.boards.console.Console`) in this process: written, then its echo tapped.

Target (issue 30): p95 keystroke to board and back <= 50 ms.

    python benchmarks/bench_person_console.py            # 300 keystrokes
    python benchmarks/bench_person_console.py --quick    # 60
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import aiohttp

from kerrigan.runner.boards.console import INTERACTIVE_GATHER_S, Console
from kerrigan.runner.devices_file.wiring import SerialConsole
from kerrigan.store.tokens import create_token
from kerrigan.testing.board import HOSTNAME, PROMPT, SimulatedBoard, State
from kerrigan.testing.pdu import MODEL, GudePdu
from kerrigan.testing.process_lab import process_lab, runner_agent

DEVICE = "board-a"
OUTLET = 1
PERSON = "octocat"
TARGET_P95_S = 0.050
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


def spread(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "none"
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    median, top = statistics.median(ordered) * 1000, ordered[-1] * 1000
    return f"p50 {median:.1f} ms, p95 {p95 * 1000:.1f} ms, max {top:.1f} ms"


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else float("inf")


async def baseline(board: SimulatedBoard, count: int) -> list[float]:
    """Keystrokes through the agent's console reader as a person's console reads (its short gather), in
    this process: written, their echo tapped."""
    echoed = asyncio.Event()
    console = Console(SerialConsole(board.path, 115_200), gather_s=INTERACTIVE_GATHER_S)
    await console.open()
    stop = console.tap(lambda data: echoed.set() if b"x" in data else None)
    board.power(True)
    while board.state is not State.LOGIN:
        await asyncio.sleep(0.05)
    delays = []
    for n in range(count):
        echoed.clear()
        started = time.perf_counter()
        await console.write(b"x")
        await echoed.wait()
        delays.append(time.perf_counter() - started)
        if n % 50 == 49:
            await console.write(b"\x03")  # a fresh line
            await asyncio.sleep(0.05)
    stop()
    await console.close()
    board.power(False)
    return delays


async def until(socket: aiohttp.ClientWebSocketResponse, text: bytes) -> None:
    seen = b""
    while text not in seen:
        message = await socket.receive(timeout=30)
        if message.type is aiohttp.WSMsgType.BINARY:
            seen += message.data
        elif message.type is not aiohttp.WSMsgType.TEXT:
            raise RuntimeError(f"the console closed: {message!r}")


async def served(board: SimulatedBoard, pdu: GudePdu, count: int) -> list[float]:
    """The lab: the person's keystrokes through server and agent, each echo's round trip."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
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
                        break
                await asyncio.sleep(0.1)
            for _ in range(300):
                async with http.post(
                    f"{api}/devices/{DEVICE}/power", json={"action": "on"}, headers=headers
                ) as switched:
                    if switched.status == 200:
                        break
                await asyncio.sleep(0.1)
            while board.state is not State.LOGIN:
                await asyncio.sleep(0.05)
            socket = await http.ws_connect(f"{api}/devices/{DEVICE}/console", headers=headers)
            await socket.send_bytes(b"\n")
            await until(socket, f"{HOSTNAME} login:".encode())
            await socket.send_bytes(b"root\n")
            await until(socket, PROMPT.encode())
            delays = []
            for n in range(count):
                started = time.perf_counter()
                await socket.send_bytes(b"x")
                await until(socket, b"x")
                delays.append(time.perf_counter() - started)
                if n % 50 == 49:
                    await socket.send_bytes(b"\x03")
                    await until(socket, PROMPT.encode())
            await socket.close()
    return delays


async def run(count: int) -> bool:
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    async with GudePdu(outlets=2) as pdu, SimulatedBoard(boot_s=0.3) as board:
        base = await baseline(board, count)
        board.attach(pdu, OUTLET)
        through = await served(board, pdu, count)
    print(f"baseline, keystroke to echo through the agent's console reader (in process): {spread(base)}")
    print(f"kerrigan console, keystroke to echo through server and agent: {spread(through)}; {len(through)}")
    met = p95(through) <= TARGET_P95_S and len(through) == count
    print(f"{'met' if met else 'missed'}: keystroke to board and back p95 <= {TARGET_P95_S * 1000:g} ms")
    return met


def main() -> None:
    """Run the benchmark and print the figures and whether the target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="60 keystrokes instead of 300")
    args = parser.parse_args()
    asyncio.run(run(60 if args.quick else 300))


if __name__ == "__main__":
    main()
