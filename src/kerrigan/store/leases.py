"""Device leases: a device runs one job at a time, and the database makes that so.

A lease row is keyed by the device, so a second lease of a device cannot be inserted, whichever dispatcher
(or ``kerrigan serve`` replica) tries. Dispatchers take the queued jobs they plan for with ``FOR UPDATE SKIP
LOCKED`` (PostgreSQL), so two of them never plan for the same job; a job is moved from ``queued`` to
``leased`` only if it is still queued, and a lease whose job was taken meanwhile is not kept.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, cast

from sqlalchemy import Table, Text, bindparam, delete, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.core.manifest import DEFAULT_MAX_DEVKITS, DEFAULT_QUEUE_WAIT_LIMIT_S
from kerrigan.store.models import DeviceLeaseRow, JobRow, SessionRow


@dataclass(frozen=True, slots=True)
class QueuedJobRecord:
    """A queued job as the dispatcher needs it: its task's requirements and its session's scheduling."""

    pk: int
    task_id: str
    session_id: str
    repository: str
    priority: str
    vcpus: int
    ready_at: datetime | None
    requirements: Mapping[str, Any] | None = None  # {"labels": {key: [values]}, "tags": [...]}
    max_devkits: int = DEFAULT_MAX_DEVKITS
    queue_wait_limit_s: float = float(DEFAULT_QUEUE_WAIT_LIMIT_S)
    queue_wait_s: float = 0.0  # spent before queue_wait_observed_at
    queue_wait_observed_at: datetime | None = None  # None while the clock is paused
    requirements_text: str | None = None  # the requirements as stored: equal texts, equal requirements
    health_check: bool = False  # a device's health check: it may run on a device whose health is bad


@dataclass(frozen=True, slots=True)
class Grant:
    """A device to lease to a job, on the runner host that drives it."""

    job_pk: int
    device_id: str
    host: str
    session_id: str


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


async def take_queued_jobs(session: AsyncSession, limit: int = 10_000) -> list[QueuedJobRecord]:
    """Queued jobs this dispatcher may plan for, oldest first; other dispatchers skip them until commit."""
    return await queued_jobs(session, limit, lock=True)


async def queued_jobs(session: AsyncSession, limit: int = 10_000, *, lock: bool) -> list[QueuedJobRecord]:
    """Queued jobs ready for dispatch, oldest first. With ``lock`` they are taken for this transaction
    (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: locked ones are skipped); without it nothing is locked and
    every queued job is read, whoever holds it."""
    # Columns, not ORM objects: a deep queue is read every round, and building an object per job (with
    # every column) was most of a round's time.
    query = (
        select(
            JobRow.pk,
            JobRow.task_id,
            SessionRow.id,
            SessionRow.repository,
            SessionRow.priority,
            JobRow.vcpus,
            JobRow.ready_at,
            JobRow.requirements.cast(Text),
            SessionRow.max_devkits,
            SessionRow.queue_wait_limit_s,
            JobRow.queue_wait_s,
            JobRow.queue_wait_observed_at,
            SessionRow.health_check_device,
        )
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(
            JobRow.state == JobState.QUEUED,
            SessionRow.awaiting_approval.is_(False),
            SessionRow.state != SessionState.COMPLETED,
        )
        .order_by(JobRow.pk)
        .limit(limit)
    )
    if lock and _dialect(session) == "postgresql":
        query = query.with_for_update(skip_locked=True, of=JobRow)
    return [
        QueuedJobRecord(
            pk,
            task_id,
            session_id,
            repository,
            priority,
            vcpus,
            ready_at,
            _requirements(requirements),
            max_devkits,
            queue_wait_limit_s,
            queue_wait_s,
            queue_wait_observed_at,
            requirements,
            health_check_device is not None,
        )
        for (
            pk,
            task_id,
            session_id,
            repository,
            priority,
            vcpus,
            ready_at,
            requirements,
            max_devkits,
            queue_wait_limit_s,
            queue_wait_s,
            queue_wait_observed_at,
            health_check_device,
        ) in (await session.execute(query)).all()
    ]


@functools.lru_cache(maxsize=4096)
def _requirements(text: str | None) -> Mapping[str, Any] | None:
    """A task's recorded requirements, decoded once for every queued job of it (they share the text; the
    one object is shared too, and never changed)."""
    return None if text is None else json.loads(text)


GRANT_BATCH = 1000  # rows per statement: well under the bind-parameter limits of SQLite and PostgreSQL


async def grant_leases(
    session: AsyncSession, grants: Sequence[Grant], now: datetime, ttl: timedelta
) -> list[Grant]:
    """Lease devices to jobs; the grants that took (a device already leased, or a job no longer queued,
    is left out). Runs in the caller's transaction, a few statements per thousand grants.

    The leases are inserted first: on PostgreSQL the jobs are this dispatcher's (``SKIP LOCKED``), and on
    SQLite that first write holds the database's write lock, so the jobs' states read next cannot change
    before the transaction ends.
    """
    insert = postgresql_insert if _dialect(session) == "postgresql" else sqlite_insert
    granted: list[Grant] = []
    for start in range(0, len(grants), GRANT_BATCH):
        batch = grants[start : start + GRANT_BATCH]
        statement = (
            insert(DeviceLeaseRow)
            .values(
                [
                    {
                        "device_id": grant.device_id,
                        "job_pk": grant.job_pk,
                        "session_id": grant.session_id,
                        "host": grant.host,
                        "granted_at": now,
                        "expires_at": now + ttl,
                    }
                    for grant in batch
                ]
            )
            .on_conflict_do_nothing()  # a device (or a job) leased already stays as it is
            .returning(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk)
        )
        inserted = {(str(device), int(job)) for device, job in (await session.execute(statement)).all()}
        placed = [grant for grant in batch if (grant.device_id, grant.job_pk) in inserted]
        if not placed:
            continue
        still_queued = set(
            (
                await session.scalars(
                    select(JobRow.pk).where(
                        JobRow.pk.in_([g.job_pk for g in placed]), JobRow.state == JobState.QUEUED
                    )
                )
            ).all()
        )
        taken = [grant.device_id for grant in placed if grant.job_pk not in still_queued]
        if taken:  # its job was ended or moved meanwhile: the lease is not kept
            await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.device_id.in_(taken)))
        kept = [grant for grant in placed if grant.job_pk in still_queued]
        if kept:
            # The table, not the entity: a plain executemany with a row per job (the entity would make it
            # an ORM bulk update, which wants each row's primary key by its attribute name).
            jobs = cast(Table, JobRow.__table__)
            await session.execute(
                update(jobs)
                .where(jobs.c.pk == bindparam("job"))
                .values(state=JobState.LEASED, device_id=bindparam("device"), host=bindparam("lease_host")),
                [{"job": g.job_pk, "device": g.device_id, "lease_host": g.host} for g in kept],
            )
        granted += kept
    return granted


async def leased_devices(session: AsyncSession) -> set[str]:
    """Every device under a lease now."""
    return set((await session.scalars(select(DeviceLeaseRow.device_id))).all())


async def release_lease(session: AsyncSession, device_id: str) -> None:
    """Free a device (its job ended)."""
    await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.device_id == device_id))


async def renew_leases(session: AsyncSession, host: str, now: datetime, ttl: timedelta) -> int:
    """A runner host's heartbeat keeps its leases alive; how many it holds."""
    renewed = await session.execute(
        update(DeviceLeaseRow).where(DeviceLeaseRow.host == host).values(expires_at=now + ttl)
    )
    return int(renewed.rowcount)  # type: ignore[attr-defined]


async def extend_all_leases(session: AsyncSession, now: datetime, ttl: timedelta) -> int:
    """Every lease runs a full lease time from ``now`` (a server starting up); how many there are."""
    extended = await session.execute(update(DeviceLeaseRow).values(expires_at=now + ttl))
    return int(extended.rowcount)  # type: ignore[attr-defined]


async def expired_leases(session: AsyncSession, now: datetime) -> list[tuple[str, int]]:
    """(device, job) of leases whose runner host stopped renewing them."""
    rows = await session.execute(
        select(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk).where(DeviceLeaseRow.expires_at < now)
    )
    return [(device_id, int(job_pk)) for device_id, job_pk in rows]
