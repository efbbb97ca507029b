"""A person's console of a board that floods at 115,200 baud while the agent's event loop is held up for a
while (a slow disk's write, a busy host): the agent's console reader thread reads on, and every byte it read
reaches the server's WebSocket once the loop runs again (:mod:`kerrigan.runner.person_console`). The board
prints in a thread of its own, as a real board does beside the agent; the server is an aiohttp WebSocket in
this process that keeps what it is sent."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from typing import Final

import aiohttp
import pytest
from aiohttp import web

from kerrigan.runner.boards.board_locks import BoardLocks
from kerrigan.runner.devices_file.wiring import SerialConsole, Wiring
from kerrigan.runner.person_console import PersonConsole
from kerrigan.testing.board import Mode, SimulatedBoard, State
from kerrigan.testing.waiting import wait_until

pytest.importorskip("serial", reason="pyserial comes with the test extra (labgrid's pyserial-labgrid)")

NUMBERED: Final = re.compile(rb"error -71 \((\d+)\)\r\n")
STALL_S: Final = 6.0  # the agent's loop held up: some 1,000 of the reader's blocks meanwhile, 69 KB


@pytest.fixture
def board() -> Iterator[tuple[SimulatedBoard, asyncio.AbstractEventLoop]]:
    """A flooding board on a loop of its own thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="board", daemon=True)
    thread.start()
    simulated = SimulatedBoard(boot_s=0.1, mode=Mode.FLOOD, baud=115_200)
    asyncio.run_coroutine_threadsafe(simulated.start(), loop).result(10)
    yield simulated, loop
    asyncio.run_coroutine_threadsafe(simulated.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.fixture
async def server(aiohttp_server: object) -> tuple[str, bytearray, asyncio.Event]:
    """The server's end of the agent's WebSocket: what it was sent, and an event that closes it."""
    received = bytearray()
    closing = asyncio.Event()

    async def console(request: web.Request) -> web.WebSocketResponse:
        socket = web.WebSocketResponse()
        await socket.prepare(request)

        async def keep() -> None:
            async for message in socket:
                if message.type is aiohttp.WSMsgType.BINARY:
                    received.extend(message.data)

        keeping = asyncio.create_task(keep())
        await closing.wait()
        await socket.close()
        await keeping
        return socket

    app = web.Application()
    app.router.add_get("/console", console)
    served = await aiohttp_server(app)  # type: ignore[operator]
    return str(served.make_url("/console")), received, closing


async def test_a_flood_read_while_the_agents_loop_is_held_up_reaches_the_server_whole(
    board: tuple[SimulatedBoard, asyncio.AbstractEventLoop], server: tuple[str, bytearray, asyncio.Event]
) -> None:
    simulated, board_loop = board
    url, received, closing = server
    async with aiohttp.ClientSession() as http:
        bridge = PersonConsole(
            lambda device: Wiring(console=SerialConsole(simulated.path, 115_200)),
            lambda device: False,
            lambda request_id: http.ws_connect(url),
            BoardLocks(),
        )
        bridging = asyncio.create_task(bridge.perform({"id": "r1", "device": "dev-a1"}))
        await asyncio.sleep(0.5)  # the console is open
        board_loop.call_soon_threadsafe(simulated.power, True)
        await wait_until(lambda: NUMBERED.search(received) is not None, timeout=15)
        time.sleep(STALL_S)  # the agent's loop held up, its reader thread reading on
        await asyncio.sleep(0.5)
        board_loop.call_soon_threadsafe(simulated.power, False)
        await wait_until(lambda: simulated.state is State.OFF, timeout=15)
        await asyncio.sleep(0.5)  # the last lines on their way
        closing.set()
        await asyncio.wait_for(bridging, 15)
    numbers = [int(found) for found in NUMBERED.findall(received)]
    assert simulated.dropped_bytes == 0  # the reader kept up with the board: nothing lost at its pty
    missing = sorted(set(range(numbers[0], numbers[-1] + 1)) - set(numbers))
    assert missing == [], f"{len(missing)} lines lost, from {missing[0]}"
    assert numbers[-1] >= 200  # it flooded across the stall
