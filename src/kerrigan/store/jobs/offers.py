"""What a runner host's poll hands it: the jobs offered to it, the jobs it should stop or withdraw, and
the jobs the server sees it holding."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import and_, literal, or_, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Subquery

from kerrigan.core.job_spec import JobSpec
from kerrigan.core.lifecycle import (
    NOT_STARTED,
    JobState,
)
from kerrigan.core.manifest import DEFAULT_QUEUE_WAIT_LIMIT_S, Priority
from kerrigan.store.job_specs import spec_of
from kerrigan.store.jobs.holders import lease_holder
from kerrigan.store.jobs.records import roles_of
from kerrigan.store.models import DeviceLeaseRow, HostLeaseRow, JobRow, SessionRow
from kerrigan.store.signals import Topic, mark

# A job's lease of its first device: one row a job, gang or not (a gang holds a lease per role).
FIRST_LEASE: Final = and_(DeviceLeaseRow.job_pk == JobRow.pk, DeviceLeaseRow.device_id == JobRow.device_id)


# A job that holds no device holds room on a runner host: one row a job.
ROOM_LEASE: Final = HostLeaseRow.job_pk == JobRow.pk


def _held_by(host: str) -> Subquery:
    """The ids of the jobs ``host`` holds a lease for: of their first device, or of room on it."""
    return union_all(
        select(JobRow.pk).join(DeviceLeaseRow, FIRST_LEASE).where(DeviceLeaseRow.host == host),
        select(HostLeaseRow.job_pk).where(HostLeaseRow.host == host),
    ).subquery()


@dataclass(frozen=True, slots=True)
class Offer:
    """A job offered to a runner host: what it is asked to do (``spec``) and the facts of its dispatch;
    ``device_id`` is None for a job that holds no device."""

    job_id: str
    session_id: str
    spec: JobSpec
    device_id: str | None
    repository: str
    head_sha: str
    installation_id: int | None = None
    workflow_run_id: int | None = None
    queue_wait_s: float = 0.0
    queue_wait_limit_s: float = float(DEFAULT_QUEUE_WAIT_LIMIT_S)
    priority: Priority = Priority.NORMAL
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device), in role order; device_id the first
    # Whether the job may have secrets: a fork's session only when approved with `/kerrigan approve secrets`.
    secrets_allowed: bool = True


async def offers(session: AsyncSession, host: str) -> list[Offer]:
    """Jobs leased to devices of ``host`` (or room on it, without a board) and not yet accepted."""
    boarded = await session.execute(
        select(JobRow, SessionRow, DeviceLeaseRow.device_id)
        .join(DeviceLeaseRow, FIRST_LEASE)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(DeviceLeaseRow.host == host, JobRow.state == JobState.LEASED)
    )
    boardless = await session.execute(
        select(JobRow, SessionRow, literal(None))
        .join(HostLeaseRow, ROOM_LEASE)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(HostLeaseRow.host == host, JobRow.state == JobState.LEASED)
    )
    rows = sorted([*boarded.all(), *boardless.all()], key=lambda row: row[0].pk)
    return [
        Offer(
            str(job.pk),
            run.id,
            spec_of(job),
            device,
            run.repository,
            run.head_sha,
            installation_id=run.installation_id,
            workflow_run_id=run.workflow_run_id,
            queue_wait_s=job.queue_wait_s,
            queue_wait_limit_s=run.queue_wait_limit_s,
            priority=run.priority,
            roles=roles_of(job.devices),
            secrets_allowed=run.secrets_allowed,
        )
        for job, run, device in rows
    ]


@dataclass(frozen=True, slots=True)
class RunnerRequests:
    """What the server asks of a runner host on its next poll."""

    cancel: tuple[str, ...] = ()
    withdraw: tuple[str, ...] = ()


async def runner_requests(session: AsyncSession, host: str) -> RunnerRequests:
    """Jobs of ``host`` to cancel (any not ended) and to withdraw (accepted, not started)."""
    held = _held_by(host)
    rows = await session.execute(
        select(JobRow.pk, JobRow.state, JobRow.cancel_requested_at, JobRow.withdraw_requested_at)
        .join(held, held.c.pk == JobRow.pk)
        .where(or_(JobRow.cancel_requested_at.is_not(None), JobRow.withdraw_requested_at.is_not(None)))
        .order_by(JobRow.pk)
    )
    cancel, withdraw = [], []
    for pk, state, cancel_at, withdraw_at in rows:
        if cancel_at is not None:
            cancel.append(str(pk))
        elif withdraw_at is not None and state in NOT_STARTED:
            withdraw.append(str(pk))
    return RunnerRequests(tuple(cancel), tuple(withdraw))


async def observe_runner_waits(
    session: AsyncSession, host: str, waiting: dict[str, int], at: datetime
) -> list[str]:
    """Jobs a runner holds for capacity, with the milliseconds each waited there; asks to withdraw those
    whose queue-wait budget ran out. The ids newly asked for."""
    asked = []
    for job_id, waited_ms in waiting.items():
        if not (job_id.isascii() and job_id.isdigit()):
            continue
        if await lease_holder(session, int(job_id)) != host:
            continue
        found = (
            await session.execute(
                select(JobRow, SessionRow.queue_wait_limit_s)
                .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                .where(JobRow.pk == int(job_id))
            )
        ).first()
        if found is None:
            continue
        job, limit_s = found
        if job.state not in NOT_STARTED or job.withdraw_requested_at is not None:
            continue
        if job.queue_wait_s + waited_ms / 1000 >= limit_s:
            job.withdraw_requested_at = at
            asked.append(job_id)
            mark(session, Topic.RUNNER_REQUESTS)
    return asked


async def held_jobs(session: AsyncSession, host: str) -> dict[str, str]:
    """Jobs a runner host holds as the server sees them (accepted or running), with their states."""
    held = _held_by(host)
    rows = await session.execute(
        select(JobRow.pk, JobRow.state)
        .join(held, held.c.pk == JobRow.pk)
        .where(JobRow.state.in_([JobState.ACCEPTED, JobState.RUNNING]))
    )
    return {str(pk): str(state) for pk, state in rows}
