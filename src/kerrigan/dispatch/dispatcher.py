"""The dispatcher: leases free devices to queued jobs in queue order, and ends leases whose host went silent.

Each round reads the queue (taking its jobs with ``SKIP LOCKED``, so replicas share it), the inventory, the
leases and what runner hosts last reported, lets :func:`kerrigan.core.dispatch_order.plan_dispatch` decide,
and writes the leases; the runner hosts find them on their next poll. A lease whose host stopped sending
heartbeats expires: a job that never started goes back to the queue once, any other fails ``runner_lost``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.dispatch_order import DispatchPlan, QueuedJob, plan_dispatch
from kerrigan.core.inventory import Inventory
from kerrigan.core.manifest import Priority
from kerrigan.core.matching import resolve
from kerrigan.core.queue_wait import QueueWait
from kerrigan.core.requirements import LabelRequirement, Requirements, TagRequirement
from kerrigan.core.runner_protocol import LEASE_TTL_S
from kerrigan.dispatch.changes import JobChanges
from kerrigan.store.database import Database
from kerrigan.store.inventory import load_inventory
from kerrigan.store.jobs import QUEUE_WAIT_EXCEEDED, queue_wait_limit
from kerrigan.store.leases import (
    QUEUED,
    Grant,
    QueuedJobRecord,
    expired_leases,
    extend_all_leases,
    grant_leases,
    leased_devices,
    release_lease,
    take_queued_jobs,
)
from kerrigan.store.models import DeviceLeaseRow, JobRow, RunnerHostRow, SessionRow
from kerrigan.store.runners import mark_silent_hosts_offline

log = logging.getLogger(__name__)

HOLDING = ("leased", "accepted", "running")  # job states that hold a device
RUNNER_LOST = "runner_lost"


@dataclass(frozen=True, slots=True)
class Round:
    """What one dispatch round did."""

    granted: tuple[Grant, ...]
    plan: DispatchPlan | None
    lost: tuple[int, ...] = ()
    withdrawn: tuple[int, ...] = ()  # queued jobs whose queue-wait budget ran out


def requirements_of(resolution: Mapping[str, Any], task_id: str) -> Requirements | None:
    """A task's requirements as its session's stored resolution recorded them."""
    for task in resolution.get("tasks", []):
        if task.get("id") == task_id:
            requested = task.get("requested", {})
            labels = {
                key: LabelRequirement(key, tuple(values))
                for key, values in requested.get("labels", {}).items()
            }
            tags = tuple(TagRequirement(tag) for tag in requested.get("tags", []))
            return Requirements(labels, tags)
    return None


class Dispatcher:
    """Runs dispatch rounds, every second and whenever woken."""

    def __init__(
        self,
        database: Database,
        *,
        interval_s: float = 1.0,
        lease_ttl_s: float = LEASE_TTL_S,
        changes: JobChanges | None = None,
    ) -> None:
        self.database = database
        self.interval_s = interval_s
        self.lease_ttl = timedelta(seconds=lease_ttl_s)
        self.changes = changes or JobChanges()
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Something changed (a new session, a freed device): look now."""
        self._wake.set()

    async def run(self) -> None:
        """Dispatch until cancelled.

        First every lease gets a full lease time again: while the server was down no heartbeat could
        arrive, and that must not count against the runner hosts.
        """
        async with self.database.sessions() as session, session.begin():
            await extend_all_leases(session, self.database.clock(), self.lease_ttl)
        while True:
            try:
                await self.expire()
                await self.dispatch_once()
            except Exception:
                log.exception("dispatch round failed; trying again")
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.interval_s)

    async def expire(self) -> tuple[int, ...]:
        """End the leases of hosts that stopped sending heartbeats; the jobs they held."""
        now = self.database.clock()
        async with self.database.sessions() as session, session.begin():
            await mark_silent_hosts_offline(session, now, self.lease_ttl)
            lost = await expired_leases(session, now)
            for device_id, job_pk in lost:
                await release_lease(session, device_id)
                job = await session.get(JobRow, job_pk)
                if job is None:
                    continue
                if job.started_at is None and job.reason != RUNNER_LOST:
                    job.state, job.device_id, job.reason = QUEUED, None, RUNNER_LOST  # once more
                else:
                    job.state, job.reason, job.finished_at = "failed", RUNNER_LOST, now
                log.warning("job %s lost its runner (device %s); %s", job_pk, device_id, job.state)
        self.changes.changed(job for _, job in lost)
        return tuple(job for _, job in lost)

    async def dispatch_once(self) -> Round:
        """One round: lease free devices to the queued jobs that come first."""
        now_dt = self.database.clock()
        now = now_dt.timestamp()
        async with self.database.sessions() as session, session.begin():
            queued = await take_queued_jobs(session)
            if not queued:
                return Round((), None)
            inventory = await load_inventory(session)
            leased = await leased_devices(session)
            held, used = await _holdings(session)
            host_room = await _host_room(session, used)
            matched: dict[str, tuple[str, ...]] = {}
            jobs = [_queued_job(record, inventory, now_dt, matched) for record in queued]
            # Their queue-wait clocks start the first time they are dispatchable: one statement for all.
            new = [record.pk for record in queued if record.ready_at is None]
            if new:
                await session.execute(
                    update(JobRow)
                    .where(JobRow.pk.in_(new))
                    .values(ready_at=now_dt, queue_wait_observed_at=now_dt)
                )
            waiting = [job for job in jobs if job is not None]
            room = {
                record.session_id: int(record.resolution.get("scheduling", {}).get("max_devkits", 1))
                - held.get(record.session_id, 0)
                for record in queued
            }
            plan = plan_dispatch(
                waiting,
                now=now,
                free_devices={device.id for device in inventory.devices} - leased,
                session_room=room,
                last_dispatch=await _last_dispatch(session),
                device_hosts={device.id: device.host for device in inventory.devices},
                host_room=host_room,
            )
            hosts = {device.id: device.host for device in inventory.devices}
            grants = [
                Grant(int(job.id), device, hosts[device], job.session_id) for job, device in plan.assignments
            ]
            granted = await grant_leases(session, grants, now_dt, self.lease_ttl)
            withdrawn = await _spend_queue_wait(session, queued, plan, granted, now_dt)
        self.changes.changed(withdrawn)
        return Round(tuple(granted), plan, withdrawn=tuple(withdrawn))


def _queued_job(
    record: QueuedJobRecord,
    inventory: Inventory,
    now: datetime,
    matched: dict[str, tuple[str, ...]],
) -> QueuedJob | None:
    requested = requirements_of(record.resolution, record.task_id)
    if requested is None:
        return None
    ready = (record.ready_at or now).timestamp()
    key = json.dumps(requested.as_dict(), sort_keys=True)  # jobs of one workflow share requirements
    if key not in matched:
        matched[key] = tuple(device.id for device in resolve(requested, inventory).eligible)
    candidates = matched[key]
    try:
        priority = Priority(record.priority)
    except ValueError:
        priority = Priority.NORMAL
    return QueuedJob(
        str(record.pk),
        record.repository,
        record.session_id,
        priority,
        ready,
        candidates,
        record.vcpus,
        arrival=record.pk,
    )


async def _spend_queue_wait(
    session: AsyncSession,
    queued: list[QueuedJobRecord],
    plan: DispatchPlan,
    granted: list[Grant],
    now: datetime,
) -> list[int]:
    """Run or pause each waiting job's queue-wait clock for what it waits on; end those out of budget.

    A job given a device stops its clock: what it spent travels with its offer. Only changes are written,
    so a long queue costs a write per job only when its blocker changes.
    """
    leased = {grant.job_pk for grant in granted}
    ended: list[int] = []
    changed: list[dict[str, Any]] = []
    at = now.timestamp()
    for record in queued:
        waiting = plan.waiting.get(str(record.pk))
        if waiting is None and record.pk not in leased:
            continue  # not planned for (no requirements): nothing to say about its wait
        observed = record.queue_wait_observed_at
        if record.ready_at is None:
            observed = now  # made ready this round
        since = observed.timestamp() if observed is not None else None
        clock = QueueWait(queue_wait_limit(record.resolution), record.queue_wait_s, since)
        clock = clock.observe(at, counts=waiting is not None and waiting.counts_toward_queue_wait)
        if record.pk not in leased and clock.exceeded(at):
            ended.append(record.pk)
            continue
        running_since = datetime.fromtimestamp(clock.since, UTC) if clock.since is not None else None
        if (clock.spent_s, running_since) != (record.queue_wait_s, observed):
            changed.append(
                {"pk": record.pk, "queue_wait_s": clock.spent_s, "queue_wait_observed_at": running_since}
            )
    if changed:  # one executemany, not a statement per job
        await session.execute(update(JobRow), changed)
    if ended:
        await session.execute(
            update(JobRow)
            .where(JobRow.pk.in_(ended), JobRow.state == QUEUED)
            .values(state="refused_before_start", reason=QUEUE_WAIT_EXCEEDED, finished_at=now)
        )
    return ended


async def _holdings(session: AsyncSession) -> tuple[dict[str, int], dict[str, int]]:
    """Devices held per session, and vCPUs claimed per runner host, by jobs holding a device."""
    rows = await session.execute(
        select(SessionRow.id, JobRow.host, JobRow.vcpus, JobRow.state)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(JobRow.state.in_(HOLDING))
    )
    per_session: dict[str, int] = {}
    per_host: dict[str, int] = {}
    for session_id, host, vcpus, _ in rows:
        per_session[session_id] = per_session.get(session_id, 0) + 1
        if host:
            per_host[host] = per_host.get(host, 0) + int(vcpus)
    return per_session, per_host


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
    """When each repository last had a device leased to one of its jobs (from the leases' grant times)."""
    rows = await session.execute(
        select(SessionRow.repository, func.max(DeviceLeaseRow.granted_at))
        .join(SessionRow, DeviceLeaseRow.session_id == SessionRow.id)
        .group_by(SessionRow.repository)
    )
    return {repository: granted.timestamp() for repository, granted in rows if granted is not None}
