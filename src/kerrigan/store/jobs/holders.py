"""Whose a job is: the runner host holding its lease (of its devices, or of room on the host), and the
check every runner call makes that the job is the caller's."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, union_all
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import ENDED, JobState
from kerrigan.store.models import DeviceLeaseRow, HostLeaseRow, JobRow, SessionRow


class NotYoursError(LookupError):
    """The job does not exist, or is not offered to the calling runner host."""


async def lease_holder(session: AsyncSession, job_pk: int) -> str | None:
    """The runner host holding the job's lease (of its devices, or of room on the host), if any."""
    return await session.scalar(
        union_all(
            select(DeviceLeaseRow.host).where(DeviceLeaseRow.job_pk == job_pk),
            select(HostLeaseRow.host).where(HostLeaseRow.job_pk == job_pk),
        ).limit(1)
    )


async def owned_job(session: AsyncSession, job_id: str, host: str) -> JobRow:
    """The job ``job_id`` (locked) when ``host`` holds it, or ran it and it ended; else NotYoursError."""
    numeric = job_id.isascii() and job_id.isdigit()
    job = await session.get(JobRow, int(job_id), with_for_update={"key_share": True}) if numeric else None
    if job is None:
        raise NotYoursError(f"no job {job_id}")
    holder = await lease_holder(session, job.pk)
    # A job in hand is its lease holder's; an ended one answers the host that ran it (a repeated call).
    # A job sent back to the queue is nobody's: a late call from the host that had it changes nothing.
    owner = holder if holder is not None else (job.host if job.state in ENDED else None)
    if owner != host:
        raise NotYoursError(f"job {job_id} is not offered to {host}")
    return job


@dataclass(frozen=True, slots=True)
class HeldLease:
    """The lease of a job a runner host accepted, as the token minted for it names it: the host and when the
    lease was granted. A job sent back to the queue and leased again, even to the same host, holds another
    one (heartbeats move a lease's expiry, never when it was granted)."""

    job_id: str
    host: str
    granted_at: datetime


async def accepted_lease(session: AsyncSession, job_id: str) -> HeldLease | None:
    """The lease of job ``job_id`` if it is accepted or running (in a runner's hands), else None."""
    if not (job_id.isascii() and job_id.isdigit()):
        return None
    held = (JobState.ACCEPTED, JobState.RUNNING)
    found = (
        await session.execute(
            union_all(
                select(DeviceLeaseRow.host, DeviceLeaseRow.granted_at)
                .join(JobRow, JobRow.pk == DeviceLeaseRow.job_pk)
                .where(JobRow.pk == int(job_id), JobRow.state.in_(held)),
                select(HostLeaseRow.host, HostLeaseRow.granted_at)
                .join(JobRow, JobRow.pk == HostLeaseRow.job_pk)
                .where(JobRow.pk == int(job_id), JobRow.state.in_(held)),
            ).limit(1)  # a gang's devices are leased in one round, at one time, to one host
        )
    ).first()
    return HeldLease(job_id, str(found[0]), found[1]) if found is not None else None


async def job_state(session: AsyncSession, job_id: str) -> JobState | None:
    """The state job ``job_id`` is in (None: no such job)."""
    if not (job_id.isascii() and job_id.isdigit()):
        return None
    return await session.scalar(select(JobRow.state).where(JobRow.pk == int(job_id)))


async def job_repository(session: AsyncSession, job_id: str) -> tuple[int | None, str] | None:
    """The installation and repository of a job's session."""
    if not (job_id.isascii() and job_id.isdigit()):
        return None
    found = (
        await session.execute(
            select(SessionRow.installation_id, SessionRow.repository)
            .join(JobRow, JobRow.session_pk == SessionRow.pk)
            .where(JobRow.pk == int(job_id))
        )
    ).first()
    return (found[0], str(found[1])) if found is not None else None
