"""``/runners``: every runner host as its agent last reported it, and (System Admins) its pause.

A paused host's devices get no new jobs; the running ones finish. The form posts to
``/runners/{host}/state``, as ``PUT /api/v1/hosts/{id}/state`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from kerrigan.core.device_status import HostPause, pause_text
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.inventory import Device, DeviceState, Inventory
from kerrigan.core.lifecycle import RUNNER_LOST, JobState, reason_words
from kerrigan.core.resources import Unit
from kerrigan.core.roles import may_administer
from kerrigan.core.runner_protocol import HEARTBEATS_PER_LEASE, LEASE_TTL_S, server_catalog
from kerrigan.store.inventory import load_inventory
from kerrigan.store.queue_view import HeldJob, holding_jobs
from kerrigan.store.runners import HostReport, host_reports, set_pause
from kerrigan.web import editing
from kerrigan.web.api.hosts import pause_reason
from kerrigan.web.auth import forbidden
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.queue import GIB, duration
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import HIDDEN, hide_held, read_access
from kerrigan.web.signin import page_reader, redirect
from kerrigan.web.state import DATABASE, SETTINGS, writing

routes = web.RouteTableDef()


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
    state: DeviceState | None  # the inventory's
    state_reason: str
    reported: str | None  # what the agent said of it last: present, ...
    holder: HeldJob | None
    reserved: str | None = None  # a person holds it: "device reserved by hubot until ...: why"


@dataclass(frozen=True, slots=True)
class RepositoryUse:
    """One repository's line of a host's health report."""

    repository: str
    reserved_vcpu_s: float
    finished: int
    by_vcpus: str
    queue_wait_refusals: int

    @property
    def reserved_shown(self) -> str:
        """The reserved vCPU-seconds, never rounded away: a 2-vCPU job of a second reserved 2, not 0."""
        return vcpu_seconds(self.reserved_vcpu_s)


def vcpu_seconds(value: float) -> str:
    """vCPU-seconds with as many decimals as a small figure needs: 14,600 / 12.5 / 0.42 / 0."""
    if value >= 100 or value == 0:
        return f"{value:,.0f}"
    if value >= 1:
        return f"{value:.1f}"
    return f"{value:.2f}" if value >= 0.01 else "under 0.01"


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
    heartbeat_late: bool  # online, yet its last heartbeat is older than two of its agent's intervals
    protocol: int | None
    capabilities: tuple[str, ...]
    resources: tuple[ResourceValue, ...]
    max_weight: int | None
    allocatable: int | None  # the CPUs its agent pins jobs to (its "vcpus"): the largest claim it takes
    running_vcpus: int
    held_vcpus: int  # leased, accepted and running: what the dispatcher counts against max_weight
    running: tuple[HeldJob, ...]
    waiting: tuple[HeldJob, ...]  # leased (offered) or accepted, not started
    devices: tuple[HostDevice, ...]
    health: Health | None
    under_floor: bool  # free disk below the floor: it refuses jobs runner_disk_full
    disk_shortfall: str | None = None  # the same in words, with both figures
    pause: HostPause | None = None  # paused by a person: no new jobs for its devices
    paused_words: str = ""


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
    reports: Iterable[HostReport],
    inventory: Inventory,
    held: Iterable[HeldJob],
    now: datetime,
    heartbeat_s: float = LEASE_TTL_S / HEARTBEATS_PER_LEASE,
) -> list[HostView]:
    """Every runner host with its resources, claims, CPU sets, devices and health; a host online whose
    last heartbeat is older than two of ``heartbeat_s`` is marked late (its second beat was missed)."""
    holders = list(held)
    by_device = {job.device_id: job for job in holders if job.device_id}
    by_device |= {device: job for job in holders for _, device in job.devices}  # each of a gang's
    devices_of: dict[str, list[Device]] = {}
    for device in inventory.devices:
        devices_of.setdefault(device.host, []).append(device)
    views = []
    for report in reports:
        on_host = [job for job in holders if job.host == report.host]
        running = tuple(job for job in on_host if job.state is JobState.RUNNING)
        waiting = tuple(job for job in on_host if job.state is not JobState.RUNNING)
        devices = [
            HostDevice(
                device.id,
                device.pool_id,
                device.state,
                device.state_reason,
                report.device_states.get(device.id),
                by_device.get(device.id),
                str(device.reserved) if device.reserved is not None else None,
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
        max_weight, allocatable = resources.get("max_weight"), resources.get("vcpus")
        shortfall = (
            DiskPolicy(floor_bytes=floor).shortfall(free)
            if isinstance(free, int) and isinstance(floor, int) and floor >= 0
            else None
        )
        age_s = (now - report.last_heartbeat_at).total_seconds() if report.last_heartbeat_at else None
        views.append(
            HostView(
                id=report.host,
                online=report.online,
                registered=report.protocol is not None,
                last_heartbeat_at=report.last_heartbeat_at,
                heartbeat_age=duration(age_s) if age_s is not None else None,
                heartbeat_late=report.online and age_s is not None and age_s > 2 * heartbeat_s,
                protocol=report.protocol,
                capabilities=tuple(sorted(report.capabilities)),
                resources=resource_values(resources),
                max_weight=max_weight if isinstance(max_weight, int) else None,
                allocatable=allocatable if isinstance(allocatable, int) else None,
                running_vcpus=sum(job.vcpus for job in running),
                held_vcpus=sum(job.vcpus for job in on_host),
                running=running,
                waiting=waiting,
                devices=tuple(devices),
                health=health_view(report.health),
                under_floor=shortfall is not None,
                disk_shortfall=shortfall,
                pause=report.pause,
                paused_words=pause_text(report.host, report.pause) if report.pause else "",
            )
        )
    return views


@routes.get("/runners")
async def runners_page(request: web.Request) -> web.Response:
    """Every runner host as its agent last reported it; a pause form for System Admins."""
    principal = await page_reader(request)
    database = request.config_dict[DATABASE]
    now = database.clock()
    async with database.sessions() as session:
        reports = await host_reports(session)
        inventory = await load_inventory(session)
        held = await holding_jobs(session)
    access = read_access(request, principal)  # jobs and use of repositories they cannot read: unnamed
    reports = await access.hosts(reports)
    held = await access.shown(held, hide_held)
    lease_s = request.config_dict[SETTINGS].runner_lease_s
    hosts = host_views(reports, inventory, held, now, lease_s / HEARTBEATS_PER_LEASE)
    return await render(
        request,
        "runners.html",
        {
            "now": now,
            "lease_s": lease_s,
            "heartbeat_s": lease_s / HEARTBEATS_PER_LEASE,
            "runner_lost": reason_words(RUNNER_LOST),
            "hosts": hosts,
            "hidden": HIDDEN,
            "online": sum(1 for host in hosts if host.online),
            "may_pause": principal is not None and may_administer(principal),
        },
    )


@routes.post("/runners/{host_id}/state")
async def host_state_page(request: web.Request) -> web.Response:
    """The page's *Pause* and *Resume*: System Admins; the same rules as ``PUT /api/v1/hosts/{id}/state``
    (a bad ``until`` is the error page naming it); back to the host on the page."""
    posted = await editing.PostedForm.read(request)
    principal = posted.principal
    if not may_administer(principal):
        raise forbidden(principal, "pause or resume runner hosts: only System Admins may")
    host_id = request.match_info["host_id"]
    state, reason, until = posted.text("state"), posted.text("reason").strip(), posted.text("until").strip()
    reason = pause_reason(reason)  # the API's rule: a reason naming itself in an error, never cut silently
    async with writing(request) as session:
        change = editing.change_by(request, principal)
        pause = None
        if state == "paused":
            at = editing.future_time(until, change.at, "until") if until else None
            pause = HostPause(reason, principal.login, change.at, at)
        elif state != "active":
            raise ApiError(400, "invalid", "state must be paused or active", "state")
        if await set_pause(session, host_id, pause, change) is None:
            raise ApiError(404, "not_found", f"no runner host {host_id[:63]!r}")
    return redirect(f"/runners#host-{host_id}")
