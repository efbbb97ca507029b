"""``GET /api/v1/devices/{device_id}/console``: a board's console in a person's hands, as a WebSocket
(docs/api.md, docs/reservations.md ``kerrigan console``).

Who opens it: a client with an API token, or a browser signed in to this site's pages from one of them
(the device page's console: :mod:`kerrigan.web.socket_auth`). Who may: the person whose reservation holds
the device and System Admins type (one writer at a time: a second one watches), the owners of its pool
watch read-only; anyone else is a 403 naming what they lack, before the upgrade and before anything reaches
the agent. A device a job holds is a 409 (the job has the console), a host whose agent is offline a 503,
one that does not speak ``device_console`` a 409.

The console request is handed to the device's host in its long poll and its agent connects back
(:mod:`kerrigan.dispatch.protocol.consoles`); both WebSockets meet in this process
(:mod:`kerrigan.store.consoles`, which says what that means with several replicas). The session ends when
its last watcher leaves, after ``KERRIGAN_CONSOLE_IDLE_S`` without a keystroke, when the device's holder
changes (the reservation ended, a job took it), or when the agent does not connect within
:data:`~kerrigan.core.device_console.AGENT_WITHIN_S` or goes away; a watcher who may watch no more (an
owner removed from the device's pool) is cut off, checked as often as the holder. At most
:data:`~kerrigan.core.device_console.MAX_WATCHERS` people watch one console at once (one more: 409
``too_many``). Each person's time on it is audited.

Frames: binary both ways (the board's bytes down, keystrokes up; a text frame up is typed as its UTF-8);
text frames down are JSON: ``{"type": "open", "device", "read_only"}`` first, ``{"type": "notice",
"message"}``, and ``{"type": "end", "reason", "ok"}`` last, before the close (code 1000 for a session that
ended as sessions do, 1008 for a watcher cut off, 1011 for a fault of the agent or the console).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final

from aiohttp import WSMsgType, web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_console import (
    AGENT_WITHIN_S,
    CAPABILITY,
    HOLDER_CHECK_S,
    KEYSTROKE_FRAME_MAX,
    Access,
    Frame,
    close_reason,
    console_access,
    watchers_refusal,
)
from kerrigan.core.device_power import Holder
from kerrigan.core.roles import Principal
from kerrigan.store.consoles import ConsoleSession, Watcher, audit_console
from kerrigan.store.database import Database
from kerrigan.store.device_requests import device_holder
from kerrigan.store.inventory import NotFoundError, get_device
from kerrigan.store.runners import host_report
from kerrigan.web.errors import ApiError
from kerrigan.web.socket_auth import socket_principal
from kerrigan.web.state import DATABASE, SETTINGS, writing

routes = web.RouteTableDef()

CLOSE_WAIT_S: Final = 2.0  # a WebSocket that does not take its close frame within this is dropped
CLOSED_NORMALLY: Final = 1000
CUT_OFF: Final = 1008
FAULT: Final = 1011


@routes.get("/devices/{device_id}/console")
async def device_console(request: web.Request) -> web.StreamResponse:
    """Bridge the person's WebSocket to the device's console (see the module's words)."""
    principal = await socket_principal(request)
    device_id = request.match_info["device_id"]
    database = request.config_dict[DATABASE]
    async with database.sessions() as session:
        try:
            stored = await get_device(session, device_id)
        except NotFoundError:
            raise ApiError(404, "not_found", f"there is no device {device_id[:63]!r}") from None
        holder = await device_holder(session, device_id, database.clock())
        access = console_access(principal, device_id, holder, stored.pool.owners)
        if not isinstance(access, Access):  # a StrEnum is a str too: asked the other way round
            raise ApiError(
                403,
                "forbidden",
                f"{principal.login} may not use the console of {device_id}: {access} (the person holding its "
                "reservation and System Admins may type, the owners of its pool may watch)",
            )
        if holder.job is not None:
            raise ApiError(409, "device_busy", f"job {holder.job} holds {device_id}: the job has its console")
        host = stored.device.host
        report = await host_report(session, host)
    if report is None or not report.online:
        raise ApiError(503, "host_offline", f"the agent of {device_id}'s runner host {host} is offline")
    if CAPABILITY not in report.capabilities:
        raise ApiError(
            409,
            "not_supported",
            f"the agent of {host} does not speak {CAPABILITY}: upgrade it to open {device_id}'s console",
        )
    already = database.consoles.of(device_id)
    full = watchers_refusal(device_id, len(already.watchers)) if already is not None else None
    if full is not None:  # before the upgrade's check: kerrigan console reads the words from a plain call
        raise ApiError(409, "too_many", full)
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise ApiError(400, "not_websocket", "the console is a WebSocket: open it with a WebSocket client")
    idle_s = request.config_dict[SETTINGS].console_idle_s
    socket = web.WebSocketResponse(max_msg_size=KEYSTROKE_FRAME_MAX, heartbeat=30.0)
    await socket.prepare(request)
    console = database.consoles.open(
        device_id, host, lambda opened: _watch(database, opened, holder, idle_s, AGENT_WITHIN_S)
    )
    full = watchers_refusal(device_id, len(console.watchers))
    if full is not None:  # others joined while this one was upgraded
        await close_person(request, socket, full, CUT_OFF)
        return socket
    watcher = console.join(principal.login, access, admin=principal.admin)
    started = database.clock()
    await socket.send_str(
        json.dumps({"type": Frame.OPEN.value, "device": device_id, "read_only": watcher.read_only})
    )
    if access is Access.READ_WRITE and watcher.read_only:
        await notice(socket, "someone else types on this console now: you watch it read-only")

    async def audit(session: AsyncSession, reason: str, ended: datetime) -> None:
        await audit_console(session, device_id, watcher, started=started, ended=ended, reason=reason)

    await serve_person(request, console, watcher, socket, audit)
    return socket


async def serve_person(
    request: web.Request,
    session: ConsoleSession,
    watcher: Watcher,
    socket: web.WebSocketResponse,
    audit: Callable[[AsyncSession, str, datetime], Awaitable[None]],
) -> None:
    """Bridge the person to ``session`` (a console or a shell) until it ends, they leave or are cut off;
    then ``audit`` their time (the reason it ended, when) and close their WebSocket saying why."""
    try:
        await bridge_person(session, watcher, socket)
    finally:
        reason = watcher.cut or (session.reason if session.ended.is_set() else "you left")
        session.leave(watcher)
        code = CUT_OFF if watcher.cut else FAULT if session.failed else CLOSED_NORMALLY
        async with writing(request) as stored:
            await audit(stored, reason, request.config_dict[DATABASE].clock())
        await close_person(request, socket, reason, code)


async def bridge_person(console: ConsoleSession, watcher: Watcher, socket: web.WebSocketResponse) -> None:
    """The board's bytes to the person, their keys to it: until the session ends, they leave or are cut."""
    down = asyncio.create_task(_to_person(watcher, socket), name="kerrigan-console-person-down")
    up = asyncio.create_task(_from_person(console, watcher, socket), name="kerrigan-console-person-up")
    ended = asyncio.create_task(console.ended.wait(), name="kerrigan-console-person-ended")
    cut = asyncio.create_task(watcher.cut_off.wait(), name="kerrigan-console-person-cut")
    try:
        await asyncio.wait({down, up, ended, cut}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (down, up, ended, cut):
            task.cancel()
        await asyncio.gather(down, up, ended, cut, return_exceptions=True)


async def _to_person(watcher: Watcher, socket: web.WebSocketResponse) -> None:
    while (data := await watcher.next()) is not None:
        await socket.send_bytes(data)


async def _from_person(console: ConsoleSession, watcher: Watcher, socket: web.WebSocketResponse) -> None:
    told = False  # each refusal is said once until a keystroke goes through
    async for message in socket:
        if message.type is WSMsgType.BINARY:
            data = message.data
        elif message.type is WSMsgType.TEXT:
            data = message.data.encode()
        else:
            continue
        refused = console.type(watcher, data)
        if refused is None:
            told = False
        elif not told:
            told = True
            await notice(socket, refused)


async def notice(socket: web.WebSocketResponse, message: str) -> None:
    with contextlib.suppress(ConnectionError, RuntimeError):
        await socket.send_str(json.dumps({"type": Frame.NOTICE.value, "message": message}))


async def close_person(request: web.Request, socket: web.WebSocketResponse, reason: str, code: int) -> None:
    """Say why, then close; a WebSocket that does not read is dropped rather than waited for."""
    end = {"type": Frame.END.value, "reason": reason, "ok": code == CLOSED_NORMALLY}
    try:
        async with asyncio.timeout(CLOSE_WAIT_S):
            if not socket.closed:
                with contextlib.suppress(ConnectionError, RuntimeError):
                    await socket.send_str(json.dumps(end))
            await socket.close(code=code, message=close_reason(reason))
    except TimeoutError:
        if request.transport is not None:
            request.transport.abort()


async def _watch(
    database: Database, console: ConsoleSession, holder: Holder, idle_s: float, agent_within_s: float
) -> None:
    """End ``console`` when its agent does not connect in time, when no key was typed for ``idle_s``, or
    when the device is no longer held as it was when it opened (its reservation ended, a job took it); cut
    off a watcher who may watch no more (an owner no longer of the device's pool), checked as often."""
    loop = asyncio.get_running_loop()
    opened = loop.time()
    while not console.ended.is_set():
        await asyncio.sleep(HOLDER_CHECK_S if console.attached.is_set() else 0.05)
        now = loop.time()
        if not console.attached.is_set():
            if now - opened >= agent_within_s:
                console.end(
                    f"the agent of {console.host} did not connect within {agent_within_s:g} s", failed=True
                )
            continue
        if now - console.last_keystroke >= idle_s:
            console.end(f"no keystroke for {idle_s:g} s: the console was idle")
            continue
        async with database.sessions() as session:
            now_held = await device_holder(session, console.device_id, database.clock())
            try:
                owners = (await get_device(session, console.device_id)).pool.owners
            except NotFoundError:
                console.end(f"{console.device_id} was deleted")
                continue
        if now_held != holder:
            if now_held.job is not None:
                console.end(f"job {now_held.job} holds {console.device_id} now: the job has its console")
            else:
                console.end(f"the reservation of {console.device_id} ended")
            continue
        for watcher in list(console.watchers):
            principal = Principal(watcher.login, admin=watcher.admin)
            access = console_access(principal, console.device_id, now_held, owners)
            if not isinstance(access, Access):
                watcher.cut_off_for(f"you may no longer watch the console of {console.device_id}: {access}")
