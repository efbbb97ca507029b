"""The consoles people watch now, in this process: one session per device, bridging its agent's WebSocket
and its people's (:mod:`kerrigan.core.device_console`).

A person's WebSocket opens a session (or joins the one open); the device's host is handed the request in its
long poll (:meth:`Consoles.take`) and its agent connects to :meth:`Consoles.attach`. The bytes the board
prints are queued for every watcher, each queue bounded (a watcher that falls behind is cut off, the others
keep theirs); keystrokes of the one writer are queued for the board, bounded too.

Kept in memory, not in the database: the person's WebSocket and the agent's must reach the same server
process. With several replicas behind a load balancer, a console works when both land on the same one (one
replica, or sticky routing of ``/api/v1/devices/*/console`` and ``/api/runner/v1/device-requests/*``); a
request handed by a replica that has not got it is never asked for there, and the person's call ends after
:data:`~kerrigan.core.device_console.AGENT_WITHIN_S` saying the agent did not connect.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import uuid
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_console import KEYSTROKES_QUEUED, WATCHER_QUEUE_BYTES, Access
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.store.audit import Change, record
from kerrigan.store.models import DeviceRow, PoolRow


class Watcher:
    """One person's WebSocket on a session: the board's bytes queued for it, at most
    :data:`WATCHER_QUEUE_BYTES`; past that it is cut off (:attr:`cut` says why), as it is when its person
    may watch no more (``admin``: they are a System Admin)."""

    def __init__(self, login: str, access: Access, limit: int, *, admin: bool = False) -> None:
        self.login = login
        self.access = access
        self.admin = admin
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued = 0
        self._limit = limit
        self._ready = asyncio.Event()
        self.cut: str | None = None
        self.cut_off = asyncio.Event()  # set with cut: its WebSocket is dropped even while a send waits

    @property
    def read_only(self) -> bool:
        """Whether its keystrokes are refused."""
        return self.access is Access.READ_ONLY

    def offer(self, data: bytes) -> None:
        """Queue the board's bytes for it; cut it off instead when it lags too far behind."""
        if self.cut is not None:
            return
        if self._queued + len(data) > self._limit:
            self.cut_off_for(
                f"too slow: more than {self._limit} bytes of the console waited for this WebSocket to read "
                "them; it is cut off so that it does not hold the console for others"
            )
            return
        self._queue.append(data)
        self._queued += len(data)
        self._ready.set()

    def cut_off_for(self, reason: str) -> None:
        """Cut it off, saying why (the first reason stays); its WebSocket is closed."""
        if self.cut is None:
            self.cut = reason
            self._queue.clear()
            self._ready.set()
            self.cut_off.set()

    async def next(self) -> bytes | None:
        """The next bytes to send it, joined; None once it is cut off."""
        while not self._queue and self.cut is None:
            self._ready.clear()
            await self._ready.wait()
        if self.cut is not None:
            return None
        data = b"".join(self._queue)
        self._queue.clear()
        self._queued = 0
        return data


@dataclass(eq=False)
class ConsoleSession:
    """One device's console as its people share it; ``started`` by the clock of the loop."""

    id: str
    device_id: str
    host: str
    watcher_limit: int = WATCHER_QUEUE_BYTES
    handed: bool = False
    attached: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str = ""
    failed: bool = False  # it ended for a fault (the agent's, the console's), not as sessions end
    watchers: list[Watcher] = field(default_factory=list)
    writer: Watcher | None = None
    to_board: asyncio.Queue[bytes] = field(default_factory=lambda: asyncio.Queue(KEYSTROKES_QUEUED))
    last_keystroke: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    watchdog: asyncio.Task[None] | None = None

    def join(self, login: str, access: Access, *, admin: bool = False) -> Watcher:
        """A new watcher; the first who may type is the writer, later ones watch (one writer at a time)."""
        if access is Access.READ_WRITE and self.writer is not None:
            access = Access.READ_ONLY
        watcher = Watcher(login, access, self.watcher_limit, admin=admin)
        if access is Access.READ_WRITE:
            self.writer = watcher
        self.watchers.append(watcher)
        return watcher

    def leave(self, watcher: Watcher) -> None:
        """``watcher`` went; the session ends with its last one."""
        with contextlib.suppress(ValueError):
            self.watchers.remove(watcher)
        if self.writer is watcher:
            self.writer = None
        if not self.watchers:
            self.end("the last watcher left")

    def from_board(self, data: bytes) -> None:
        """The board printed ``data``: queued for every watcher."""
        for watcher in list(self.watchers):
            watcher.offer(data)

    def type(self, watcher: Watcher, data: bytes) -> str | None:
        """``watcher`` typed ``data``: queued for the board, or why not (a notice for them)."""
        if watcher is not self.writer:
            return "this console is read-only for you: your keystrokes are not sent to the board"
        self.last_keystroke = asyncio.get_running_loop().time()
        try:
            self.to_board.put_nowait(data)
        except asyncio.QueueFull:
            return "keystrokes dropped: typed faster than the board takes them"
        return None

    def end(self, reason: str, *, failed: bool = False) -> None:
        """End the session (the first reason stays); ``failed`` for a fault."""
        if not self.ended.is_set():
            self.reason, self.failed = reason, failed
            self.ended.set()
            if self.watchdog is not None and self.watchdog is not asyncio.current_task():
                self.watchdog.cancel()


class Consoles:
    """This process's console sessions, by id and by device; ``requested`` hears the host of each new one
    (the long polls wake for it)."""

    def __init__(self) -> None:
        self._by_id: dict[str, ConsoleSession] = {}
        self._by_device: dict[str, ConsoleSession] = {}
        self.requested: list[Callable[[str], None]] = []
        self.watcher_limit = WATCHER_QUEUE_BYTES  # bytes queued for one watcher before it is cut off

    def open(
        self, device_id: str, host: str, watchdog: Callable[[ConsoleSession], Coroutine[Any, Any, None]]
    ) -> ConsoleSession:
        """The device's open session, or a new one: asked of its host, ``watchdog`` run beside it."""
        found = self._by_device.get(device_id)
        if found is not None and not found.ended.is_set():
            return found
        session = ConsoleSession(str(uuid.uuid4()), device_id, host, self.watcher_limit)
        self._by_id[session.id] = session
        self._by_device[device_id] = session
        session.watchdog = asyncio.create_task(watchdog(session), name="kerrigan-console-watchdog")

        def forget(_: object) -> None:
            self._by_id.pop(session.id, None)
            if self._by_device.get(device_id) is session:
                del self._by_device[device_id]

        session.watchdog.add_done_callback(forget)
        for listener in list(self.requested):
            listener(host)
        return session

    def of(self, device_id: str) -> ConsoleSession | None:
        """``device_id``'s session open now, or None."""
        found = self._by_device.get(device_id)
        return found if found is not None and not found.ended.is_set() else None

    def waiting(self, host: str) -> bool:
        """Whether ``host`` has a console request not handed to its agent yet."""
        return any(not s.handed and not s.ended.is_set() and s.host == host for s in self._by_id.values())

    def take(self, host: str) -> list[ConsoleSession]:
        """``host``'s requests not handed yet, now handed (to one poll only)."""
        taken = [s for s in self._by_id.values() if s.host == host and not s.handed and not s.ended.is_set()]
        for session in taken:
            session.handed = True
        return taken

    def attach(self, request_id: str, host: str) -> ConsoleSession | None:
        """The session ``host``'s agent connects for (None: not this host's, unknown here, ended or taken)."""
        session = self._by_id.get(request_id)
        if session is None or session.host != host or session.ended.is_set() or session.attached.is_set():
            return None
        session.attached.set()
        return session

    def sessions(self) -> list[ConsoleSession]:
        """The sessions open now."""
        return [s for s in self._by_id.values() if not s.ended.is_set()]


async def audit_console(
    session: AsyncSession,
    device_id: str,
    watcher: Watcher,
    *,
    started: datetime,
    ended: datetime,
    reason: str,
) -> None:
    """One person's time on a device's console in the audit log (subject ``device``, field ``console``):
    whether they could type, when it started and ended, how long, and why it ended."""
    before = {"access": watcher.access.value, "started": started.isoformat()}
    await _audit_time(
        session, device_id, "console", watcher.login, before, started=started, ended=ended, reason=reason
    )


async def audit_shell(
    session: AsyncSession,
    job_pk: int,
    device_id: str,
    watcher: Watcher,
    *,
    host: str,
    started: datetime,
    ended: datetime,
    reason: str,
) -> None:
    """One person's shell in a held job's sandbox (``kerrigan shell``) in the audit log (subject the job's
    ``device``, field ``shell``): which job on which host, when it started and ended, how long, why it
    ended."""
    before = {"job": job_pk, "host": host, "access": watcher.access.value, "started": started.isoformat()}
    await _audit_time(
        session, device_id, "shell", watcher.login, before, started=started, ended=ended, reason=reason
    )


async def _audit_time(
    session: AsyncSession,
    device_id: str,
    field: str,
    login: str,
    before: Mapping[str, object],
    *,
    started: datetime,
    ended: datetime,
    reason: str,
) -> None:
    """A person's time on the device (``before``: how it began) as its ``field`` in the audit log."""
    pool = await session.scalar(
        select(PoolRow.id).join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk).where(DeviceRow.id == device_id)
    )
    after = {
        "ended": ended.isoformat(),
        "seconds": round((ended - started).total_seconds(), 3),
        "reason": reason[:300],
    }
    change = FieldChange(ChangeKind.CHANGE, "device", device_id, field, before, after)
    await record(session, Change(login, ended), change, pool)
    await session.flush()
