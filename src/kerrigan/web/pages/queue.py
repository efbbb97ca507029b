"""``/queue``: the waiting jobs in dispatch order and what each waits on, and the jobs holding devices;
``/runners``: every runner host as its agent last reported it.

The queue is the dispatcher's own plan (:func:`kerrigan.store.queue_view.read_queue`, read without locking
anything): the order and the reasons shown are the ones the next dispatch round acts on. What the pages show
is built by pure functions from the store's records, so each row can be tested without a server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from kerrigan.core.dispatch_order import QueuedJob, Waiting, WaitKind
from kerrigan.core.inventory import Device, Inventory
from kerrigan.core.resources import Unit
from kerrigan.core.runner_protocol import server_catalog
from kerrigan.store.inventory import load_inventory
from kerrigan.store.leases import QueuedJobRecord
from kerrigan.store.queue_view import (
    HeldJob,
    QueueSnapshot,
    holding_jobs,
    queue_wait_clock,
    read_queue,
)
from kerrigan.store.runners import HostReport, host_reports
from kerrigan.web.errors import bad_request
from kerrigan.web.pages.rendering import render
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
    priority: str
    vcpus: int
    waited_s: float
    queue_wait_spent_s: float
    queue_wait_limit_s: float
    queue_wait_running: bool
    kind: str  # next | device | capacity | fenced | own_session | unplanned: the row's colour
    why: str  # what it waits on, in words
    on_job: str | None = None  # the job it is fenced by (a link to its row)

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


def queue_rows(snapshot: QueueSnapshot | None) -> list[QueueRow]:
    """Every queued job in the order the dispatcher takes them: those it leases devices to on the next
    round, then the waiting ones by position, then jobs it cannot plan for."""
    if snapshot is None:
        return []
    now = snapshot.now.timestamp()
    records = {record.pk: record for record in snapshot.records}
    assigned = {job.id: device for job, device in snapshot.plan.assignments}
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

    for job_id in snapshot.plan.order:
        record = records[int(job_id)]
        job = snapshot.planned[record.pk]
        if job_id in assigned:
            device = assigned[job_id]
            why = f"device {device} on {snapshot.device_hosts[device]} is free: leased on the next round"
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


def _limit(text: str | None, default: int, most: int) -> int:
    if text is None or text == "":
        return default
    if re.fullmatch(r"[0-9]{1,5}", text) is None or not 1 <= int(text) <= most:
        raise bad_request(f"limit must be a whole number from 1 to {most}", field="limit")
    return int(text)


@routes.get("/queue")
async def queue_page(request: web.Request) -> web.Response:
    """The queue in dispatch order, filterable by repository (``?repository=``, ``?limit=`` rows)."""
    await page_reader(request)
    repository = request.query.get("repository", "").strip()
    limit = _limit(request.query.get("limit"), DEFAULT_ROWS, MAX_ROWS)
    database = request.config_dict[DATABASE]
    now = database.clock()
    async with database.sessions() as session:
        snapshot = await read_queue(session, now, lock=False)
        held = list(snapshot.held) if snapshot is not None else await holding_jobs(session)
    rows = queue_rows(snapshot)
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
        },
    )


# -- /runners ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceValue:
    """A resource a host reported, by name, as the server's catalog reads it."""

    name: str
    value: int
    shown: str  # bytes as GiB, counts as they are
    unit: str  # "bytes", "count", or "" for a name the server's catalog does not know


@dataclass(frozen=True, slots=True)
class HostDevice:
    """A device the inventory puts on a host, or one the host reported that the inventory does not."""

    id: str
    pool_id: str | None
    state: str | None  # the inventory's state: available, maintenance, offline, retired
    state_reason: str
    reported: str | None  # what the agent said of it last: present, ...
    holder: HeldJob | None


@dataclass(frozen=True, slots=True)
class RepositoryUse:
    """One repository's line of a host's health report."""

    repository: str
    reserved_vcpu_s: float
    finished: int
    by_vcpus: str
    queue_wait_refusals: int


@dataclass(frozen=True, slots=True)
class Underused:
    """A job that ran long using little of its reservation."""

    job: str
    repository: str
    task: str
    vcpus: int
    wall_s: float
    use_percent: float


@dataclass(frozen=True, slots=True)
class Health:
    """A host's health report, read defensively: the agent sends it, so a field may be missing or odd."""

    underused: tuple[Underused, ...]
    repositories: tuple[RepositoryUse, ...]
    admission_refusals: tuple[tuple[str, int], ...]
    running: int | None
    waiting: int | None
    isolation: str | None = None  # "jobs isolated: users, private /tmp, cgroup-v1", or NOT and why
    isolated: bool = False


def isolation_line(report: Any) -> tuple[str | None, bool]:
    """The agent's ``isolation`` object as one line, and whether jobs run apart; (None, False) when an
    older agent sent none."""
    if not isinstance(report, Mapping):
        return None, False
    listed = report.get("missing")
    missing = [item for item in listed if isinstance(item, str)] if isinstance(listed, list) else []
    cgroup = report.get("cgroup") if isinstance(report.get("cgroup"), str) else None
    if report.get("users") is True and report.get("tmp") is True and cgroup:
        got = ["users", "private /tmp", cgroup.replace("cgroup-", "cgroup ")]
        if report.get("memory_cap") is True:
            got.append("memory cap")
        line = f"jobs isolated: {', '.join(got)}"
        return (f"{line} (missing: {', '.join(missing)})" if missing else line), True
    return f"jobs NOT isolated: {', '.join(missing) or 'isolation is off'}", False


@dataclass(frozen=True, slots=True)
class HostView:
    """A runner host on the page."""

    id: str
    online: bool
    registered: bool
    last_heartbeat_at: datetime | None
    heartbeat_age: str | None
    protocol: int | None
    capabilities: tuple[str, ...]
    resources: tuple[ResourceValue, ...]
    max_weight: int | None
    running_vcpus: int
    held_vcpus: int  # leased, accepted and running: what the dispatcher counts against max_weight
    running: tuple[HeldJob, ...]
    waiting: tuple[HeldJob, ...]  # leased (offered) or accepted, not started
    devices: tuple[HostDevice, ...]
    health: Health | None
    under_floor: bool  # free disk below the floor: it refuses jobs runner_disk_full


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _count(value: Any) -> int:
    number = _number(value)
    return int(number) if number is not None else 0


def health_view(report: Mapping[str, Any] | None) -> Health | None:
    """The agent's health report in rows; what is not in the expected shape is left out, never an error."""
    if not isinstance(report, Mapping):
        return None
    underused = []
    for item in report.get("underused_reservations") or ():
        if isinstance(item, Mapping):
            ppm = _number(item.get("average_use_ppm"))
            underused.append(
                Underused(
                    str(item.get("job", "")),
                    str(item.get("repository", "")),
                    str(item.get("task", "")),
                    _count(item.get("vcpus")),
                    _number(item.get("wall_s")) or 0.0,
                    round(ppm / 10_000, 1) if ppm is not None else 0.0,
                )
            )
    repositories = []
    for item in report.get("repositories") or ():
        if isinstance(item, Mapping):
            sizes = item.get("by_vcpus")
            by_vcpus = ""
            if isinstance(sizes, Mapping):
                ordered = sorted(sizes.items(), key=_size)
                by_vcpus = ", ".join(f"{size} vCPUs: {_count(count)}" for size, count in ordered)
            repositories.append(
                RepositoryUse(
                    str(item.get("repository", "")),
                    _number(item.get("reserved_vcpu_s")) or 0.0,
                    _count(item.get("finished")),
                    by_vcpus,
                    _count(item.get("queue_wait_refusals")),
                )
            )
    refusals = report.get("admission_refusals")
    admission = (
        tuple((str(reason), _count(count)) for reason, count in sorted(refusals.items()))
        if isinstance(refusals, Mapping)
        else ()
    )
    running, waiting = _number(report.get("running")), _number(report.get("waiting"))
    isolation, isolated = isolation_line(report.get("isolation"))
    return Health(
        tuple(underused),
        tuple(repositories),
        admission,
        int(running) if running is not None else None,
        int(waiting) if waiting is not None else None,
        isolation,
        isolated,
    )


def _size(pair: tuple[Any, Any]) -> tuple[int, str]:
    """Claim sizes in numeric order ("2" before "16"); the report's keys are text."""
    size = str(pair[0])
    return (int(size) if size.isascii() and size.isdigit() else 1 << 30, size)


def resource_values(resources: Mapping[str, Any]) -> tuple[ResourceValue, ...]:
    """A host's resources by name, in the server catalog's order; bytes shown as GiB."""
    catalog = server_catalog()
    order = {name: slot for slot, name in enumerate(catalog.names())}
    values = []
    for name in sorted(resources, key=lambda name: (order.get(name, len(order)), name)):
        value = resources[name]
        if isinstance(value, bool) or not isinstance(value, int):
            continue
        known = catalog.get(name)
        if known is not None and known.unit is Unit.BYTES:
            values.append(ResourceValue(name, value, f"{value / GIB:,.1f} GiB", known.unit.value))
        else:
            values.append(ResourceValue(name, value, f"{value:,}", known.unit.value if known else ""))
    return tuple(values)


def host_views(
    reports: Iterable[HostReport], inventory: Inventory, held: Iterable[HeldJob], now: datetime
) -> list[HostView]:
    """Every runner host with its resources, claims, CPU sets, devices and health."""
    holders = list(held)
    by_device = {job.device_id: job for job in holders if job.device_id}
    devices_of: dict[str, list[Device]] = {}
    for device in inventory.devices:
        devices_of.setdefault(device.host, []).append(device)
    views = []
    for report in reports:
        on_host = [job for job in holders if job.host == report.host]
        running = tuple(job for job in on_host if job.state == "running")
        waiting = tuple(job for job in on_host if job.state != "running")
        devices = [
            HostDevice(
                device.id,
                device.pool_id,
                device.state.value,
                device.state_reason,
                report.device_states.get(device.id),
                by_device.get(device.id),
            )
            for device in sorted(devices_of.get(report.host, []), key=lambda device: device.id)
        ]
        known = {device.id for device in devices}
        devices += [
            HostDevice(device_id, None, None, "", str(state), by_device.get(device_id))
            for device_id, state in sorted(report.device_states.items())
            if device_id not in known
        ]
        resources = report.resources
        free, floor = resources.get("free_disk_bytes"), resources.get("floor_bytes")
        max_weight = resources.get("max_weight")
        views.append(
            HostView(
                id=report.host,
                online=report.online,
                registered=report.protocol is not None,
                last_heartbeat_at=report.last_heartbeat_at,
                heartbeat_age=(
                    duration((now - report.last_heartbeat_at).total_seconds())
                    if report.last_heartbeat_at is not None
                    else None
                ),
                protocol=report.protocol,
                capabilities=tuple(sorted(report.capabilities)),
                resources=resource_values(resources),
                max_weight=max_weight if isinstance(max_weight, int) else None,
                running_vcpus=sum(job.vcpus for job in running),
                held_vcpus=sum(job.vcpus for job in on_host),
                running=running,
                waiting=waiting,
                devices=tuple(devices),
                health=health_view(report.health),
                under_floor=isinstance(free, int) and isinstance(floor, int) and free < floor,
            )
        )
    return views


@routes.get("/runners")
async def runners_page(request: web.Request) -> web.Response:
    """Every runner host as its agent last reported it."""
    await page_reader(request)
    database = request.config_dict[DATABASE]
    now = database.clock()
    async with database.sessions() as session:
        reports = await host_reports(session)
        inventory = await load_inventory(session)
        held = await holding_jobs(session)
    hosts = host_views(reports, inventory, held, now)
    return await render(
        request,
        "runners.html",
        {"now": now, "hosts": hosts, "online": sum(1 for host in hosts if host.online)},
    )
