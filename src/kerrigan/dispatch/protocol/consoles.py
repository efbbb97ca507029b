"""The agent's side of a person's console: ``GET /api/runner/v1/device-requests/{id}/console``, a WebSocket
the device's agent opens once its long poll handed it a console request (action ``console``), bridged to the
people watching (:mod:`kerrigan.store.consoles`). A shell in a held job's sandbox (``kerrigan shell``) is
bridged the same way at ``GET /api/runner/v1/job-shells/{id}``, from its own registry (``Database.shells``).

Binary frames up are the board's bytes, binary frames down the writer's keystrokes. The server ends the
session by closing the WebSocket (its close message says why); the agent, when the console goes away or
cannot be opened, by closing it with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from aiohttp import WSMsgType, web

from kerrigan.core.device_console import Frame, close_reason
from kerrigan.dispatch.protocol.requests import ProtocolError
from kerrigan.store.consoles import Consoles, ConsoleSession
from kerrigan.store.database import Database

MAX_UP_FRAME = 1 << 20  # a frame of the board's bytes: the agent reads in blocks of 64 KiB


class ConsoleCall:
    """``/device-requests/{request_id}/console``, for a host whose token was checked."""

    def __init__(self, database: Database, registry: Consoles | None = None) -> None:
        self.database = database
        self.registry = registry if registry is not None else database.consoles

    async def bridge(self, request: web.Request, host: str) -> web.StreamResponse:
        """Bridge the agent's WebSocket to the session it was handed; 404 for one not its or not open."""
        request_id = request.match_info["request_id"]
        session = self.registry.attach(request_id, host)
        if session is None:
            raise ProtocolError(404, "not_found", "no such console request waits for this host")
        socket = web.WebSocketResponse(max_msg_size=MAX_UP_FRAME, heartbeat=30.0)
        try:
            await socket.prepare(request)
        except Exception:
            session.end("the agent's WebSocket could not be opened", failed=True)
            raise
        down = asyncio.create_task(_keystrokes(session, socket), name="kerrigan-console-down")
        up = asyncio.create_task(_board(session, socket), name="kerrigan-console-up")
        ended = asyncio.create_task(session.ended.wait(), name="kerrigan-console-ended")
        try:
            await asyncio.wait({down, up, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (down, up, ended):
                task.cancel()
            await asyncio.gather(down, up, ended, return_exceptions=True)
            said, ok = (None, False)
            if up.done() and not up.cancelled() and up.exception() is None:
                said, ok = up.result()
            session.end(said or "the agent's WebSocket closed", failed=not ok)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(socket.close(message=close_reason(session.reason)), 2.0)
        return socket


async def _keystrokes(session: ConsoleSession, socket: web.WebSocketResponse) -> None:
    while True:
        await socket.send_bytes(await session.to_board.get())


async def _board(session: ConsoleSession, socket: web.WebSocketResponse) -> tuple[str, bool]:
    """The board's bytes to the watchers until the agent closes; why it did, and whether as sessions end
    (``"ok": true`` in its end frame: a shell that exited) rather than for a fault."""
    async for message in socket:
        if message.type is WSMsgType.BINARY:
            session.from_board(message.data)
        elif message.type is WSMsgType.TEXT:  # {"type": "end", "reason", "ok"}: why the agent ends it
            with contextlib.suppress(ValueError, AttributeError):
                said = json.loads(message.data)
                if said.get("type") == Frame.END.value:
                    reason = str(said.get("reason", ""))[:300] or "the agent ended the console"
                    return reason, said.get("ok") is True
    return "the agent closed the console", False
