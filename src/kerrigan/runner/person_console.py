"""A person's console of a board (``kerrigan console``), as the long poll hands it to the agent
(``device_requests``, action ``console``): the agent opens a WebSocket to the server
(``/api/runner/v1/device-requests/{id}/console``) and bridges it to the board's console, opened from the
devices file's wiring: the board's bytes go up as binary frames, the person's keystrokes come down.

The server hands a console only for a device no job holds; the agent checks again, and opens one person's
console of a board at a time. Each keystroke is written under the board's lock
(:mod:`kerrigan.runner.boards.board_locks`), which a job taking the board holds too, and only while no job
holds it: a person's keys never reach a board in the middle of a job's power-cycle and boot (a key at
U-Boot's ``Hit any key to stop autoboot`` would stop it). A job taking a board also waits (at most
:data:`CLOSE_WAIT_S`) for a person's console of it to close, so that its own console reader is the only
one. What cannot be done (no console wiring, a job holds it, the console does not open or goes away) is
said to the server as ``{"type": "end", "reason"}`` before the WebSocket closes.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import aiohttp

from kerrigan.core.device_console import Frame
from kerrigan.runner.boards.board_locks import BoardLocks
from kerrigan.runner.boards.console import INTERACTIVE_GATHER_S, Console, ConsoleLost
from kerrigan.runner.devices_file.wiring import Wiring

log = logging.getLogger(__name__)

BUSY_CHECK_S: Final = 0.2  # how often an open console looks whether a job of this agent took its board
# The board's bytes waiting for the WebSocket, counted in bytes (not in the reader's blocks, which a
# person's short gather makes small: 256 of them were 2 to 3 s of a 115,200 baud board, lost whenever the
# agent's loop was held up that long): about 90 s of 115,200 baud. Past this they are dropped, like a UART's.
UP_QUEUED_BYTES: Final = 1 << 20
UP_FRAME_BYTES: Final = 64 * 1024  # at most this in one frame (the server takes frames of up to 1 MiB)
CLOSE_WAIT_S: Final = 5.0  # how long a job taking a board waits for a person's console of it to close

Connect = Callable[[str], Awaitable[aiohttp.ClientWebSocketResponse]]


class PersonConsole:
    """Bridges the consoles people ask for to one agent's boards; ``busy(device)`` says whether a job holds
    one, ``connect(request_id)`` opens the WebSocket to the server, ``locks`` are the boards' locks the
    agent's jobs take too."""

    def __init__(
        self,
        wiring_of: Callable[[str], Wiring | None],
        busy: Callable[[str], bool],
        connect: Connect,
        locks: BoardLocks,
    ) -> None:
        self._wiring_of = wiring_of
        self._busy = busy
        self._connect = connect
        self._locks = locks
        self._open: dict[str, asyncio.Event] = {}  # device -> set once its console closed

    async def closed(self, device_id: str) -> None:
        """Once no person's console of ``device_id`` is open (at most :data:`CLOSE_WAIT_S`: a job that took
        the board ends it within :data:`BUSY_CHECK_S`, then it closes)."""
        done = self._open.get(device_id)
        if done is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), CLOSE_WAIT_S)

    async def perform(self, asked: Mapping[str, Any]) -> None:
        """Bridge one console request until the server or the console ends it."""
        request_id, device_id = str(asked.get("id")), str(asked.get("device"))
        try:
            socket = await self._connect(request_id)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("console of %s for a person: the server's WebSocket did not open: %s", device_id, err)
            return
        try:
            refused = self._refusal(device_id)
            if refused is not None:
                await _end(socket, refused)
                return
            wiring = self._wiring_of(device_id)
            console = wiring.console if wiring is not None else None
            if console is None:  # the devices file was read anew meanwhile
                await _end(socket, f"{device_id} has no console wiring in this host's devices file")
                return
            done = self._open[device_id] = asyncio.Event()
            try:
                await self._bridge(socket, device_id, Console(console, gather_s=INTERACTIVE_GATHER_S))
            finally:
                del self._open[device_id]
                done.set()
        finally:
            with contextlib.suppress(Exception):
                await socket.close()

    def _refusal(self, device_id: str) -> str | None:
        wiring = self._wiring_of(device_id)
        if wiring is None or wiring.console is None:
            return f"{device_id} has no console wiring in this host's devices file"
        if self._busy(device_id):
            return f"a job holds {device_id} on this host: the job has its console"
        if device_id in self._open:
            return f"{device_id}'s console is open for a person already on this host"
        return None

    async def _bridge(
        self, socket: aiohttp.ClientWebSocketResponse, device_id: str, console: Console
    ) -> None:
        try:
            await console.open()
        except ConsoleLost as err:
            await _end(socket, str(err))
            return
        up = Backlog(UP_QUEUED_BYTES)
        stop_tap = console.tap(up.offer)
        log.info("console of %s opened for a person", device_id)
        sending = asyncio.create_task(_send(socket, up), name="kerrigan-person-console-up")
        typing = asyncio.create_task(
            self._type(socket, device_id, console), name="kerrigan-person-console-down"
        )
        gone = asyncio.create_task(console.gone.wait(), name="kerrigan-person-console-gone")
        # A job offered the board (the server ends the session too, within a second): the job's console.
        taken = asyncio.create_task(self._until_busy(device_id), name="kerrigan-person-console-taken")
        tasks = (sending, typing, gone, taken)
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            lost = console.lost
            if lost is None and typing.done() and not typing.cancelled():
                lost = typing.result()
            if lost is None and taken.done():
                lost = f"a job holds {device_id} on this host now: the job has its console"
            if lost is not None:
                await _end(socket, lost)
        finally:
            stop_tap()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await console.close()
            if up.dropped:
                log.warning(
                    "console of %s for a person: %d bytes dropped, the server lagged", device_id, up.dropped
                )
            log.info("console of %s for a person closed", device_id)

    async def _until_busy(self, device_id: str) -> None:
        while not self._busy(device_id):
            await asyncio.sleep(BUSY_CHECK_S)

    async def _type(
        self, socket: aiohttp.ClientWebSocketResponse, device_id: str, console: Console
    ) -> str | None:
        """The person's keystrokes to the board until the server closes; why the console failed or ended
        (a job took the board), if it did."""
        async for message in socket:
            if message.type is aiohttp.WSMsgType.BINARY:
                async with self._locks.of(device_id):
                    if self._busy(device_id):  # taken while this waited for the lock: the keys are the job's
                        return f"a job holds {device_id} on this host now: the job has its console"
                    try:
                        await console.write(message.data)
                    except ConsoleLost as err:
                        return str(err)
        return None


class Backlog:
    """The board's bytes on their way to the WebSocket: at most ``limit`` bytes wait; past that what the
    board prints is dropped (``dropped`` counts it) until the WebSocket takes some, as a UART drops what
    nobody reads."""

    def __init__(self, limit: int) -> None:
        self._blocks: collections.deque[bytes] = collections.deque()
        self._size = 0
        self._limit = limit
        self._ready = asyncio.Event()
        self.dropped = 0

    def offer(self, data: bytes) -> None:
        """The console read ``data``: kept for the WebSocket, or dropped when too much waits."""
        if self._size + len(data) > self._limit:
            self.dropped += len(data)
            return
        self._blocks.append(data)
        self._size += len(data)
        self._ready.set()

    async def take(self, most: int) -> bytes:
        """What waits, joined, at most ``most`` bytes (a block larger than that whole); waits for some."""
        while not self._blocks:
            self._ready.clear()
            await self._ready.wait()
        taken = [self._blocks.popleft()]
        size = len(taken[0])
        while self._blocks and size + len(self._blocks[0]) <= most:
            block = self._blocks.popleft()
            taken.append(block)
            size += len(block)
        self._size -= size
        return b"".join(taken)


async def _send(socket: aiohttp.ClientWebSocketResponse, up: Backlog) -> None:
    while True:
        await socket.send_bytes(await up.take(UP_FRAME_BYTES))  # what gathered meanwhile, in one frame


async def _end(socket: aiohttp.ClientWebSocketResponse, reason: str) -> None:
    log.warning("console for a person ended: %s", reason)
    with contextlib.suppress(Exception):
        await socket.send_str(json.dumps({"type": Frame.END.value, "reason": reason}))
