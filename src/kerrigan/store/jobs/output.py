"""A job's logs: its output, and its board's console (:class:`kerrigan.core.log_streams.LogStream`), each in
chunks a runner sends, stored in order, and read back whole or as a tail.

Each log arrives in numbered chunks of its own (the console's numbered from 0 apart from the output's); a
chunk seen before is acknowledged again, and a gap is reported with the number expected so the runner
re-sends from there. Both are capped alike and kept alike; only their tables differ.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.log_streams import LogStream
from kerrigan.core.masking import Masker
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, cut_notice, fitting
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobConsoleRow, JobLogRow, JobRow

CUT_SEQ: Final = -1  # the chunk number of the server's notice that a job's log was cut

LogRow = type[JobLogRow] | type[JobConsoleRow]
LOG_ROWS: Final[Mapping[LogStream, LogRow]] = {
    LogStream.OUTPUT: JobLogRow,
    LogStream.CONSOLE: JobConsoleRow,
}


class LogGapError(Exception):
    """A chunk came before the ones it follows; ``expected_seq`` is where the runner should resume."""

    def __init__(self, expected_seq: int) -> None:
        super().__init__(f"chunk out of order: expected seq {expected_seq}")
        self.expected_seq = expected_seq


@dataclass(frozen=True, slots=True)
class Appended:
    """What storing a chunk left: the next chunk number expected, and whether the job's log was cut
    (the server stores no more of it: the runner may stop sending)."""

    next_seq: int
    cut: bool = False


def _position(job: JobRow, stream: LogStream) -> tuple[int, int]:
    """The next chunk number expected of the job's log, and the bytes the runner sent of it so far."""
    if stream is LogStream.CONSOLE:
        return job.console_next_seq, job.console_bytes
    return job.next_seq, job.log_bytes


def _move(job: JobRow, stream: LogStream, next_seq: int, sent: int) -> None:
    if stream is LogStream.CONSOLE:
        job.console_next_seq, job.console_bytes = next_seq, sent
    else:
        job.next_seq, job.log_bytes = next_seq, sent


async def append_output(
    session: AsyncSession,
    job_id: str,
    host: str,
    *,
    seq: int,
    byte_offset: int,
    data: str,
    truncated_before_seq: int | None = None,
    max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES,
    at: datetime | None = None,
) -> Appended:
    """:func:`append_log` of the job's output (its host masked it)."""
    return await append_log(
        session,
        job_id,
        host,
        LogStream.OUTPUT,
        seq=seq,
        byte_offset=byte_offset,
        data=data,
        truncated_before_seq=truncated_before_seq,
        max_bytes=max_bytes,
        at=at,
    )


async def append_log(
    session: AsyncSession,
    job_id: str,
    host: str,
    stream: LogStream,
    *,
    seq: int,
    byte_offset: int,
    data: str,
    truncated_before_seq: int | None = None,
    max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES,
    at: datetime | None = None,
    masker: Masker | None = None,
    sent_bytes: int | None = None,
) -> Appended:
    """Store a chunk of the job's ``stream``, arrived ``at``; the next sequence number expected. A repeat is
    acknowledged again (its first arrival time stays).

    A runner that no longer has the chunks the server expects (it evicted them after 24 hours) says so
    with ``truncated_before_seq`` equal to ``seq``: the gap is recorded as a visible notice, never skipped
    silently. The log past ``max_bytes`` (counted in the runner's byte offsets) is not stored: the part of
    the chunk that fits is, then the cut notice, at seq ``CUT_SEQ`` (no runner chunk has a negative number,
    so the notice cannot be forged by a log). Later chunks are acknowledged in order and dropped.
    ``masker`` hides the job's secrets in the chunk before any of it is stored (offsets stay the runner's);
    ``sent_bytes`` is how long the runner's chunk was when ``data`` stands in for it (default: ``data``'s).
    """
    rows = LOG_ROWS[stream]
    job = await owned_job(session, job_id, host)
    cut_at = await _cut_at(session, rows, job.pk)
    next_seq, sent = _position(job, stream)
    if seq < next_seq:
        return Appended(next_seq, cut_at is not None)
    if (
        truncated_before_seq is not None
        and truncated_before_seq == seq
        and seq > next_seq
        and byte_offset >= sent  # a jump over evicted chunks goes forwards only
    ):
        if cut_at is None:
            notice = (
                f"[{stream.value} chunks {next_seq}..{seq - 1} were evicted on the runner before upload]\n"
            )
            session.add(rows(job_pk=job.pk, seq=next_seq, byte_offset=sent, data=notice, received_at=at))
        next_seq, sent = seq, byte_offset
        _move(job, stream, next_seq, sent)
    if seq > next_seq or byte_offset != sent:
        raise LogGapError(next_seq)
    size = len(data.encode()) if sent_bytes is None else sent_bytes
    if masker is not None:
        data = masker.mask_all(data.encode()).decode(errors="replace")
    cut = cut_at is not None
    if not cut and sent + size > max_bytes:
        kept = fitting(data, max_bytes - sent)
        if kept:
            session.add(rows(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=kept, received_at=at))
        before = kept or await session.scalar(
            select(rows.data).where(rows.job_pk == job.pk, rows.seq >= 0).order_by(rows.seq.desc()).limit(1)
        )
        notice = cut_notice(max_bytes, stream)
        if before and not before.endswith("\n"):  # the notice is a line of its own
            notice = "\n" + notice
        where = byte_offset + len(kept.encode())
        session.add(rows(job_pk=job.pk, seq=CUT_SEQ, byte_offset=where, data=notice, received_at=at))
        cut = True
    elif not cut:
        session.add(rows(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=data, received_at=at))
    _move(job, stream, next_seq + 1, sent + size)
    return Appended(next_seq + 1, cut)


async def _cut_at(session: AsyncSession, rows: LogRow, job_pk: int) -> int | None:
    """Where the job's log was cut (the bytes stored before the cut notice), or None."""
    found = await session.scalar(select(rows.byte_offset).where(rows.job_pk == job_pk, rows.seq == CUT_SEQ))
    return int(found) if found is not None else None


async def output(session: AsyncSession, job_id: int, after_seq: int = -1) -> list[tuple[int, str]]:
    """A job's output chunks after ``after_seq``, in order."""
    rows = await session.execute(
        select(JobLogRow.seq, JobLogRow.data)
        .where(JobLogRow.job_pk == job_id, JobLogRow.seq > after_seq)
        .order_by(JobLogRow.seq)
    )
    return [(int(seq), str(data)) for seq, data in rows]


async def output_tail(
    session: AsyncSession, job_pk: int, chunks: int = 20, stream: LogStream = LogStream.OUTPUT
) -> str:
    """The last chunks of a job's output (or console), joined; the cut notice last when it was cut."""
    log = LOG_ROWS[stream]
    rows = await session.execute(
        select(log.data).where(log.job_pk == job_pk, log.seq >= 0).order_by(log.seq.desc()).limit(chunks)
    )
    tail = "".join(reversed([str(data) for (data,) in rows]))
    notice = await session.scalar(select(log.data).where(log.job_pk == job_pk, log.seq == CUT_SEQ))
    return tail + str(notice) if notice is not None else tail


async def output_tails(
    session: AsyncSession,
    job_pks: Collection[int],
    chunks: int = 20,
    stream: LogStream = LogStream.OUTPUT,
) -> dict[int, str]:
    """:func:`output_tail` of each of the jobs, in one query (a check run shows every job's); a job with
    nothing of that log is missing from the answer."""
    if not job_pks:
        return {}
    log = LOG_ROWS[stream]
    newest = func.row_number().over(partition_by=log.job_pk, order_by=log.seq.desc()).label("newest")
    ranked = (
        select(log.job_pk, log.seq, log.data, newest).where(log.job_pk.in_(job_pks), log.seq >= 0).subquery()
    )
    rows = await session.execute(
        select(ranked.c.job_pk, ranked.c.seq, ranked.c.data)
        .where(ranked.c.newest <= chunks)
        .union_all(select(log.job_pk, log.seq, log.data).where(log.job_pk.in_(job_pks), log.seq == CUT_SEQ))
    )
    kept: dict[int, list[tuple[int, str]]] = {}
    notices: dict[int, str] = {}
    for job_pk, seq, data in rows:
        if seq == CUT_SEQ:
            notices[job_pk] = str(data)
        else:
            kept.setdefault(job_pk, []).append((seq, str(data)))
    return {
        job_pk: "".join(data for _, data in sorted(kept.get(job_pk, []))) + notices.get(job_pk, "")
        for job_pk in kept.keys() | notices.keys()
    }
