"""The queue as a dispatch round sees it: read and planned in one place, for the dispatcher and the pages.

:func:`read_queue` reads the queued jobs, the inventory, the leases, the jobs holding devices and what the
runner hosts last reported, and lets :func:`kerrigan.core.dispatch_order.plan_dispatch` decide. The
dispatcher calls it with ``lock=True`` (on PostgreSQL it waits for any other replica's round, then
takes the queued jobs ``FOR UPDATE SKIP LOCKED``) and then writes the leases and the queue-wait clocks.
The ``/queue`` page calls it with ``lock=False`` and writes nothing: it shows what the next round would
decide, and locks no row a dispatcher needs.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.dispatch_order import DispatchPlan, QueuedJob, plan_dispatch
from kerrigan.core.gang import Role, fit_gang
from kerrigan.core.inventory import Inventory
from kerrigan.core.lifecycle import HOLDING_A_DEVICE, JobState
from kerrigan.core.manifest import Priority
from kerrigan.core.matching import resolve, resolve_hosts
from kerrigan.core.queue_wait import QueueWait
from kerrigan.core.requirements import Requirements
from kerrigan.store.inventory import load_inventory
from kerrigan.store.leases import QueuedJobRecord, leased_devices, queued_jobs
from kerrigan.store.models import DeviceLeaseRow, HostLeaseRow, JobRow, RunnerHostRow, SessionRow
from kerrigan.store.reservations import Reservation, waiting_reservations


@dataclass(frozen=True, slots=True)
class HeldJob:
    """A job holding a device now (or, with ``board: none``, room on its runner host): leased (offered),
    accepted or running on its runner host."""

    pk: int
    session_id: str
    repository: str
    task_id: str
    state: JobState
    device_id: str | None
    host: str | None
    vcpus: int
    cpus: str | None  # the CPU set its runner pinned it to, once it started
    started_at: datetime | None
    devices: tuple[tuple[str, str], ...] = ()  # a gang's (role, device), in role order
    boardless: bool = False  # ``board: none``: it holds no device, only its vCPUs on ``host``

    @property
    def device_count(self) -> int:
        """Devices it holds: one per role of a gang, none without a board, else one."""
        return 0 if self.boardless else len(self.devices) or 1


@dataclass(frozen=True)  # no slots: cached properties live on the instance
class QueueSnapshot:
    """The queue at ``now`` and what :func:`plan_dispatch` made of it.

    ``records`` are the queued jobs oldest first; ``planned`` those the plan considered, by row number (a
    job with no requirements recorded is not planned). ``free_devices``,
    ``session_room`` and ``host_room`` are what the plan started from. ``avoided`` are, by row number, the
    devices a retry is kept off (its task failed there), and for a boardless job the runner hosts; a retry
    whose every match is avoided may take any of them again (the failure may have passed: a network, a
    restarted host), rather than keep its check run waiting until its queue-wait budget ends it; but a
    suspect retry (``jobs.avoid_strict``) never takes the device it failed on or a suspect.
    """

    now: datetime
    records: Sequence[QueuedJobRecord]
    planned: Mapping[int, QueuedJob]
    plan: DispatchPlan
    held: Sequence[HeldJob]
    device_hosts: Mapping[str, str]
    free_devices: frozenset[str]
    session_room: Mapping[str, int]
    host_room: Mapping[str, int]
    avoided: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    reservations: Sequence[Reservation] = ()  # waiting for a device, planned with the jobs
    people: Sequence[QueuedJob] = ()  # those reservations as the plan took them

    @cached_property
    def host_room_after_plan(self) -> dict[str, int]:
        """vCPUs each host has left under its ``max_weight`` once the plan's own assignments are made."""
        room = dict(self.host_room)
        for job, device in self.plan.assignments:
            host = self.device_hosts.get(device)
            if host is not None and host in room:
                room[host] -= job.vcpus
        for job, host in self.plan.placed:
            if host in room:
                room[host] -= job.vcpus
        return room


def requirements_of(record: QueuedJobRecord) -> Requirements | None:
    """A queued job's requirements as its session's resolution recorded them (None: nothing to plan)."""
    return None if record.requirements is None else requirements_of_mapping(record.requirements)


def requirements_of_mapping(requested: Mapping[str, Any]) -> Requirements:
    """Requirements as a session's resolution records them: ``{"labels": {key: [values]}, "tags": [...]}``."""
    return Requirements.from_dict(requested)


def queue_wait_since(record: QueuedJobRecord, now: datetime) -> datetime | None:
    """When the job's queue-wait clock last started running (``now`` for a job first seen now); None while
    it is paused."""
    return now if record.ready_at is None else record.queue_wait_observed_at


def queue_wait_clock(record: QueuedJobRecord, now: datetime) -> QueueWait:
    """The job's queue-wait clock as stored, before this round observes what it waits on."""
    since = queue_wait_since(record, now)
    return QueueWait(
        record.queue_wait_limit_s,
        record.queue_wait_s,
        since.timestamp() if since is not None else None,
    )


async def read_queue(session: AsyncSession, now: datetime, *, lock: bool) -> QueueSnapshot | None:
    """The queue and the plan for it at ``now``; None when nothing is queued.

    With ``lock`` the round is this transaction's and the queued jobs are taken for it
    (:func:`kerrigan.store.leases.queued_jobs`): the dispatcher's read. Without it nothing is locked: a
    page's read.
    Nothing is written either way.
    """
    queued = await queued_jobs(session, lock=lock)
    reservations = await waiting_reservations(session)
    if not queued and not reservations:
        return None
    inventory = await load_inventory(session)
    leased = await leased_devices(session)
    held = await holding_jobs(session)
    per_session: dict[str, int] = {}
    used: dict[str, int] = {}
    for holder in held:
        per_session[holder.session_id] = per_session.get(holder.session_id, 0) + holder.device_count
        if holder.host:
            used[holder.host] = used.get(holder.host, 0) + holder.vcpus
    host_room = await _host_room(session, used)
    avoided, strict = await _avoided(session, {record.pk for record in queued})
    matched: dict[str, tuple[str, ...]] = {}
    device_hosts = {device.id: device.host for device in inventory.devices}
    planned = {
        record.pk: job
        for record in queued
        if (
            job := _queued_job(
                record,
                inventory,
                now,
                matched,
                avoided.get(record.pk, ()),
                strict=record.pk in strict,
                device_hosts=device_hosts,
            )
        )
        is not None
    }
    session_room = {
        record.session_id: record.max_devkits - per_session.get(record.session_id, 0) for record in queued
    }
    people = [_reserving(reservation, inventory, matched) for reservation in reservations]
    session_room |= {person.session_id: 1 for person in people}  # a reservation takes one device
    free = frozenset(device_hosts) - leased
    plan = plan_dispatch(
        [*planned.values(), *people],
        now=now.timestamp(),
        free_devices=free,
        session_room=session_room,
        last_dispatch=await _last_dispatch(session),
        device_hosts=device_hosts,
        host_room=host_room,
    )
    return QueueSnapshot(
        now,
        queued,
        planned,
        plan,
        held,
        device_hosts,
        free,
        session_room,
        host_room,
        avoided,
        reservations,
        people,
    )


def _reserving(
    reservation: Reservation, inventory: Inventory, matched: dict[str, tuple[str, ...]]
) -> QueuedJob:
    """A waiting reservation as the planner takes it: a line of its person's own, after gate work, one
    device of those its request matches (the one it names, if it names one), no vCPUs."""
    requested, key = _parse(reservation.requirements)
    cache = f"reservation\0{key}"
    if cache not in matched:
        matched[cache] = tuple(device.id for device in resolve(requested, inventory).eligible)
    candidates = matched[cache]
    if reservation.device is not None:
        candidates = tuple(device for device in candidates if device == reservation.device)
    return QueuedJob(
        reservation.queue_id,
        f"@{reservation.login.lower()}",
        reservation.queue_id,
        Priority.NORMAL,
        reservation.created_at.timestamp(),
        candidates,
        vcpus=0,
        arrival=reservation.pk,
        reservation=True,
    )


async def waiting_for_device(session: AsyncSession, device_id: str) -> int:
    """How many queued jobs and waiting reservations could take ``device_id`` were it free (a reservation
    holding it is extended only while none could)."""
    inventory = await load_inventory(session)
    alone = tuple(replace(device, reserved=None) for device in inventory.devices if device.id == device_id)
    if not alone:
        return 0
    single = replace(inventory, devices=alone)
    asked: list[tuple[Mapping[str, Any], str | None, bool]] = [
        (record.requirements, record.repository, record.health_check)
        for record in await queued_jobs(session, lock=False)
        if record.requirements is not None and not record.boardless  # that takes no device
    ]
    asked += [(r.requirements, None, False) for r in await waiting_reservations(session)]
    count = 0
    for requested, repository, health_check in asked:
        roles = requested.get("roles") or [requested]  # a gang: any of its roles
        for role in roles:
            if resolve(
                requirements_of_mapping(role), single, repository=repository, health_check=health_check
            ).eligible:
                count += 1
                break
    return count


async def _avoided(
    session: AsyncSession, queued: set[int]
) -> tuple[dict[int, tuple[str, ...]], frozenset[int]]:
    """The devices each queued retry must not be leased (the runner hosts, for a boardless one), and the
    retries that must never be, even when those are all they match (a suspect retry's); only retries
    (attempt 2 on) avoid any."""
    rows = await session.execute(
        select(JobRow.pk, JobRow.avoid_devices, JobRow.avoid_hosts, JobRow.avoid_strict).where(
            JobRow.state == JobState.QUEUED, JobRow.attempt > 1
        )
    )
    avoided: dict[int, tuple[str, ...]] = {}
    strict: set[int] = set()
    for pk, devices, hosts, never in rows:
        if pk in queued and (devices or hosts):
            avoided[pk] = tuple(devices or hosts)
            if never:
                strict.add(pk)
    return avoided, frozenset(strict)


async def holding_jobs(session: AsyncSession) -> list[HeldJob]:
    """Every job holding a device now, by row number."""
    rows = await session.execute(
        select(
            JobRow.pk,
            SessionRow.id,
            SessionRow.repository,
            JobRow.task_id,
            JobRow.state,
            JobRow.device_id,
            JobRow.host,
            JobRow.vcpus,
            JobRow.cpus,
            JobRow.started_at,
            JobRow.devices,
            JobRow.boardless,
        )
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(JobRow.state.in_(HOLDING_A_DEVICE))
        .order_by(JobRow.pk)
    )
    return [
        HeldJob(
            row.pk,
            row.id,
            row.repository,
            row.task_id,
            row.state,
            row.device_id,
            row.host,
            int(row.vcpus),
            row.cpus,
            row.started_at,
            tuple((str(d["role"]), str(d["device"])) for d in row.devices or ()),
            bool(row.boardless),
        )
        for row in rows
    ]


def _parse(requested: Mapping[str, Any]) -> tuple[Requirements, str]:
    """Recorded requirements as the matcher takes them, and a key equal for equal requirements."""
    parsed = requirements_of_mapping(requested)
    return parsed, json.dumps(parsed.as_dict(), sort_keys=True)


@functools.lru_cache(maxsize=4096)
def _parsed(text: str) -> tuple[Requirements, str]:
    return _parse(json.loads(text))


def _parse_roles(requested: Mapping[str, Any]) -> tuple[tuple[str, tuple[Requirements, str]], ...]:
    """A gang's recorded roles, each with its requirements as :func:`_parse` gives them."""
    return tuple((str(role["role"]), _parse(role)) for role in requested["roles"])


@functools.lru_cache(maxsize=4096)
def _parsed_roles(text: str) -> tuple[tuple[str, tuple[Requirements, str]], ...]:
    return _parse_roles(json.loads(text))


def _queued_job(
    record: QueuedJobRecord,
    inventory: Inventory,
    now: datetime,
    matched: dict[str, tuple[str, ...]],
    avoid: tuple[str, ...] = (),
    *,
    strict: bool = False,
    device_hosts: Mapping[str, str],
) -> QueuedJob | None:
    if record.requirements is None:
        return None
    # Jobs of one task share their requirements' text (store.leases reads it): parsed once for all.
    requested, requested_key = (
        _parsed(record.requirements_text) if record.requirements_text else _parse(record.requirements)
    )
    ready = (record.ready_at or now).timestamp()
    # The repository matters only where a pool lists repositories.
    # A health check (it has none) is the lab's own work: no pool's list applies to it.
    repository = (
        record.repository
        if not record.health_check and any(pool.repositories for pool in inventory.pools)
        else None
    )

    def matching(requirements: Requirements, requirements_key: str) -> tuple[str, ...]:
        key = (
            f"{repository and repository.lower()}\0{record.vcpus}\0{record.health_check}\0{requirements_key}"
        )
        if key not in matched:
            # A device whose runner host can never fit the claim (as it reported its CPUs) is never leased
            # it; a host that has not reported is left to its agent, which refuses runner_full what it
            # cannot fit.
            eligible = resolve(
                requirements,
                inventory,
                repository=repository,
                vcpus=record.vcpus,
                unreported_fit=True,
                health_check=record.health_check,
            ).eligible
            matched[key] = tuple(device.id for device in eligible)
        return matched[key]

    try:
        priority = record.priority
    except ValueError:
        priority = Priority.NORMAL
    if record.boardless:  # no device: its candidates are runner hosts
        key = f"hosts\0{repository and repository.lower()}\0{record.vcpus}\0{requested_key}"
        if key not in matched:
            # Only hosts whose agents reported their CPUs: the job needs the agent itself.
            eligible = resolve_hosts(requested, inventory, repository=repository, vcpus=record.vcpus).eligible
            matched[key] = eligible
        hosts = matched[key]
        if avoid:
            hosts = tuple(host for host in hosts if host not in avoid) or hosts
        return QueuedJob(
            str(record.pk),
            record.repository,
            record.session_id,
            priority,
            ready,
            (),
            record.vcpus,
            arrival=record.pk,
            hosts=hosts,
            boardless=True,
        )
    roles: tuple[Role, ...] = ()
    if "roles" in record.requirements:  # a gang: each role matched on its own
        parsed_roles = _parsed_roles(record.requirements_text) if record.requirements_text else None
        if parsed_roles is None:
            parsed_roles = _parse_roles(record.requirements)
        roles = tuple(Role(name, matching(*parsed)) for name, parsed in parsed_roles)
        if avoid:
            roles = _avoiding_gang(roles, avoid, strict=strict, device_hosts=device_hosts)
        candidates: tuple[str, ...] = ()
    else:
        candidates = matching(requested, requested_key)
        if avoid:
            kept = tuple(device for device in candidates if device not in avoid)
            candidates = kept if kept or strict else candidates
    return QueuedJob(
        str(record.pk),
        record.repository,
        record.session_id,
        priority,
        ready,
        candidates,
        record.vcpus,
        arrival=record.pk,
        roles=roles,
    )


def _avoiding_gang(
    roles: tuple[Role, ...], avoid: tuple[str, ...], *, strict: bool, device_hosts: Mapping[str, str]
) -> tuple[Role, ...]:
    """A gang's roles less the devices its retry avoids, as long as some host could still hold the whole
    gang from what is left (one device a role, all on one host); else (a rig whose one host holds the
    devices it failed on) its roles with those devices last, as a job whose every match failed it takes
    one again: a role takes one of them only when no other of its devices is free there. A suspect retry
    (``strict``) never takes them back."""
    kept = tuple(Role(role.name, tuple(d for d in role.candidates if d not in avoid)) for role in roles)
    if strict:
        return kept
    every = {device for role in kept for device in role.candidates}
    fit = fit_gang("", kept, 0, free=every, device_hosts=device_hosts, held={}, host_room={})
    if fit.host is not None:
        return kept
    return tuple(
        Role(role.name, left.candidates + tuple(d for d in role.candidates if d in avoid))
        for role, left in zip(roles, kept, strict=True)
    )


async def _host_room(session: AsyncSession, used: Mapping[str, int]) -> dict[str, int]:
    """vCPUs each reporting host has left under its max_weight."""
    rows = await session.execute(select(RunnerHostRow.id, RunnerHostRow.resources))
    room = {}
    for host, resources in rows:
        limit = (resources or {}).get("max_weight")
        if isinstance(limit, int):
            room[host] = limit - used.get(host, 0)
    return room


async def _last_dispatch(session: AsyncSession) -> dict[str, float]:
    """When each repository last had a device (or a runner host's room) leased to one of its jobs (from the
    leases' grant times)."""
    last: dict[str, float] = {}
    for lease in (DeviceLeaseRow, HostLeaseRow):
        rows = await session.execute(
            select(SessionRow.repository, func.max(lease.granted_at))
            .join(SessionRow, lease.session_id == SessionRow.id)
            .group_by(SessionRow.repository)
        )
        for repository, granted in rows:
            if granted is not None:
                last[repository] = max(last.get(repository, granted.timestamp()), granted.timestamp())
    return last
