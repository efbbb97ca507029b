"""What ran, where and when: sessions and jobs read newest first with keyset paging (their retention is
:mod:`kerrigan.store.retention`).

Pages are keyed on ``(created_at, pk)``, newest first, so a page never repeats or skips a row when new ones
arrive, and the database walks an index (``ix_sessions_created_at``, ``ix_jobs_device_id_created_at``)
instead of counting an offset.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from sqlalchemy import ColumnElement, and_, case, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute, aliased

from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState, SessionState
from kerrigan.core.log_streams import LogStream
from kerrigan.store.jobs.output import CUT_SEQ, LOG_ROWS
from kerrigan.store.models import (
    DeviceLeaseRow,
    DeviceRow,
    JobRow,
    PoolRow,
    SessionRow,
)

T = TypeVar("T")

OUTPUT_BATCH = 64
"""Output chunks read per query while a log is streamed."""


@dataclass(frozen=True, slots=True)
class SessionFilters:
    """What a list of sessions is narrowed to; ``None`` leaves a field open."""

    repository: str | None = None
    branch: str | None = None
    workflow: str | None = None
    state: SessionState | None = None
    conclusion: Conclusion | None = None
    device: str | None = None
    since: datetime | None = None
    # The repositories the reader may see (``""``: the lab's own health checks); None: every one.
    readable: frozenset[str] | None = None


@dataclass(frozen=True, slots=True)
class Position:
    """Where a page ended: the last row's ``created_at`` and primary key."""

    created_at: datetime
    pk: int


@dataclass(frozen=True, slots=True)
class JobEntry:
    """One job, one attempt of a task, as history shows it."""

    id: int
    session_id: str
    task_id: str
    state: JobState
    attempt: int
    retry_of: int | None
    failure_class: FailureClass | None
    reason: str | None
    detail: str | None
    device_id: str | None
    host: str | None
    exit_status: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    log_bytes: int
    repository: str = ""
    workflow: str = ""
    boardless: bool = False  # ``board: none``: no device; ``host`` is where it runs


@dataclass(frozen=True, slots=True)
class SessionEntry:
    """One session as history lists it, with the devices its jobs ran on and when they ran."""

    id: str
    repository: str
    branch: str | None
    workflow: str
    head_sha: str
    event: str
    state: SessionState
    conclusion: Conclusion | None
    cancelled_by: str | None
    cancel_reason: str | None
    created_at: datetime
    updated_at: datetime
    pk: int
    devices: tuple[str, ...] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    jobs: tuple[JobEntry, ...] = field(default=())

    @property
    def duration_s(self) -> float | None:
        """From the first job's start to the last one's end, once the session completed."""
        if self.state != SessionState.COMPLETED or self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """Rows of one page, newest first; where the next (older) page starts (``None``: this was the last)
    and, for a page that is not the first, where the previous (newer) one ends."""

    items: tuple[T, ...]
    next: Position | None
    previous: Position | None = None


def _page(
    items: tuple[T, ...], positions: Sequence[Position], *, more: bool, backwards: bool, resumed: bool
) -> Page[T]:
    """The page of ``items`` (newest first) read with one row more than asked for (``more``: it was there),
    forwards from an older cursor or ``backwards`` from a newer one."""
    if not positions:
        return Page(items, None, None)
    older = positions[-1] if (resumed if backwards else more) else None
    newer = positions[0] if (more if backwards else resumed) else None
    return Page(items, older, newer)


def _job_entry(row: JobRow, session_row: SessionRow) -> JobEntry:
    return JobEntry(
        id=row.pk,
        session_id=session_row.id,
        task_id=row.task_id,
        state=row.state,
        attempt=row.attempt,
        retry_of=row.retry_of,
        failure_class=row.failure_class,
        reason=row.reason,
        detail=row.detail,
        device_id=row.device_id,
        host=row.host,
        exit_status=row.exit_status,
        created_at=row.created_at,
        started_at=row.started_at,
        finished_at=row.finished_at,
        log_bytes=row.log_bytes,
        repository=session_row.repository,
        workflow=session_row.workflow,
        boardless=row.boardless,
    )


def _session_entry(row: SessionRow, jobs: Sequence[JobRow], with_jobs: bool = False) -> SessionEntry:
    starts = [job.started_at for job in jobs if job.started_at is not None]
    ends = [job.finished_at for job in jobs if job.finished_at is not None]
    devices = sorted({job.device_id for job in jobs if job.device_id is not None})
    return SessionEntry(
        id=row.id,
        repository=row.repository,
        branch=row.head_branch,
        workflow=row.workflow,
        head_sha=row.head_sha,
        event=row.event,
        state=row.state,
        conclusion=row.conclusion,
        cancelled_by=row.cancelled_by,
        cancel_reason=row.cancel_reason,
        created_at=row.created_at,
        updated_at=row.updated_at,
        pk=row.pk,
        devices=tuple(devices),
        started_at=min(starts) if starts else None,
        finished_at=max(ends) if ends else None,
        jobs=tuple(_job_entry(job, row) for job in jobs) if with_jobs else (),
    )


def _after(
    created_at: InstrumentedAttribute[datetime], pk: InstrumentedAttribute[int], position: Position
) -> ColumnElement[bool]:
    """Rows strictly after ``position`` in newest-first order."""
    return or_(created_at < position.created_at, and_(created_at == position.created_at, pk < position.pk))


def _before(
    created_at: InstrumentedAttribute[datetime], pk: InstrumentedAttribute[int], position: Position
) -> ColumnElement[bool]:
    """Rows strictly before ``position`` in newest-first order."""
    return or_(created_at > position.created_at, and_(created_at == position.created_at, pk > position.pk))


async def list_sessions(
    session: AsyncSession,
    filters: SessionFilters,
    *,
    limit: int,
    after: Position | None = None,
    before: Position | None = None,
) -> Page[SessionEntry]:
    """Sessions matching ``filters``, newest first: the ``limit`` of them just older than ``after``, or
    just newer than ``before`` (the page before a page), or the newest."""
    query = select(SessionRow)
    for column, value in (
        (SessionRow.repository, filters.repository),
        (SessionRow.head_branch, filters.branch),
        (SessionRow.workflow, filters.workflow),
        (SessionRow.state, filters.state),
        (SessionRow.conclusion, filters.conclusion),
    ):
        if value is not None:
            query = query.where(column == value)
    if filters.device is not None:
        # From the device's jobs (ix_jobs_device_id_created_at) to their sessions, not the other way round:
        # a device ran a few hundred jobs, the sessions table holds every session.
        query = query.where(
            SessionRow.pk.in_(select(JobRow.session_pk).where(JobRow.device_id == filters.device))
        )
    if filters.since is not None:
        query = query.where(SessionRow.created_at >= filters.since)
    if filters.readable is not None:
        query = query.where(SessionRow.repository.in_(sorted(filters.readable)))
    if after is not None:
        query = query.where(_after(SessionRow.created_at, SessionRow.pk, after))
    if before is not None:
        query = query.where(_before(SessionRow.created_at, SessionRow.pk, before))
        query = query.order_by(SessionRow.created_at, SessionRow.pk)
    else:
        query = query.order_by(SessionRow.created_at.desc(), SessionRow.pk.desc())
    rows = list((await session.scalars(query.limit(limit + 1))).all())
    more = len(rows) > limit
    rows = rows[:limit]
    if before is not None:
        rows.reverse()
    jobs = await _jobs_of(session, [row.pk for row in rows])
    items = tuple(_session_entry(row, jobs.get(row.pk, ())) for row in rows)
    positions = [Position(row.created_at, row.pk) for row in rows]
    resumed = after is not None or before is not None
    return _page(items, positions, more=more, backwards=before is not None, resumed=resumed)


async def _jobs_of(session: AsyncSession, session_pks: Sequence[int]) -> dict[int, list[JobRow]]:
    if not session_pks:
        return {}
    found: dict[int, list[JobRow]] = {}
    rows = await session.scalars(
        select(JobRow).where(JobRow.session_pk.in_(session_pks)).order_by(JobRow.task_id, JobRow.attempt)
    )
    for job in rows:
        found.setdefault(job.session_pk, []).append(job)
    return found


async def session_detail(session: AsyncSession, session_id: str) -> SessionEntry | None:
    """One session with every job of it, each attempt its own, in task and attempt order."""
    row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
    if row is None:
        return None
    jobs = await _jobs_of(session, [row.pk])
    return _session_entry(row, jobs.get(row.pk, ()), with_jobs=True)


async def job_detail(session: AsyncSession, job_id: int) -> JobEntry | None:
    """One job, or ``None``."""
    found = (
        await session.execute(
            select(JobRow, SessionRow)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
            .where(JobRow.pk == job_id)
        )
    ).first()
    return _job_entry(found[0], found[1]) if found is not None else None


async def device_jobs(
    session: AsyncSession,
    device_id: str,
    *,
    limit: int,
    after: Position | None = None,
    readable: frozenset[str] | None = None,
) -> Page[JobEntry]:
    """The jobs that ran (or were sent to run) on ``device_id``, newest first; only those of the
    ``readable`` repositories when given."""
    query = (
        select(JobRow, SessionRow)
        .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        .where(JobRow.device_id == device_id)
    )
    if readable is not None:
        query = query.where(SessionRow.repository.in_(sorted(readable)))
    if after is not None:
        query = query.where(_after(JobRow.created_at, JobRow.pk, after))
    query = query.order_by(JobRow.created_at.desc(), JobRow.pk.desc()).limit(limit + 1)
    rows = list((await session.execute(query)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    items = tuple(_job_entry(job, owner) for job, owner in rows)
    positions = [Position(job.created_at, job.pk) for job, _ in rows]
    return _page(items, positions, more=more, backwards=False, resumed=after is not None)


async def output_chunks(session: AsyncSession, job_id: int) -> AsyncIterator[str]:
    """A job's stored output in order, a few chunks per query (never the whole log at once); the notice
    that the output was cut, if it was, comes last."""
    async for data, _ in timed_output_chunks(session, job_id):
        yield data


async def timed_output_chunks(
    session: AsyncSession, job_id: int, stream: LogStream = LogStream.OUTPUT
) -> AsyncIterator[tuple[str, datetime | None]]:
    """:func:`output_chunks` (or the console's, by ``stream``), each with when it reached the server (None:
    stored before that was kept)."""
    log = LOG_ROWS[stream]
    after = -1
    while True:
        batch = list(
            (
                await session.execute(
                    select(log.seq, log.data, log.received_at)
                    .where(log.job_pk == job_id, log.seq > after)
                    .order_by(log.seq)
                    .limit(OUTPUT_BATCH)
                )
            ).all()
        )
        for _, data, received_at in batch:
            yield str(data), received_at
        if len(batch) < OUTPUT_BATCH:
            break
        after = int(batch[-1][0])
    notice = (
        await session.execute(
            select(log.data, log.received_at).where(log.job_pk == job_id, log.seq == CUT_SEQ)
        )
    ).first()
    if notice is not None:
        yield str(notice[0]), notice[1]


@dataclass(frozen=True, slots=True)
class DeviceSummary:
    """A device as ``/devices`` lists it: its state, the job it runs now, its last ended job and how
    many of its ended jobs of the window succeeded."""

    id: str
    pool_id: str
    host: str
    state: DeviceState
    state_reason: str
    current: JobEntry | None
    last: JobEntry | None
    passed: int
    ended: int

    @property
    def pass_rate(self) -> float | None:
        """Succeeded over ended jobs (a retried attempt counts as failed, a cancelled one not at all),
        ``None`` without any."""
        return self.passed / self.ended if self.ended else None


# A retried attempt failed on its device (the retry ran elsewhere): it counts against that device.
_ENDED_COUNTED = (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.RETRIED)


async def device_summaries(session: AsyncSession, since: datetime) -> list[DeviceSummary]:
    """Every device, by id, with its current job (the one holding its lease), its last ended job and its
    pass rate over the jobs created since ``since`` that have ended."""
    devices = (
        await session.execute(
            select(DeviceRow, PoolRow.id)
            .join(PoolRow, PoolRow.pk == DeviceRow.pool_pk)
            .order_by(DeviceRow.id)
        )
    ).all()
    current: dict[str, JobEntry] = {}
    for job, owner, device_id in (
        await session.execute(
            select(JobRow, SessionRow, DeviceLeaseRow.device_id)
            .join(DeviceLeaseRow, DeviceLeaseRow.job_pk == JobRow.pk)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        )
    ).all():
        current[device_id] = _job_entry(job, owner)
    counts: dict[str, tuple[int, int]] = {}
    tallies = await session.execute(
        select(
            JobRow.device_id, func.count(), func.sum(case((JobRow.state == JobState.SUCCEEDED, 1), else_=0))
        )
        # By device and creation time, so each device's window is a range of ix_jobs_device_id_created_at
        # rather than a scan of every job ever run.
        .where(
            JobRow.device_id.in_(select(DeviceRow.id)),
            JobRow.created_at >= since,
            JobRow.state.in_(_ENDED_COUNTED),
        )
        .group_by(JobRow.device_id)
    )
    for counted_device, ended, passed in tallies:
        counts[str(counted_device)] = (int(passed or 0), int(ended))
    # Each device's last finished job in one statement: a walk back along ix_jobs_device_id_created_at per
    # device inside the database, not one round trip per device.
    inner = aliased(JobRow)
    last_pk = (
        select(inner.pk)
        .where(inner.device_id == DeviceRow.id, inner.finished_at.is_not(None))
        .order_by(inner.created_at.desc(), inner.pk.desc())
        .limit(1)
        .correlate(DeviceRow)
        .scalar_subquery()
    )
    last: dict[str, JobEntry] = {}
    for device_id, job, owner in (
        await session.execute(
            select(DeviceRow.id, JobRow, SessionRow)
            .select_from(DeviceRow)
            .join(JobRow, JobRow.pk == last_pk)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        )
    ).all():
        last[str(device_id)] = _job_entry(job, owner)
    summaries = []
    for device, pool_id in devices:
        passed, ended = counts.get(device.id, (0, 0))
        summaries.append(
            DeviceSummary(
                id=device.id,
                pool_id=str(pool_id),
                host=device.host,
                state=device.state,
                state_reason=device.state_reason,
                current=current.get(device.id),
                last=last.get(device.id),
                passed=passed,
                ended=ended,
            )
        )
    return summaries
