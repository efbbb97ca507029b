"""Retention: sessions past ``KERRIGAN_HISTORY_DAYS`` go with their jobs, and job output (with the jobs'
consoles and the files they uploaded) past ``KERRIGAN_OUTPUT_DAYS``, in small batches that never hold a
long lock."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, exists, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import SessionState
from kerrigan.store.models import (
    DeviceLeaseRow,
    HostLeaseRow,
    JobArtifactChunkRow,
    JobArtifactRow,
    JobConsoleRow,
    JobLogRow,
    JobResultRow,
    JobRow,
    SessionRow,
)


@dataclass(frozen=True, slots=True)
class Pruned:
    """What one retention pass deleted."""

    sessions: int = 0
    output_jobs: int = 0


async def prune_history(
    session: AsyncSession,
    *,
    sessions_before: datetime | None,
    output_before: datetime | None,
    batch: int = 500,
) -> Pruned:
    """One batch of retention, for the caller to commit: up to ``batch`` completed sessions created before
    ``sessions_before`` go with their jobs and output, and the output of up to ``batch`` jobs that ended
    before ``output_before`` (the jobs stay). ``None`` keeps that kind forever. A session still running is
    kept however old it is. Old sessions go first, then old output. Call again until nothing is deleted:
    small batches never hold a long lock."""
    sessions_deleted = output_jobs = 0
    if sessions_before is not None:
        pks = list(
            (
                await session.scalars(
                    select(SessionRow.pk)
                    .where(
                        SessionRow.created_at < sessions_before, SessionRow.state == SessionState.COMPLETED
                    )
                    .order_by(SessionRow.created_at)
                    .limit(batch)
                )
            ).all()
        )
        if pks:
            job_pks = select(JobRow.pk).where(JobRow.session_pk.in_(pks))
            # Children first and explicitly: each statement stays small and none relies on a cascade.
            await session.execute(delete(JobLogRow).where(JobLogRow.job_pk.in_(job_pks)))
            await session.execute(delete(JobConsoleRow).where(JobConsoleRow.job_pk.in_(job_pks)))
            await _delete_files(session, job_pks)
            await session.execute(delete(JobResultRow).where(JobResultRow.job_pk.in_(job_pks)))
            await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.job_pk.in_(job_pks)))
            await session.execute(delete(HostLeaseRow).where(HostLeaseRow.job_pk.in_(job_pks)))
            await session.execute(update(JobRow).where(JobRow.retry_of.in_(job_pks)).values(retry_of=None))
            await session.execute(delete(JobRow).where(JobRow.session_pk.in_(pks)))
            await session.execute(delete(SessionRow).where(SessionRow.pk.in_(pks)))
            sessions_deleted = len(pks)
    if output_before is not None and not sessions_deleted:  # old sessions first: their output goes with them
        jobs = list(
            (
                await session.scalars(
                    select(JobRow.pk)
                    .where(
                        JobRow.finished_at < output_before,
                        or_(
                            exists().where(JobLogRow.job_pk == JobRow.pk),
                            exists().where(JobConsoleRow.job_pk == JobRow.pk),
                            exists().where(JobArtifactRow.job_pk == JobRow.pk),
                        ),
                    )
                    .limit(batch)
                )
            ).all()
        )
        if jobs:
            await session.execute(delete(JobLogRow).where(JobLogRow.job_pk.in_(jobs)))
            await session.execute(delete(JobConsoleRow).where(JobConsoleRow.job_pk.in_(jobs)))  # kept alike
            await _delete_files(session, jobs)  # the files it uploaded are kept as long as its output
            output_jobs = len(jobs)
    return Pruned(sessions_deleted, output_jobs)


async def _delete_files(session: AsyncSession, job_pks: Any) -> None:
    """The uploaded files of the jobs (``job_pks``: their keys, or a query of them), chunks first."""
    files = select(JobArtifactRow.pk).where(JobArtifactRow.job_pk.in_(job_pks))
    await session.execute(delete(JobArtifactChunkRow).where(JobArtifactChunkRow.artifact_pk.in_(files)))
    await session.execute(delete(JobArtifactRow).where(JobArtifactRow.job_pk.in_(job_pks)))
