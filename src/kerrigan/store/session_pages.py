"""Reads for the session and explain pages: a session's jobs with all the page shows of them, the tail of a
job's output and one page of it, the facts of the devices a resolution names, and the repositories Kerrigan
knows.

Output is read in bounded pieces whatever a job printed: a page is a few chunks (each at most
``kerrigan.core.runner_fields.MAX_CHUNK_BYTES``), a tail a few kilobytes. The server's cut notice (chunk
``jobs.CUT_SEQ``) is not output: it is read apart and shown as the mark it is."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import JobState
from kerrigan.core.log_streams import LogStream
from kerrigan.core.sessions import Conclusion, SessionState
from kerrigan.store.jobs.output import CUT_SEQ, LOG_ROWS
from kerrigan.store.jobs.records import roles_of
from kerrigan.store.models import (
    DeviceRow,
    InstallationRow,
    JobConsoleRow,
    JobLogRow,
    JobRow,
    PoolRow,
    RepositoryRow,
    SessionRow,
)

# The notice ``jobs.append_output`` stores in place of chunks a runner evicted before uploading them.
_EVICTED_NOTICE: Final = re.compile(
    r"\[output chunks \d+\.\.\d+ were evicted on the runner before upload\]\n"
)
_IN_CLAUSE: Final = 500  # ids per IN (...): far below SQLite's and asyncpg's bound-parameter limits


@dataclass(frozen=True, slots=True)
class JobDetails:
    """A job as the session page shows it."""

    pk: int
    task_id: str
    state: JobState
    device_id: str | None
    host: str | None
    cpus: str | None
    vcpus: int
    command: str | None
    timeout_s: int | None
    exit_status: int | None
    reason: str | None
    detail: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    accounting: Mapping[str, Any] | None
    queue_wait_s: float
    cancel_requested: bool
    withdraw_requested: bool
    chunks: int  # output chunks stored
    output_bytes: int = 0  # bytes of output the runner host sent
    output_cut: str | None = None  # the server's cut notice, when it stored no more of the output
    attempt: int = 1
    retry_of: int | None = None  # the job this attempt retries
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device); device_id is the first role's
    boardless: bool = False  # ``board: none``: no device; ``host`` is where it runs
    console_chunks: int = 0  # chunks of its board's console stored
    console_bytes: int = 0  # bytes of console the runner host sent
    console_cut: str | None = None  # the server's cut notice of its console

    @property
    def ran_on(self) -> str | None:
        """Where it runs: its device, or its runner host for a job that holds no device."""
        return self.host if self.boardless else self.device_id


async def session_jobs(session: AsyncSession, session_id: str) -> list[JobDetails]:
    """Every job of a session, in task order, with how many output chunks each has."""
    rows = (
        await session.scalars(
            select(JobRow)
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            .where(SessionRow.id == session_id)
            .order_by(JobRow.pk)
        )
    ).all()
    counts: dict[int, int] = {}
    cuts: dict[int, str] = {}
    console_chunks: dict[int, int] = {}
    console_cuts: dict[int, str] = {}
    if rows:
        counted = await session.execute(
            select(JobLogRow.job_pk, func.count())
            .where(JobLogRow.job_pk.in_([row.pk for row in rows]), JobLogRow.seq >= 0)
            .group_by(JobLogRow.job_pk)
        )
        counts = {int(pk): int(count) for pk, count in counted}
        notices = await session.execute(
            select(JobLogRow.job_pk, JobLogRow.data).where(
                JobLogRow.job_pk.in_([row.pk for row in rows]), JobLogRow.seq == CUT_SEQ
            )
        )
        cuts = {int(pk): str(data) for pk, data in notices}
        consoles = await session.execute(
            select(JobConsoleRow.job_pk, func.count())
            .where(JobConsoleRow.job_pk.in_([row.pk for row in rows]), JobConsoleRow.seq >= 0)
            .group_by(JobConsoleRow.job_pk)
        )
        console_chunks = {int(pk): int(count) for pk, count in consoles}
        console_notices = await session.execute(
            select(JobConsoleRow.job_pk, JobConsoleRow.data).where(
                JobConsoleRow.job_pk.in_([row.pk for row in rows]), JobConsoleRow.seq == CUT_SEQ
            )
        )
        console_cuts = {int(pk): str(data) for pk, data in console_notices}
    return [
        JobDetails(
            pk=row.pk,
            task_id=row.task_id,
            state=row.state,
            device_id=row.device_id,
            host=row.host,
            cpus=row.cpus,
            vcpus=row.vcpus,
            command=row.command,
            timeout_s=row.timeout_s,
            exit_status=row.exit_status,
            reason=row.reason,
            detail=row.detail,
            created_at=row.created_at,
            started_at=row.started_at,
            finished_at=row.finished_at,
            accounting=dict(row.accounting) if isinstance(row.accounting, dict) else None,
            queue_wait_s=row.queue_wait_s,
            cancel_requested=row.cancel_requested_at is not None,
            withdraw_requested=row.withdraw_requested_at is not None,
            chunks=counts.get(row.pk, 0),
            output_bytes=row.log_bytes,
            output_cut=cuts.get(row.pk),
            attempt=row.attempt,
            retry_of=row.retry_of,
            roles=roles_of(row.devices),
            boardless=row.boardless,
            console_chunks=console_chunks.get(row.pk, 0),
            console_bytes=row.console_bytes,
            console_cut=console_cuts.get(row.pk),
        )
        for row in rows
    ]


@dataclass(frozen=True, slots=True)
class OutputChunk:
    """One stored chunk; ``evicted`` marks the server's notice that the chunks before it were lost."""

    seq: int
    data: str
    evicted: bool = False


@dataclass(frozen=True, slots=True)
class OutputPage:
    """Page ``page`` of ``pages`` (1 is the oldest) of a job's output, ``per_page`` chunks a page."""

    job_pk: int
    page: int
    pages: int
    per_page: int
    total_chunks: int
    chunks: tuple[OutputChunk, ...]


def page_count(total_chunks: int, per_page: int) -> int:
    """How many pages ``total_chunks`` fill (at least one, an empty one, when there is no output)."""
    return max(1, -(-total_chunks // per_page))


async def output_page(
    session: AsyncSession, job_pk: int, total_chunks: int, page: int | None, per_page: int
) -> OutputPage:
    """One page of a job's output, by chunk position; the newest page when ``page`` is None or past the end.

    The server's eviction notice is told apart from output that happens to read the same: it is followed
    by a jump in the chunk numbers (the chunks it stands for were never stored).
    """
    pages = page_count(total_chunks, per_page)
    chosen = pages if page is None else min(max(page, 1), pages)
    rows = (
        await session.execute(
            select(JobLogRow.seq, JobLogRow.data)
            .where(JobLogRow.job_pk == job_pk, JobLogRow.seq >= 0)
            .order_by(JobLogRow.seq)
            .offset((chosen - 1) * per_page)
            .limit(per_page + 1)  # the next page's first chunk tells whether the last one here is a notice
        )
    ).all()
    chunks = _chunks(
        [(int(seq), str(data)) for seq, data in rows[:per_page]],
        rows[per_page][0] if len(rows) > per_page else None,
    )
    return OutputPage(job_pk, chosen, pages, per_page, total_chunks, tuple(chunks))


def _chunks(rows: list[tuple[int, str]], after: int | None) -> list[OutputChunk]:
    """Chunks in order, the server's eviction notices told apart from output that reads the same: a notice
    is followed by a jump in the chunk numbers (the chunks it stands for were never stored)."""
    chunks = []
    for index, (seq, data) in enumerate(rows):
        following = rows[index + 1][0] if index + 1 < len(rows) else after
        evicted = (
            following is not None and following > seq + 1 and _EVICTED_NOTICE.fullmatch(data) is not None
        )
        chunks.append(OutputChunk(seq, data, evicted))
    return chunks


@dataclass(frozen=True, slots=True)
class OutputTail:
    """The end of a job's output, at most ``limit`` bytes of it; ``earlier`` when more came before."""

    chunks: tuple[OutputChunk, ...]
    earlier: bool


_TAIL_BATCH: Final = 8
_TAIL_BATCHES: Final = 32  # a flood of tiny chunks shows less of the tail, not a scan of them all


async def output_tail(
    session: AsyncSession, job_pk: int, total_chunks: int, limit: int, stream: LogStream = LogStream.OUTPUT
) -> OutputTail:
    """The last ``limit`` bytes of a job's output (or console) at most, starting on a line where one starts
    in them."""
    log = LOG_ROWS[stream]
    newest_first: list[tuple[int, str]] = []
    size, before = 0, None
    for _ in range(_TAIL_BATCHES):
        query = select(log.seq, log.data).where(log.job_pk == job_pk, log.seq >= 0)
        if before is not None:
            query = query.where(log.seq < before)
        batch = (await session.execute(query.order_by(log.seq.desc()).limit(_TAIL_BATCH))).all()
        for seq, data in batch:
            if size >= limit:
                break
            newest_first.append((int(seq), str(data)))
            size += len(str(data).encode())
        if size >= limit or len(batch) < _TAIL_BATCH:
            break
        before = int(batch[-1][0])
    rows = newest_first[::-1]
    trimmed = size > limit
    if trimmed:  # keep the end of the oldest chunk read, from the start of a line where there is one
        seq, data = rows[0]
        encoded = data.encode()
        kept = encoded[size - limit :].decode("utf-8", "ignore")
        line = kept.find("\n")
        rows[0] = (seq, kept[line + 1 :] if 0 <= line < len(kept) - 1 else kept)
    return OutputTail(tuple(_chunks(rows, None)), trimmed or len(rows) < total_chunks)


@dataclass(frozen=True, slots=True)
class OutputSince:
    """The chunks stored after a given one (at most a batch), and whether the job had ended before they
    were read: then nothing later will come but the cut notice, ``cut`` when there is one."""

    chunks: tuple[OutputChunk, ...]
    ended: bool
    state: str  # the job's JobState; "" when the job is gone
    cut: str | None


async def session_repository(session: AsyncSession, session_id: str) -> str | None:
    """The repository of session ``session_id`` (``""`` for the lab's own), or None when there is none."""
    found = await session.scalar(select(SessionRow.repository).where(SessionRow.id == session_id))
    return str(found) if found is not None else None


async def session_job_pk(session: AsyncSession, session_id: str, job_pk: int) -> int | None:
    """``job_pk`` when it is a job of that session, else None."""
    found = await session.scalar(
        select(JobRow.pk)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(SessionRow.id == session_id, JobRow.pk == job_pk)
    )
    return int(found) if found is not None else None


async def output_since(
    session: AsyncSession, job_pk: int, after: int, limit: int, stream: LogStream = LogStream.OUTPUT
) -> OutputSince:
    """The job's chunks (of its output, or its console) numbered above ``after``, at most ``limit`` of them,
    oldest first.

    The job's end is read first: a chunk stored just before it ended is then in this read or the next,
    so a reader that stops once ``ended`` comes with no chunks has missed none."""
    job = (
        await session.execute(select(JobRow.state, JobRow.finished_at).where(JobRow.pk == job_pk))
    ).one_or_none()
    ended = job is None or job[1] is not None
    log = LOG_ROWS[stream]
    rows = (
        await session.execute(
            select(log.seq, log.data)
            .where(log.job_pk == job_pk, log.seq > after)
            .order_by(log.seq)
            .limit(limit + 1)  # the next chunk tells whether the last one here is an eviction notice
        )
    ).all()
    chunks = _chunks(
        [(int(seq), str(data)) for seq, data in rows[:limit]],
        int(rows[limit][0]) if len(rows) > limit else None,
    )
    cut = None
    if ended and len(rows) <= limit:
        notice = await session.scalar(select(log.data).where(log.job_pk == job_pk, log.seq == CUT_SEQ))
        cut = str(notice) if notice is not None else None
    return OutputSince(tuple(chunks), ended, str(job[0]) if job else "", cut)


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """Where a device is: its pool, runner host and board, and its state now."""

    id: str
    pool: str
    host: str
    board: str
    state: DeviceState


async def device_facts(session: AsyncSession, device_ids: Iterable[str]) -> dict[str, DeviceFacts]:
    """The facts of the named devices that still exist."""
    ids = sorted(set(device_ids))
    found: dict[str, DeviceFacts] = {}
    for start in range(0, len(ids), _IN_CLAUSE):
        rows = await session.execute(
            select(DeviceRow.id, PoolRow.id, DeviceRow.host, DeviceRow.board, DeviceRow.state)
            .join(PoolRow, DeviceRow.pool_pk == PoolRow.pk)
            .where(DeviceRow.id.in_(ids[start : start + _IN_CLAUSE]))
        )
        for device_id, pool_id, host, board, state in rows:
            found[device_id] = DeviceFacts(device_id, pool_id, host, board, state)
    return found


async def known_repositories(session: AsyncSession) -> list[str]:
    """Repositories an installation covers, and those sessions ran for, by name."""
    covered = await session.scalars(
        select(RepositoryRow.full_name).join(
            InstallationRow, RepositoryRow.installation_pk == InstallationRow.pk
        )
    )
    ran = await session.scalars(select(SessionRow.repository).where(SessionRow.repository != "").distinct())
    return sorted(set(covered.all()) | set(ran.all()), key=str.lower)


@dataclass(frozen=True, slots=True)
class SessionBrief:
    """A session in one line."""

    id: str
    head_sha: str
    state: SessionState
    conclusion: Conclusion | None
    created_at: datetime


async def latest_session(session: AsyncSession, repository: str, workflow: str) -> SessionBrief | None:
    """The newest session of ``workflow`` in ``repository``."""
    row = await session.scalar(
        select(SessionRow)
        .where(SessionRow.repository == repository, SessionRow.workflow == workflow)
        .order_by(SessionRow.pk.desc())
        .limit(1)
    )
    if row is None:
        return None
    return SessionBrief(
        row.id,
        row.head_sha,
        row.state,
        row.conclusion,
        row.created_at,
    )
