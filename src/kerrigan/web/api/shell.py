"""``GET /api/v1/jobs/{job_id}/shell``: a shell in a held job's sandbox on its runner host, as a WebSocket
(``kerrigan shell JOB``; docs/api.md, docs/reservations.md).

Who may: the person whose hold of the job's board lasts (granted, not ended, not past its end) and System
Admins (:mod:`kerrigan.core.job_shell`); anyone else is a 403 naming what they lack, before the upgrade and
before anything reaches the agent. No such job is a 404, and so is a job of a repository the person may not
read (as the hold's API answers), a job no hold holds now a 409, a host whose agent
is offline a 503, one that does not speak ``job_shell`` a 409.

The request is handed to the job's host in its long poll (``job_shells``) and its agent connects back
(``/api/runner/v1/job-shells/{id}``, :class:`~kerrigan.dispatch.protocol.consoles.ConsoleCall`); the two
WebSockets meet in this process (``Database.shells``, as consoles do: :mod:`kerrigan.store.consoles`). One
person types; a second WebSocket on the same job's shell watches it. The shell ends when the person leaves,
after ``KERRIGAN_CONSOLE_IDLE_S`` without a keystroke, when the hold no longer lasts, when the shell exits
or the agent goes away; the agent then ends everything the shell started. Each session is audited (subject
the job's device, field ``shell``).

Frames are a console's: binary both ways, text frames down ``{"type": "open", "job", "device",
"read_only"}`` first, ``notice`` and ``end`` last, before the close.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from typing import Final

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_console import AGENT_WITHIN_S, HOLDER_CHECK_S, KEYSTROKE_FRAME_MAX, Access, Frame
from kerrigan.core.job_shell import shell_holder, shell_refusal
from kerrigan.core.runner_protocol import JOB_SHELL
from kerrigan.store.consoles import ConsoleSession, audit_shell
from kerrigan.store.database import Database
from kerrigan.store.holds import shell_target
from kerrigan.store.runners import host_report
from kerrigan.web.api.console import notice, serve_person
from kerrigan.web.auth import signed_in
from kerrigan.web.errors import ApiError
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE, SETTINGS

routes = web.RouteTableDef()

_JOB_ID: Final = re.compile(r"[0-9]{1,18}")


@routes.get("/jobs/{job_id}/shell")
async def job_shell(request: web.Request) -> web.StreamResponse:
    """Bridge the person's WebSocket to a shell in the job's sandbox (see the module's words)."""
    principal = await signed_in(request)
    text = request.match_info["job_id"]
    if _JOB_ID.fullmatch(text) is None:
        raise ApiError(404, "not_found", f"no job {text[:40]!r}: job ids are whole numbers")
    job_pk = int(text)
    database = request.config_dict[DATABASE]
    async with database.sessions() as session:
        target = await shell_target(session, job_pk)
        if target is None:
            raise ApiError(404, "not_found", f"no job {job_pk}")
        refused = shell_refusal(principal, job_pk, target.holds, database.clock())
        if refused is not None:
            if target.repository:  # one who may not even read its repository is told there is no such job
                await read_access(request, principal).check(
                    target.repository, ApiError(404, "not_found", f"no job {job_pk}")
                )
            raise ApiError(refused.status, refused.code, refused.message)
        host = target.host
        report = await host_report(session, host) if host is not None else None
    holder = shell_holder(target.holds, database.clock())
    if host is None or report is None or not report.online:
        raise ApiError(503, "host_offline", f"the agent of job {job_pk}'s runner host {host} is offline")
    if JOB_SHELL not in report.capabilities:
        raise ApiError(
            409,
            "not_supported",
            f"the agent of {host} does not speak {JOB_SHELL}: upgrade it to open a shell there",
        )
    if not web.WebSocketResponse().can_prepare(request).ok:
        raise ApiError(400, "not_websocket", "the shell is a WebSocket: open it with a WebSocket client")
    idle_s = request.config_dict[SETTINGS].console_idle_s
    device = target.device_id or ""
    socket = web.WebSocketResponse(max_msg_size=KEYSTROKE_FRAME_MAX, heartbeat=30.0)
    await socket.prepare(request)
    shell = database.shells.open(
        str(job_pk),
        host,
        lambda opened: _watch(
            database, opened, job_pk=job_pk, holder=holder, idle_s=idle_s, agent_within_s=AGENT_WITHIN_S
        ),
    )
    watcher = shell.join(principal.login, Access.READ_WRITE)
    started = database.clock()
    opened = {"type": Frame.OPEN.value, "job": job_pk, "device": device, "read_only": watcher.read_only}
    await socket.send_str(json.dumps(opened))
    if watcher.read_only:
        await notice(socket, "someone else types in this shell now: you watch it read-only")

    async def audit(session: AsyncSession, reason: str, ended: datetime) -> None:
        await audit_shell(
            session, job_pk, device, watcher, host=host, started=started, ended=ended, reason=reason
        )

    await serve_person(request, shell, watcher, socket, audit)
    return socket


async def _watch(
    database: Database,
    shell: ConsoleSession,
    *,
    job_pk: int,
    holder: str | None,
    idle_s: float,
    agent_within_s: float,
) -> None:
    """End ``shell`` when its agent does not connect in time, when no key was typed for ``idle_s``, or
    when the hold it opened under no longer lasts (ended, past its end, another person's)."""
    loop = asyncio.get_running_loop()
    opened = loop.time()
    while not shell.ended.is_set():
        await asyncio.sleep(HOLDER_CHECK_S if shell.attached.is_set() else 0.05)
        now = loop.time()
        if not shell.attached.is_set():
            if now - opened >= agent_within_s:
                said = f"the agent of {shell.host} did not connect within {agent_within_s:g} s"
                shell.end(said, failed=True)
            continue
        if now - shell.last_keystroke >= idle_s:
            shell.end(f"no keystroke for {idle_s:g} s: the shell was idle")
            continue
        async with database.sessions() as session:
            target = await shell_target(session, job_pk)
        if target is None or shell_holder(target.holds, database.clock()) != holder:
            shell.end(f"the hold of job {job_pk} ended")
