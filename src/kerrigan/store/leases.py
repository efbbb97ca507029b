"""Device leases: a device runs one job at a time, and the database makes that so.

A lease row is keyed by the device, so a second lease of a device cannot be inserted, whichever dispatcher
(or ``kerrigan serve`` replica) tries. Dispatchers take the queued jobs they plan for with ``FOR UPDATE SKIP
LOCKED`` (PostgreSQL), so two of them never plan for the same job; a job is moved from ``queued`` to
``leased`` only if it is still queued, and a lease whose job was taken meanwhile is not kept.

A job that holds no device (``board: none``) holds room on a runner host instead: a host lease, keyed by
the job, renewed by the host's heartbeats and expired as a device's lease is.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, cast

from sqlalchemy import Table, Text, bindparam, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.core.manifest import DEFAULT_MAX_DEVKITS, DEFAULT_QUEUE_WAIT_LIMIT_S, Priority
from kerrigan.store.models import DeviceLeaseRow, HostLeaseRow, JobRow, SessionRow
from kerrigan.store.signals import JobMoved, note


@dataclass(frozen=True, slots=True)
class QueuedJobRecord:
    """A queued job as the dispatcher needs it: its task's requirements and its session's scheduling."""

    pk: int
    task_id: str
    session_id: str
    repository: str
    priority: Priority
    vcpus: int
    ready_at: datetime | None
    requirements: Mapping[str, Any] | None = None  # {"labels": {key: [values]}, "tags": [...]}
    max_devkits: int = DEFAULT_MAX_DEVKITS
    queue_wait_limit_s: float = float(DEFAULT_QUEUE_WAIT_LIMIT_S)
    queue_wait_s: float = 0.0  # spent before queue_wait_observed_at
    queue_wait_observed_at: datetime | None = None  # None while the clock is paused
    requirements_text: str | None = None  # the requirements as stored: equal texts, equal requirements
    health_check: bool = False  # a device's health check: it may run on a device whose health is bad
    boardless: bool = False  # ``board: none``: placed on a runner host, holding no device


@dataclass(frozen=True, slots=True)
class Grant:
    """A device to lease to a job, on the runner host that drives it; ``role`` for a gang's device (its
    grants come together, in role order)."""

    job_pk: int
    device_id: str
    host: str
    session_id: str
    role: str | None = None


@dataclass(frozen=True, slots=True)
class HostGrant:
    """Room on a runner host to lease to a job that holds no device (``board: none``)."""

    job_pk: int
    host: str
    session_id: str


# The dispatch round's advisory lock on PostgreSQL: two 32-bit keys, a key space apart from the one-key
# locks that holds and reservations take per login.
ROUND_LOCK: Final = (0x4B52, 1)
# How long a round waits for another replica's: a round takes milliseconds, so one held this long is stuck
# (its replica cut off mid-round, its connection half-open), and the others go on without it.
ROUND_WAIT_S: Final = 10.0
_ROUND_POLL_S: Final = 0.02

log = logging.getLogger(__name__)


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


async def _take_the_round(session: AsyncSession) -> None:
    """Hold :data:`ROUND_LOCK` for this transaction once no other round does, or go on without it (a
    warning logged) when another held it for :data:`ROUND_WAIT_S`: tried, not waited on, so the wait
    has an end."""
    deadline = time.monotonic() + ROUND_WAIT_S
    while not await session.scalar(select(func.pg_try_advisory_xact_lock(*ROUND_LOCK))):
        if time.monotonic() >= deadline:
            log.warning(
                "another replica's dispatch round has run for %g s: this one goes on without it", ROUND_WAIT_S
            )
            return
        await asyncio.sleep(_ROUND_POLL_S)


async def take_queued_jobs(session: AsyncSession, limit: int = 10_000) -> list[QueuedJobRecord]:
    """Queued jobs this dispatcher may plan for, oldest first, once any other replica's round has ended
    (:func:`queued_jobs` with ``lock``)."""
    return await queued_jobs(session, limit, lock=True)


async def queued_jobs(session: AsyncSession, limit: int = 10_000, *, lock: bool) -> list[QueuedJobRecord]:
    """Queued jobs ready for dispatch, oldest first. With ``lock`` they are taken for this transaction
    (``FOR UPDATE SKIP LOCKED`` on PostgreSQL: locked ones are skipped); without it nothing is locked and
    every queued job is read, whoever holds it.

    With ``lock`` on PostgreSQL it first waits for any other replica's round to end and holds the round
    (:data:`ROUND_LOCK`) until the transaction ends; SQLite's write lock does that already. Two rounds
    that overlapped lost a freed board: the second skipped every job the first had taken, the first had
    read the devices before the board was freed, and the board sat idle until a later round (or the
    second leased it to a newer job than those the first held). Waiting, the round reads what the other
    committed. A round held for :data:`ROUND_WAIT_S` is stuck, and the round goes on without the lock,
    skipping the jobs the stuck one holds, so one cut-off replica stops no other's dispatch."""
    if lock and _dialect(session) == "postgresql":
        await _take_the_round(session)
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
            JobRow.boardless,
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
            bool(boardless),
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
            boardless,
        ) in (await session.execute(query)).all()
    ]


@functools.lru_cache(maxsize=4096)
def _requirements(text: str | None) -> Mapping[str, Any] | None:
    """A task's recorded requirements, decoded once for every queued job of it (they share the text; the
    one object is shared too, and never changed)."""
    return None if text is None else json.loads(text)


GRANT_BATCH = 1000  # rows per statement: well under the bind-parameter limits of SQLite and PostgreSQL


def _batches(grants: Sequence[Grant]) -> list[list[Grant]]:
    """Grants in batches of about :data:`GRANT_BATCH`, a gang's grants never split between two."""
    batches: list[list[Grant]] = [[]]
    for index, grant in enumerate(grants):
        starts_job = index == 0 or grants[index - 1].job_pk != grant.job_pk
        if starts_job and len(batches[-1]) >= GRANT_BATCH:
            batches.append([])
        batches[-1].append(grant)
    return batches


async def grant_leases(
    session: AsyncSession, grants: Sequence[Grant], now: datetime, ttl: timedelta
) -> list[Grant]:
    """Lease devices to jobs; the grants that took. A job gets every device granted it or none (a gang:
    a device already leased leaves its other devices free), and a job no longer queued gets none. Runs in
    the caller's transaction, a few statements per thousand grants.

    The leases are inserted first: on PostgreSQL the jobs are this dispatcher's (``SKIP LOCKED``), and on
    SQLite that first write holds the database's write lock, so the jobs' states read next cannot change
    before the transaction ends.
    """
    insert = postgresql_insert if _dialect(session) == "postgresql" else sqlite_insert
    granted: list[Grant] = []
    for batch in _batches(grants):
        if not batch:
            continue
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
                        "role": grant.role,
                    }
                    for grant in batch
                ]
            )
            .on_conflict_do_nothing()  # a device leased already stays as it is
            .returning(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk)
        )
        rows = (await session.execute(statement)).all()
        inserted = {(str(device), int(job)) for device, job in rows if job is not None}
        wanted: dict[int, list[Grant]] = {}
        for grant in batch:
            wanted.setdefault(grant.job_pk, []).append(grant)
        whole = {job for job, each in wanted.items() if all((g.device_id, job) in inserted for g in each)}
        if not whole and not inserted:
            continue
        # The jobs still queued, with what the log says of each move (the task, its repository).
        named = (
            {
                int(pk): (str(task), str(repository))
                for pk, task, repository in await session.execute(
                    select(JobRow.pk, JobRow.task_id, SessionRow.repository)
                    .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                    .where(JobRow.pk.in_(whole), JobRow.state == JobState.QUEUED)
                )
            }
            if whole
            else {}
        )
        still_queued = set(named)
        # A lease is not kept when its job was ended or moved meanwhile, or when another device of its
        # gang was taken: all of a gang's devices or none.
        dropped = [device for device, job in inserted if job not in still_queued]
        if dropped:
            await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.device_id.in_(dropped)))
        kept = [grant for grant in batch if grant.job_pk in still_queued]
        if kept:
            first = {job: each[0] for job, each in wanted.items() if job in still_queued}
            # The table, not the entity: a plain executemany with a row per job (the entity would make it
            # an ORM bulk update, which wants each row's primary key by its attribute name).
            jobs = cast(Table, JobRow.__table__)
            await session.execute(
                update(jobs)
                .where(jobs.c.pk == bindparam("job"))
                .values(
                    state=JobState.LEASED,
                    device_id=bindparam("device"),
                    host=bindparam("lease_host"),
                    devices=bindparam("role_devices"),
                ),
                [
                    {
                        "job": job,
                        "device": grant.device_id,
                        "lease_host": grant.host,
                        "role_devices": [
                            {"role": g.role, "device": g.device_id} for g in wanted[job] if g.role is not None
                        ],
                    }
                    for job, grant in first.items()
                ],
            )
            for job, grant in first.items():
                task, repository = named[job]
                moved = JobMoved(job, task, grant.session_id, repository, JobState.QUEUED, JobState.LEASED)
                note(session, moved)
        granted += kept
    return granted


async def grant_host_leases(
    session: AsyncSession, grants: Sequence[HostGrant], now: datetime, ttl: timedelta
) -> list[HostGrant]:
    """Lease room on runner hosts to boardless jobs; the grants that took (a job no longer queued, or
    leased already, gets none). Runs in the caller's transaction, a few statements per thousand grants;
    the leases first, as :func:`grant_leases` does."""
    insert = postgresql_insert if _dialect(session) == "postgresql" else sqlite_insert
    granted: list[HostGrant] = []
    for start in range(0, len(grants), GRANT_BATCH):
        batch = grants[start : start + GRANT_BATCH]
        statement = (
            insert(HostLeaseRow)
            .values(
                [
                    {
                        "job_pk": grant.job_pk,
                        "session_id": grant.session_id,
                        "host": grant.host,
                        "granted_at": now,
                        "expires_at": now + ttl,
                    }
                    for grant in batch
                ]
            )
            .on_conflict_do_nothing()  # a job leased already keeps its lease
            .returning(HostLeaseRow.job_pk)
        )
        inserted = {int(job) for job in (await session.scalars(statement)).all()}
        if not inserted:
            continue
        still_queued = set(
            (
                await session.scalars(
                    select(JobRow.pk).where(JobRow.pk.in_(inserted), JobRow.state == JobState.QUEUED)
                )
            ).all()
        )
        dropped = inserted - still_queued
        if dropped:
            await session.execute(delete(HostLeaseRow).where(HostLeaseRow.job_pk.in_(dropped)))
        kept = [grant for grant in batch if grant.job_pk in still_queued]
        if kept:
            jobs = cast(Table, JobRow.__table__)
            await session.execute(
                update(jobs)
                .where(jobs.c.pk == bindparam("job"))
                .values(state=JobState.LEASED, device_id=None, host=bindparam("lease_host"), devices=[]),
                [{"job": grant.job_pk, "lease_host": grant.host} for grant in kept],
            )
        granted += kept
    return granted


async def leased_devices(session: AsyncSession) -> set[str]:
    """Every device under a lease now."""
    return set((await session.scalars(select(DeviceLeaseRow.device_id))).all())


async def release_lease(session: AsyncSession, device_id: str | None, job_pk: int) -> None:
    """Free a device of a lease its job no longer holds (that job's lease only: another replica may have
    leased the device afresh meanwhile, to a job or a person); ``None``: the job's room on a runner host."""
    if device_id is None:
        await session.execute(delete(HostLeaseRow).where(HostLeaseRow.job_pk == job_pk))
        return
    await session.execute(
        delete(DeviceLeaseRow).where(DeviceLeaseRow.device_id == device_id, DeviceLeaseRow.job_pk == job_pk)
    )


async def release_job_leases(session: AsyncSession, job_pk: int) -> None:
    """Free every device a job holds (it ended, or went back to the queue): one, or each of a gang's; or
    the room on a runner host a boardless job holds."""
    await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.job_pk == job_pk))
    await session.execute(delete(HostLeaseRow).where(HostLeaseRow.job_pk == job_pk))


async def renew_leases(session: AsyncSession, host: str, now: datetime, ttl: timedelta) -> int:
    """A runner host's heartbeat keeps its jobs' leases alive (devices' and boardless jobs' room); how
    many it holds."""
    renewed = await session.execute(
        update(DeviceLeaseRow)
        .where(DeviceLeaseRow.host == host, DeviceLeaseRow.job_pk.is_not(None))  # a reservation keeps its end
        .values(expires_at=now + ttl)
    )
    rooms = await session.execute(
        update(HostLeaseRow).where(HostLeaseRow.host == host).values(expires_at=now + ttl)
    )
    return int(renewed.rowcount) + int(rooms.rowcount)  # type: ignore[attr-defined]


async def extend_all_leases(session: AsyncSession, now: datetime, ttl: timedelta) -> int:
    """Every job's lease runs a full lease time from ``now`` (a server starting up); how many there are.
    A reservation's lease keeps its end: the person's time is not the runner's."""
    extended = await session.execute(
        update(DeviceLeaseRow).where(DeviceLeaseRow.job_pk.is_not(None)).values(expires_at=now + ttl)
    )
    rooms = await session.execute(update(HostLeaseRow).values(expires_at=now + ttl))
    return int(extended.rowcount) + int(rooms.rowcount)  # type: ignore[attr-defined]


async def expired_leases(session: AsyncSession, now: datetime) -> list[tuple[str | None, int]]:
    """(device, job) of jobs' leases whose runner host stopped renewing them (a reservation's lease ends
    with the reservation: :mod:`kerrigan.store.reservations`); (None, job) of a boardless job's room on a
    host."""
    rows = await session.execute(
        select(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk).where(
            DeviceLeaseRow.expires_at < now, DeviceLeaseRow.job_pk.is_not(None)
        )
    )
    lost: list[tuple[str | None, int]] = [
        (device_id, int(job_pk)) for device_id, job_pk in rows if job_pk is not None
    ]
    rooms = await session.scalars(select(HostLeaseRow.job_pk).where(HostLeaseRow.expires_at < now))
    return lost + [(None, int(job_pk)) for job_pk in rooms]
