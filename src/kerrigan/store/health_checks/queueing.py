"""Health checks queued: a device's check as its pool defines it, one pending at a time, and the checks due.

A health check (and a recovery, :mod:`kerrigan.store.health_checks.recoveries`) runs as a job of a session
of its own: event ``health_check``, no repository, no commit, no check run
(:func:`kerrigan.store.transitions.record_version` records no version for it), one job pinned to the device
(``kerrigan.target_id``) in the gate tier of the queue, so it runs before the device's next normal job. It
may run on a ``bad`` device (that is how one comes back); never on one in maintenance or retired, nor on a
paused or offline runner host (matching rules those out as for any job). At most one check (or recovery)
per device is queued or running at a time.

This module builds its rows itself rather than through :mod:`kerrigan.store.sessions`: the job transitions
call it, and those are below sessions.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.health_checks import (
    HEALTH_CHECK_EVENT,
    HEALTH_CHECK_TASK,
    HEALTH_CHECK_WORKFLOW,
    HealthCheck,
    HealthCheckError,
    health_check_from_document,
)
from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import JobState
from kerrigan.core.manifest import Priority
from kerrigan.core.resolution import HealthCheckRecord, Resolution
from kerrigan.core.sessions import SessionState
from kerrigan.store.models import (
    DeviceLeaseRow,
    DeviceRow,
    JobRow,
    PoolRow,
    RunnerHostRow,
    SessionRow,
)
from kerrigan.store.signals import Topic, mark

SCAN_INTERVAL: Final = timedelta(seconds=30)  # how often the dispatcher looks for checks due by ``every``


class NoHealthCheckError(LookupError):
    """The device has no health check (neither its own nor its pool's)."""


@dataclass(frozen=True, slots=True)
class QueuedCheck:
    """A device's health-check job, and whether this call queued it (False: one was queued or running)."""

    job_pk: int
    queued: bool


def stored_health_check(document: object) -> HealthCheck | None:
    """A health check as a JSON column keeps it (None: none, or one no longer valid)."""
    if not isinstance(document, dict):
        return None
    try:
        return health_check_from_document(document)
    except HealthCheckError:
        return None


async def device_health_check(session: AsyncSession, device_id: str) -> HealthCheck | None:
    """The health check of ``device_id``: its own, else its pool's."""
    found = (
        await session.execute(
            select(DeviceRow.health_check, PoolRow.health_check)
            .join(PoolRow, DeviceRow.pool_pk == PoolRow.pk)
            .where(DeviceRow.id == device_id)
        )
    ).first()
    if found is None:
        return None
    return stored_health_check(found[0]) or stored_health_check(found[1])


async def pending_check(session: AsyncSession, device_id: str, *, besides: int | None = None) -> int | None:
    """The job of the device's health check (or recovery) that is queued or running, if there is one;
    ``besides``: a session not to count (the one ending)."""
    query = (
        select(JobRow.pk)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(SessionRow.health_check_device == device_id, SessionRow.state != SessionState.COMPLETED)
    )
    if besides is not None:
        query = query.where(SessionRow.pk != besides)
    return await session.scalar(query.order_by(JobRow.pk.desc()).limit(1))


@dataclass(frozen=True, slots=True)
class LastCheck:
    """A device's latest health-check job, for its page."""

    job_pk: int
    session_id: str
    state: JobState
    created_at: datetime


async def last_check_job(session: AsyncSession, device_id: str) -> LastCheck | None:
    """The device's latest health-check job (any state)."""
    found = (
        await session.execute(
            select(JobRow.pk, SessionRow.id, JobRow.state, JobRow.created_at)
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            .where(SessionRow.health_check_device == device_id)
            .order_by(JobRow.pk.desc())
            .limit(1)
        )
    ).first()
    return LastCheck(int(found[0]), str(found[1]), found[2], found[3]) if found is not None else None


async def queue_check(
    session: AsyncSession, device_id: str, at: datetime, *, why: str, check: HealthCheck | None = None
) -> QueuedCheck:
    """Queue the device's health check (``why``: what asked for it) unless one is queued or running;
    :class:`NoHealthCheckError` when the device has none."""
    check = check or await device_health_check(session, device_id)
    if check is None:
        raise NoHealthCheckError(f"device {device_id!r} has no health check")
    pending = await pending_check(session, device_id)
    if pending is not None:
        return QueuedCheck(pending, queued=False)
    return QueuedCheck(await queue_device_job(session, device_id, at, why=why, check=check), queued=True)


async def queue_device_job(
    session: AsyncSession,
    device_id: str,
    at: datetime,
    *,
    why: str,
    check: HealthCheck,
    task: str = HEALTH_CHECK_TASK,
) -> int:
    """A session of its own for one job of the lab's on ``device_id`` (a health check, or a recovery:
    ``task``), running ``check``; the job's key. The caller made sure none is pending."""
    row = SessionRow(
        id=str(uuid.uuid4()),
        repository="",
        installation_id=None,
        head_sha="",
        workflow=HEALTH_CHECK_WORKFLOW,
        manifest_path="",
        event=HEALTH_CHECK_EVENT,
        priority=Priority.GATE.value,  # ahead of normal work: the device's next job should find it checked
        state=SessionState.QUEUED,
        resolution=Resolution(health_check=HealthCheckRecord(device_id, why, check)).to_document(),
        created_at=at,
        updated_at=at,
        health_check_device=device_id,
    )
    session.add(row)
    await session.flush()
    job = JobRow(
        session_pk=row.pk,
        task_id=task,
        created_at=at,
        command=check.run,
        vcpus=check.vcpus,
        timeout_s=check.timeout_s,
        requirements={"labels": {"kerrigan.target_id": [device_id]}, "tags": []},
    )
    session.add(job)
    await session.flush()
    mark(session, Topic.DISPATCH)
    return job.pk


async def queue_check_if_any(session: AsyncSession, device_id: str, at: datetime, *, why: str) -> bool:
    """Queue the device's health check when it has one (and none is pending); whether it has one."""
    check = await device_health_check(session, device_id)
    if check is None:
        return False
    await queue_check(session, device_id, at, why=why, check=check)
    return True


async def queue_due_checks(session: AsyncSession, now: datetime) -> list[str]:
    """Queue the health check of every idle device whose ``every`` has passed since its last check; the
    ids of those queued. Only available devices on online, unpaused runner hosts are looked at: a check
    never preempts a job (a leased device is not idle) and would only wait anywhere else."""
    rows = (
        await session.execute(
            select(DeviceRow.id, DeviceRow.host, DeviceRow.health_check, PoolRow.health_check)
            .join(PoolRow, DeviceRow.pool_pk == PoolRow.pk)
            .where(
                DeviceRow.state == DeviceState.AVAILABLE,
                (DeviceRow.health_check.is_not(None)) | (PoolRow.health_check.is_not(None)),
            )
        )
    ).all()
    checks = {
        device_id: (host, check)
        for device_id, host, own, pools in rows
        if (check := stored_health_check(own) or stored_health_check(pools)) is not None
        and check.every_s is not None
    }
    if not checks:
        return []
    away = await _hosts_away(session)
    leased = set((await session.scalars(select(DeviceLeaseRow.device_id))).all())
    pending = set(
        (
            await session.scalars(
                select(SessionRow.health_check_device).where(
                    SessionRow.health_check_device.in_(checks), SessionRow.state != SessionState.COMPLETED
                )
            )
        ).all()
    )
    last = dict(
        (
            await session.execute(
                select(SessionRow.health_check_device, func.max(SessionRow.created_at))
                .where(SessionRow.health_check_device.in_(checks))
                .group_by(SessionRow.health_check_device)
            )
        ).all()
    )
    queued = []
    for device_id, (host, check) in sorted(checks.items()):
        if host in away or device_id in leased or device_id in pending:
            continue
        if check.due(last.get(device_id), now):
            await queue_check(
                session, device_id, now, why=f"every {check.as_document()['every']}", check=check
            )
            queued.append(device_id)
    return queued


async def _hosts_away(session: AsyncSession) -> Collection[str]:
    rows = await session.execute(
        select(
            RunnerHostRow.id, RunnerHostRow.online, RunnerHostRow.paused_at, RunnerHostRow.last_heartbeat_at
        )
    )
    return {
        host for host, online, paused_at, beat in rows if not online or beat is None or paused_at is not None
    }
