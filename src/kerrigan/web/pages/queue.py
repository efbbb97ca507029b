"""``/queue``: the waiting jobs in dispatch order and what each waits on, and the jobs holding devices.

The queue is the dispatcher's own plan (:func:`kerrigan.store.queue_view.read_queue`, read without locking
anything): the order and the reasons shown are the ones the next dispatch round acts on. What the pages show
is built by pure functions from the store's records, so each row can be tested without a server.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from aiohttp import web

from kerrigan.core.dispatch_order import QueuedJob, Waiting, WaitKind
from kerrigan.store.leases import QueuedJobRecord
from kerrigan.store.queue_view import (
    QueueSnapshot,
    holding_jobs,
    queue_wait_clock,
    read_queue,
)
from kerrigan.store.reservations import Reservation
from kerrigan.web.errors import bad_request
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import HIDDEN, hide_held, read_access
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

DEFAULT_ROWS = 500
MAX_ROWS = 10_000
GIB = 1 << 30
NAMED_DEVICES = 3  # a busy job names this many of its devices, then counts the rest


def duration(seconds: float) -> str:
    """``45 s``, ``2 min 05 s``, ``3 h 04 min``: short, and exact enough to compare rows."""
    whole = max(0, int(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours:02d} h"


def _names(devices: Sequence[str]) -> str:
    shown = ", ".join(devices[:NAMED_DEVICES])
    more = len(devices) - NAMED_DEVICES
    return f"{shown} and {more} more" if more > 0 else shown


# -- /queue --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queued job as the page shows it."""

    job_id: str
    position: int | None  # 1-based place among the waiting jobs; None for the next round's and unplanned
    repository: str
    session_id: str
    task_id: str
    priority: str  # a session's Priority, or "reservation"
    vcpus: int
    waited_s: float
    queue_wait_spent_s: float
    queue_wait_limit_s: float
    queue_wait_running: bool
    kind: str  # next | device | capacity | fenced | own_session | host | unplanned: the row's colour
    why: str  # what it waits on, in words
    on_job: str | None = None  # the job it is fenced by (a link to its row)
    reservation: bool = False  # a person's reservation (no session page: the row is all there is)
    hidden: bool = False  # a job of a repository the reader may not read: no repository, session or task

    @property
    def href(self) -> str | None:
        """Its session's page (a reservation, and a hidden job, has none)."""
        return None if self.reservation or self.hidden else f"/sessions/{self.session_id}"

    @property
    def waited(self) -> str:
        """How long it has waited since it became dispatchable."""
        return duration(self.waited_s)

    @property
    def why_parts(self) -> tuple[str, str | None, str]:
        """``why`` split around the job it names, so the page can link that job's row."""
        if self.on_job is None or f"job {self.on_job}" not in self.why:
            return self.why, None, ""
        before, after = self.why.split(f"job {self.on_job}", 1)
        return f"{before}job ", self.on_job, after

    @property
    def queue_wait(self) -> str:
        """Queue-wait spent of its limit."""
        return f"{duration(self.queue_wait_spent_s)} / {duration(self.queue_wait_limit_s)}"


def _why(
    snapshot: QueueSnapshot, record: QueuedJobRecord, job: QueuedJob, waiting: Waiting, free_left: set[str]
) -> tuple[str, str | None]:
    """What a waiting job waits on, in words, and the job it is fenced by."""
    if job.boardless:
        return _why_boardless(snapshot, job, waiting)
    if waiting.kind is WaitKind.FENCED:
        return f"fenced by job {waiting.on}: its device's runner host is held for that job", waiting.on
    if waiting.kind is WaitKind.OWN_SESSION:
        limit = record.max_devkits
        holding = limit - snapshot.session_room.get(record.session_id, 0)
        starting = sum(1 for other, _ in snapshot.plan.assignments if other.session_id == record.session_id)
        more = f", {starting} more on the next round" if starting else ""
        return (
            f"its own session's max_devkits: the session holds {holding} of {limit} device"
            f"{'' if limit == 1 else 's'}{more}",
            None,
        )
    if job.roles and waiting.kind in (WaitKind.DEVICE, WaitKind.GANG):
        counts = "; ".join(str(count) for count in waiting.roles) or "no device free for any role"
        if waiting.kind is WaitKind.GANG:
            return (
                f"gang: every role has a device free, but no one runner host has one for each ({counts})",
                None,
            )
        return f"gang: {counts}", None
    if waiting.kind is WaitKind.CAPACITY:
        room = snapshot.host_room_after_plan
        hosts = sorted({snapshot.device_hosts[d] for d in job.candidates if d in free_left})
        left = ", ".join(f"{host} has {room.get(host, 0)} vCPUs left under max_weight" for host in hosts)
        return f"host capacity: it claims {job.vcpus} vCPUs; {left or 'no host has room'}", None
    if (avoided := snapshot.avoided.get(record.pk)) and set(job.candidates) <= set(avoided):
        return (
            f"device busy: {_names(job.candidates)} (every device it matches already failed this job; "
            "it takes one of them again)",
            None,
        )
    if not job.candidates:
        return "no device it matches is available now (in maintenance, retired or offline)", None
    return f"device busy: {_names(job.candidates)}", None


def _why_boardless(snapshot: QueueSnapshot, job: QueuedJob, waiting: Waiting) -> tuple[str, str | None]:
    """What a job that holds no device (``board: none``) waits on: a runner host, never a device."""
    if waiting.kind is WaitKind.FENCED:
        return f"fenced by job {waiting.on}: the runner hosts it may use are held for that job", waiting.on
    if waiting.kind is WaitKind.CAPACITY:
        room = snapshot.host_room_after_plan
        left = ", ".join(f"{host} has {room.get(host, 0)} vCPUs left under max_weight" for host in job.hosts)
        return f"host capacity (no board): it claims {job.vcpus} vCPUs; {left}", None
    return "no board: no runner host it may run on is online and not paused now", None


def queue_rows(snapshot: QueueSnapshot | None) -> list[QueueRow]:
    """Every queued job in the order the dispatcher takes them: those it leases devices to on the next
    round, then the waiting ones by position, then jobs it cannot plan for."""
    if snapshot is None:
        return []
    now = snapshot.now.timestamp()
    records = {record.pk: record for record in snapshot.records}
    assigned = {job.id: device for job, device in snapshot.plan.assignments}
    placed = {job.id: host for job, host in snapshot.plan.placed}
    free_left = set(snapshot.free_devices) - set(assigned.values())
    rows = []

    def row(record: QueuedJobRecord, priority: str, kind: str, why: str, on: str | None = None) -> QueueRow:
        clock = queue_wait_clock(record, snapshot.now)
        ready = record.ready_at.timestamp() if record.ready_at is not None else now
        return QueueRow(
            job_id=str(record.pk),
            position=snapshot.plan.position(str(record.pk)),
            repository=record.repository,
            session_id=record.session_id,
            task_id=record.task_id,
            priority=priority,
            vcpus=record.vcpus,
            waited_s=now - ready,
            queue_wait_spent_s=clock.spent(now),
            queue_wait_limit_s=clock.limit_s,
            queue_wait_running=clock.since is not None and kind not in ("own_session", "next", "unplanned"),
            kind=kind,
            why=why,
            on_job=on,
        )

    people = {job.id: job for job in snapshot.people}
    reservations = {reservation.queue_id: reservation for reservation in snapshot.reservations}
    for job_id in snapshot.plan.order:
        if job_id in people:
            rows.append(_reservation_row(snapshot, reservations[job_id], people[job_id], assigned))
            continue
        record = records[int(job_id)]
        job = snapshot.planned[record.pk]
        if job_id in assigned:
            device = assigned[job_id]
            why = f"device {device} on {snapshot.device_hosts[device]} is free: leased on the next round"
            rows.append(row(record, job.priority.value, "next", why))
            continue
        if job_id in placed:
            why = f"runner host {placed[job_id]} has room: leased on the next round (no board)"
            rows.append(row(record, job.priority.value, "next", why))
            continue
        waiting = snapshot.plan.waiting[job_id]
        why, on = _why(snapshot, record, job, waiting, free_left)
        rows.append(row(record, job.priority.value, waiting.kind.value, why, on))
    for record in snapshot.records:
        if record.pk not in snapshot.planned:
            why = f"not planned: its session's resolution has no requirements for task {record.task_id}"
            rows.append(row(record, record.priority, "unplanned", why))
    return rows


def _reservation_row(
    snapshot: QueueSnapshot, reservation: Reservation, job: QueuedJob, assigned: dict[str, str]
) -> QueueRow:
    """A person's waiting reservation: after gate work; its wait is its budget."""
    now = snapshot.now.timestamp()
    waited = now - reservation.created_at.timestamp()
    limit = (
        (reservation.wait_until - reservation.created_at).total_seconds() if reservation.wait_until else 0.0
    )
    device = assigned.get(job.id)
    if device is not None:
        kind, why = (
            "next",
            f"device {device} on {snapshot.device_hosts[device]} is free: reserved on the next round",
        )
    else:
        waiting = snapshot.plan.waiting.get(job.id)
        kind = waiting.kind.value if waiting is not None else "device"
        shown = (
            ", ".join(job.candidates[:5])
            or "none free to take work now (reserved, in maintenance or offline)"
        )
        why = f"reservation for {reservation.login}, waiting for a device: {shown}"
    note = f" ({reservation.note})" if reservation.note else ""
    return QueueRow(
        job_id=reservation.id[:8],
        position=snapshot.plan.position(job.id),
        repository=job.repository,
        session_id=reservation.id,
        task_id="reservation" + note,
        priority="reservation",
        vcpus=0,
        waited_s=waited,
        queue_wait_spent_s=min(waited, limit),
        queue_wait_limit_s=limit,
        queue_wait_running=kind != "next",
        kind=kind,
        why=why,
        reservation=True,
    )


def _limit(text: str | None, default: int, most: int) -> int:
    if text is None or text == "":
        return default
    if re.fullmatch(r"[0-9]{1,5}", text) is None or not 1 <= int(text) <= most:
        raise bad_request(f"limit must be a whole number from 1 to {most}", field="limit")
    return int(text)


def hide_row(row: QueueRow) -> QueueRow:
    """A queued job as a reader who may not read its repository sees it: where it is in the queue and
    what it waits on, nothing of the repository."""
    return replace(row, repository="", session_id="", task_id=HIDDEN, hidden=True)


@routes.get("/queue")
async def queue_page(request: web.Request) -> web.Response:
    """The queue in dispatch order, filterable by repository (``?repository=``, ``?limit=`` rows); the
    jobs of repositories the reader may not read are shown without their repository, session or task."""
    principal = await page_reader(request)
    repository = request.query.get("repository", "").strip()
    limit = _limit(request.query.get("limit"), DEFAULT_ROWS, MAX_ROWS)
    database = request.config_dict[DATABASE]
    now = database.clock()
    async with database.sessions() as session:
        snapshot = await read_queue(session, now, lock=False)
        held = list(snapshot.held) if snapshot is not None else await holding_jobs(session)
    access = read_access(request, principal)
    rows = await access.shown(queue_rows(snapshot), hide_row)
    held = await access.shown(held, hide_held)
    repositories = sorted(({row.repository for row in rows} | {job.repository for job in held}) - {""})
    if repository:
        rows = [row for row in rows if row.repository == repository]
        held = [job for job in held if job.repository == repository]
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.kind] = counts.get(row.kind, 0) + 1
    return await render(
        request,
        "queue.html",
        {
            "now": now,
            "rows": rows[:limit],
            "total": len(rows),
            "limit": limit,
            "counts": counts,
            "held": held,
            "repository": repository,
            "repositories": repositories,
            "hidden": HIDDEN,
        },
    )
