"""``python -m kerrigan.testing.wires``: the commands a devices file wires a simulated board with where
neither labgrid nor pyserial is installed (``kerrigan demo``'s runner agents), run as the agent runs them:
real processes, the PDU stand-in and the board's console socket on loopback."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator

import pytest

from kerrigan.testing.board import PROMPT, RELEASE, SimulatedBoard, State
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.waiting import wait_until

BOOT_S = 0.3
OUTLET = 3
# Long enough for a loaded machine; never waited out by a test that passes.
GRACE_S = 10.0
WIRES = (sys.executable, "-m", "kerrigan.testing.wires")


@pytest.fixture
async def pdu() -> AsyncIterator[GudePdu]:
    async with GudePdu(outlets=4) as stand_in:
        yield stand_in


@pytest.fixture
async def board(pdu: GudePdu) -> AsyncIterator[SimulatedBoard]:
    simulated = SimulatedBoard(boot_s=BOOT_S)
    await simulated.start(serve_socket=True)
    simulated.attach(pdu, OUTLET)
    yield simulated
    await simulated.close()


async def outlet(pdu: GudePdu, *arguments: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        *WIRES, "outlet", *arguments, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(process.communicate(), GRACE_S)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_outlet_switches_the_stand_in_s_outlet_and_says_whether_it_is_on(
    pdu: GudePdu, board: SimulatedBoard
) -> None:
    assert await outlet(pdu, pdu.url, str(OUTLET), "status") == (1, "off\n")
    assert await outlet(pdu, pdu.url, str(OUTLET), "on") == (0, "on\n")
    assert pdu.is_on(OUTLET)
    assert board.powered
    assert await outlet(pdu, pdu.url, str(OUTLET), "status") == (0, "on\n")
    assert await outlet(pdu, pdu.url, str(OUTLET), "off") == (0, "off\n")
    assert not board.powered
    assert pdu.switches == [(OUTLET, True), (OUTLET, False)]


async def test_outlet_fails_when_the_pdu_fails_or_is_not_there(pdu: GudePdu) -> None:
    pdu.fail(503)
    status, out = await outlet(pdu, pdu.url, str(OUTLET), "on")
    assert (status, out) == (2, f"PDU at {pdu.url}: answered 503 Service Unavailable\n")
    assert not pdu.is_on(OUTLET)
    status, out = await outlet(pdu, "http://127.0.0.1:1", str(OUTLET), "on")
    assert status == 2
    assert out.startswith("PDU at http://127.0.0.1:1: ")
    assert (await outlet(pdu, pdu.url, str(OUTLET), "toggle"))[0] == 2


async def test_console_bridges_stdin_and_stdout_to_the_board(pdu: GudePdu, board: SimulatedBoard) -> None:
    assert board.socket_url is not None
    process = await asyncio.create_subprocess_exec(
        *WIRES,
        "console",
        board.socket_url.removeprefix("socket://"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    await wait_until(lambda: board.connections == 1, timeout=GRACE_S)  # connected: it hears the boot
    pdu.switch(OUTLET, True)
    boot = await asyncio.wait_for(process.stdout.readuntil(b"kerrigan-board login: "), GRACE_S)
    assert b"Starting kernel ...\r\n" in boot
    process.stdin.write(b"root\runame -r\r")
    answer = await asyncio.wait_for(process.stdout.readuntil(f"{RELEASE}\r\n{PROMPT}".encode()), GRACE_S)
    assert answer.startswith(b"root\r\n")
    assert board.state is State.SHELL
    process.stdin.close()  # the agent closes the console: the bridge ends
    assert await asyncio.wait_for(process.wait(), GRACE_S) == 0
