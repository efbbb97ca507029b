"""Files a job's runner uploaded (``artifacts.upload``), kept in the database in chunks with the job, so
every server replica serves them and retention (``KERRIGAN_OUTPUT_DAYS``) deletes them with its output.

An upload is begun, its chunks are written each in a short transaction of its own (a big file never holds a
long write), and it is finished with its size and digest; only finished files, and the notes of files that
were not kept (over a limit), are listed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.database import Database
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobArtifactChunkRow, JobArtifactRow


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    """A job's uploaded file as pages list it: its size, or the note saying why it was not kept."""

    pk: int
    job_pk: int
    path: str
    size: int | None
    note: str | None = None


async def begin_upload(session: AsyncSession, job_id: str, host: str, path: str, at: datetime) -> int:
    """A new upload of ``path`` for the job ``host`` runs or ran (one of the same path is replaced); its
    key. ``NotYoursError`` for another host's job."""
    job = await owned_job(session, job_id, host)
    await session.execute(
        delete(JobArtifactRow).where(JobArtifactRow.job_pk == job.pk, JobArtifactRow.path == path)
    )
    row = JobArtifactRow(job_pk=job.pk, path=path, received_at=at)
    session.add(row)
    await session.flush()
    return row.pk


async def append_chunk(session: AsyncSession, artifact_pk: int, seq: int, data: bytes) -> None:
    """The upload's chunk ``seq``."""
    session.add(JobArtifactChunkRow(artifact_pk=artifact_pk, seq=seq, data=data))
    await session.flush()


async def finish_upload(session: AsyncSession, artifact_pk: int, size: int, sha256: str) -> None:
    """The upload arrived whole: listed from now on."""
    row = await session.get(JobArtifactRow, artifact_pk)
    if row is not None:
        row.size, row.sha256 = size, sha256


async def not_kept(session: AsyncSession, artifact_pk: int, size: int, note: str) -> None:
    """The upload was refused (over a limit): its chunks go, the note stays for the pages to show."""
    await session.execute(delete(JobArtifactChunkRow).where(JobArtifactChunkRow.artifact_pk == artifact_pk))
    row = await session.get(JobArtifactRow, artifact_pk)
    if row is not None:
        row.size, row.note = size, note[:500]


@dataclass(frozen=True, slots=True)
class JobUsage:
    """What a job's uploads hold already (for its limits)."""

    files: int
    bytes: int


async def job_usage(session: AsyncSession, job_pk: int, *, excluding: str = "") -> JobUsage:
    """The job's kept uploads, not counting one of path ``excluding`` (a resend replaces it)."""
    files, size = (
        await session.execute(
            select(func.count(), func.coalesce(func.sum(JobArtifactRow.size), 0)).where(
                JobArtifactRow.job_pk == job_pk,
                JobArtifactRow.path != excluding,
                JobArtifactRow.note.is_(None),
            )
        )
    ).one()
    return JobUsage(int(files or 0), int(size or 0))


async def artifacts_of(session: AsyncSession, job_pks: Collection[int]) -> dict[int, list[ArtifactInfo]]:
    """Each job's finished uploads and notes, by path; a job with none is missing."""
    if not job_pks:
        return {}
    row = JobArtifactRow
    rows = await session.execute(
        select(row.pk, row.job_pk, row.path, row.size, row.note)
        .where(JobArtifactRow.job_pk.in_(job_pks), JobArtifactRow.size.is_not(None))
        .order_by(JobArtifactRow.path)
    )
    found: dict[int, list[ArtifactInfo]] = {}
    for pk, job_pk, path, size, note in rows:
        found.setdefault(int(job_pk), []).append(ArtifactInfo(int(pk), int(job_pk), str(path), size, note))
    return found


async def artifact(session: AsyncSession, job_pk: int, artifact_pk: int) -> ArtifactInfo | None:
    """One finished upload of the job (None: not the job's, not finished, or not kept)."""
    row = await session.get(JobArtifactRow, artifact_pk)
    if row is None or row.job_pk != job_pk or row.size is None or row.note is not None:
        return None
    return ArtifactInfo(row.pk, row.job_pk, row.path, row.size)


async def artifact_data(database: Database, artifact_pk: int) -> AsyncIterator[bytes]:
    """The upload's bytes, a chunk at a time (never all of it at once), each chunk read in a database
    session of its own: a slow download holds no connection while it waits for its reader."""
    seq = -1
    while True:
        async with database.sessions() as session:
            chunk = (
                await session.execute(
                    select(JobArtifactChunkRow.seq, JobArtifactChunkRow.data)
                    .where(JobArtifactChunkRow.artifact_pk == artifact_pk, JobArtifactChunkRow.seq > seq)
                    .order_by(JobArtifactChunkRow.seq)
                    .limit(1)
                )
            ).one_or_none()
            if chunk is None:
                return
            seq = int(chunk[0])
        yield bytes(chunk[1])
