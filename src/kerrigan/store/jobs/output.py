"""A job's output log: chunks a runner sends, stored in order, and read back whole or as a tail.

Output arrives in numbered chunks; a chunk seen before is acknowledged again, and a gap is reported with the
number expected so the runner re-sends from there.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, cut_notice, fitting
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobLogRow

CUT_SEQ: Final = -1  # the chunk number of the server's notice that a job's output was cut


class LogGapError(Exception):
    """A chunk came before the ones it follows; ``expected_seq`` is where the runner should resume."""

    def __init__(self, expected_seq: int) -> None:
        super().__init__(f"chunk out of order: expected seq {expected_seq}")
        self.expected_seq = expected_seq


@dataclass(frozen=True, slots=True)
class Appended:
    """What storing a chunk left: the next chunk number expected, and whether the job's output was cut
    (the server stores no more of it: the runner may stop sending)."""

    next_seq: int
    cut: bool = False


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
    """Store a chunk of output, arrived ``at``; the next sequence number expected. A repeat is acknowledged
    again (its first arrival time stays).

    A runner that no longer has the chunks the server expects (it evicted them after 24 hours) says so
    with ``truncated_before_seq`` equal to ``seq``: the gap is recorded as a visible notice, never skipped
    silently. Output past ``max_bytes`` (counted in the runner's byte offsets) is not stored: the part of
    the chunk that fits is, then the cut notice, at seq ``CUT_SEQ`` (no runner chunk has a negative number,
    so the notice cannot be forged by output). Later chunks are acknowledged in order and dropped.
    """
    job = await owned_job(session, job_id, host)
    cut_at = await _cut_at(session, job.pk)
    if seq < job.next_seq:
        return Appended(job.next_seq, cut_at is not None)
    if (
        truncated_before_seq is not None
        and truncated_before_seq == seq
        and seq > job.next_seq
        and byte_offset >= job.log_bytes  # a jump over evicted chunks goes forwards only
    ):
        if cut_at is None:
            notice = f"[output chunks {job.next_seq}..{seq - 1} were evicted on the runner before upload]\n"
            session.add(
                JobLogRow(
                    job_pk=job.pk, seq=job.next_seq, byte_offset=job.log_bytes, data=notice, received_at=at
                )
            )
        job.next_seq, job.log_bytes = seq, byte_offset
    if seq > job.next_seq or byte_offset != job.log_bytes:
        raise LogGapError(job.next_seq)
    size = len(data.encode())
    cut = cut_at is not None
    if not cut and job.log_bytes + size > max_bytes:
        kept = fitting(data, max_bytes - job.log_bytes)
        if kept:
            session.add(JobLogRow(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=kept, received_at=at))
        before = kept or await session.scalar(
            select(JobLogRow.data)
            .where(JobLogRow.job_pk == job.pk, JobLogRow.seq >= 0)
            .order_by(JobLogRow.seq.desc())
            .limit(1)
        )
        notice = cut_notice(max_bytes)
        if before and not before.endswith("\n"):  # the notice is a line of its own
            notice = "\n" + notice
        where = byte_offset + len(kept.encode())
        session.add(JobLogRow(job_pk=job.pk, seq=CUT_SEQ, byte_offset=where, data=notice, received_at=at))
        cut = True
    elif not cut:
        session.add(JobLogRow(job_pk=job.pk, seq=seq, byte_offset=byte_offset, data=data, received_at=at))
    job.next_seq += 1
    job.log_bytes += size
    return Appended(job.next_seq, cut)


async def _cut_at(session: AsyncSession, job_pk: int) -> int | None:
    """Where the job's output was cut (the bytes stored before the cut notice), or None."""
    found = await session.scalar(
        select(JobLogRow.byte_offset).where(JobLogRow.job_pk == job_pk, JobLogRow.seq == CUT_SEQ)
    )
    return int(found) if found is not None else None


async def output(session: AsyncSession, job_id: int, after_seq: int = -1) -> list[tuple[int, str]]:
    """A job's output chunks after ``after_seq``, in order."""
    rows = await session.execute(
        select(JobLogRow.seq, JobLogRow.data)
        .where(JobLogRow.job_pk == job_id, JobLogRow.seq > after_seq)
        .order_by(JobLogRow.seq)
    )
    return [(int(seq), str(data)) for seq, data in rows]


async def output_tail(session: AsyncSession, job_pk: int, chunks: int = 20) -> str:
    """The last chunks of a job's output, joined; the cut notice last when its output was cut."""
    rows = await session.execute(
        select(JobLogRow.data)
        .where(JobLogRow.job_pk == job_pk, JobLogRow.seq >= 0)
        .order_by(JobLogRow.seq.desc())
        .limit(chunks)
    )
    tail = "".join(reversed([str(data) for (data,) in rows]))
    notice = await session.scalar(
        select(JobLogRow.data).where(JobLogRow.job_pk == job_pk, JobLogRow.seq == CUT_SEQ)
    )
    return tail + str(notice) if notice is not None else tail


async def output_tails(session: AsyncSession, job_pks: Collection[int], chunks: int = 20) -> dict[int, str]:
    """:func:`output_tail` of each of the jobs, in one query (a check run shows every job's); a job with
    no output is missing from the answer."""
    if not job_pks:
        return {}
    newest = (
        func.row_number().over(partition_by=JobLogRow.job_pk, order_by=JobLogRow.seq.desc()).label("newest")
    )
    ranked = (
        select(JobLogRow.job_pk, JobLogRow.seq, JobLogRow.data, newest)
        .where(JobLogRow.job_pk.in_(job_pks), JobLogRow.seq >= 0)
        .subquery()
    )
    rows = await session.execute(
        select(ranked.c.job_pk, ranked.c.seq, ranked.c.data)
        .where(ranked.c.newest <= chunks)
        .union_all(
            select(JobLogRow.job_pk, JobLogRow.seq, JobLogRow.data).where(
                JobLogRow.job_pk.in_(job_pks), JobLogRow.seq == CUT_SEQ
            )
        )
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
