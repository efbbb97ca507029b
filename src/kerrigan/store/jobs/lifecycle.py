"""A job's life on a runner host: accepted or refused, started, withdrawn, cancelled, ended.

Every call a runner repeats is idempotent: "already decided" is an answer, not an error.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import refusal_hold
from kerrigan.core.health_checks import HEALTH_CHECK_TASK
from kerrigan.core.lifecycle import (
    BOARD_FAULTS,
    ENDED,
    NOT_STARTED,
    QUEUE_WAIT_EXCEEDED,
    RUNNER_LOST,
    SOURCE_UNAVAILABLE,
    JobState,
    TransitionError,
    ended_by_runner,
    failure_class,
)
from kerrigan.core.recovery import RECOVERY_TASK, needs_recovery, why_queued
from kerrigan.store.audit import KERRIGAN_ACTOR
from kerrigan.store.health_checks.recoveries import queue_recoveries
from kerrigan.store.jobs.holders import owned_job
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.runners import hold_after_refusal
from kerrigan.store.signals import Topic, mark
from kerrigan.store.transitions import held_devices, move_job, settle_session

OUTCOMES = frozenset({"cancelled", "timed_out", SOURCE_UNAVAILABLE, RUNNER_LOST, *BOARD_FAULTS})


REQUEUE_REASONS = frozenset({"runner_full", "runner_disk_full"})


@dataclass(frozen=True, slots=True)
class Transition:
    """The state a call left the job in, and whether this call changed it (or found it decided)."""

    state: JobState
    changed: bool


async def accept(session: AsyncSession, job_id: str, host: str, at: datetime) -> Transition:
    """The runner takes the job."""
    job = await owned_job(session, job_id, host)
    if job.state != JobState.LEASED:
        return Transition(job.state, changed=False)
    await move_job(session, job, JobState.ACCEPTED, at)
    job.host = host
    return Transition(JobState.ACCEPTED, changed=True)


async def refuse(
    session: AsyncSession,
    job_id: str,
    host: str,
    at: datetime,
    *,
    reason: str,
    detail: str,
    retry: bool = True,
) -> Transition:
    """The runner cannot take the job: capacity refusals put it back in the queue, others end it.

    ``retry=False`` says the host can never run it (a claim of 0, or over its allocatable CPUs): it ends
    ``refused_before_start`` with the runner's detail, which the check run shows.
    """
    job = await owned_job(session, job_id, host)
    if job.state != JobState.LEASED:
        return Transition(job.state, changed=False)
    if reason in REQUEUE_REASONS and retry:
        await move_job(session, job, JobState.QUEUED, at, reason=reason, detail=detail)
        hold = refusal_hold(reason, detail, at, KERRIGAN_ACTOR)
        if hold is not None:  # offered elsewhere meanwhile, not straight back to the host that said no
            await hold_after_refusal(session, host, hold)
        await settle_session(session, job.session_pk, at)  # the check run says why it waits again
        return Transition(JobState.QUEUED, changed=True)
    await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=reason, detail=detail)
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.REFUSED_BEFORE_START, changed=True)


async def start(
    session: AsyncSession, job_id: str, host: str, at: datetime, cpus: str | None = None
) -> Transition:
    """The job's command started (pinned to ``cpus``, a kernel CPU list, when the runner pins)."""
    job = await owned_job(session, job_id, host)
    if job.state not in NOT_STARTED:
        return Transition(job.state, changed=False)
    # A start that crosses a withdrawal request wins: only the runner's answer decides (seed 003).
    await move_job(session, job, JobState.RUNNING, at)
    job.started_at, job.host, job.cpus = at, host, cpus
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.RUNNING, changed=True)


async def withdrawn(session: AsyncSession, job_id: str, host: str, at: datetime) -> Transition:
    """The runner withdrew a job it had not started: its queue-wait budget ran out."""
    job = await owned_job(session, job_id, host)
    if job.state not in NOT_STARTED:
        return Transition(job.state, changed=False)
    await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=QUEUE_WAIT_EXCEEDED)
    await settle_session(session, job.session_pk, at)
    return Transition(JobState.REFUSED_BEFORE_START, changed=True)


async def request_cancel(session: AsyncSession, session_id: str, at: datetime) -> list[int]:
    """Cancel a session's jobs: queued ones end at once, the others when their runner has stopped them.

    The ids of the jobs that ended now.
    """
    rows = (
        await session.scalars(
            select(JobRow)
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            .where(SessionRow.id == session_id, JobRow.state.not_in(ENDED))
            .order_by(JobRow.pk)
            .with_for_update(of=JobRow, key_share=True)
        )
    ).all()
    ended = []
    for job in rows:
        if job.state in (JobState.WAITING, JobState.QUEUED, JobState.LEASED):  # in no runner's hands
            detail = "" if job.state == JobState.WAITING else None  # what it waited for no longer matters
            await move_job(session, job, JobState.CANCELLED, at, reason="cancelled", detail=detail)
            ended.append(job.pk)
        elif job.cancel_requested_at is None:
            job.cancel_requested_at = at
            mark(session, Topic.RUNNER_REQUESTS)
    if ended:
        await settle_session(session, rows[0].session_pk, at)
    return ended


async def finish(
    session: AsyncSession,
    job_id: str,
    host: str,
    at: datetime,
    *,
    exit_status: int,
    accounting: dict[str, Any] | None,
    outcome: str | None = None,
    powered_off: Collection[str] = (),
    power_unknown: Collection[str] = (),
) -> Transition:
    """The job ended; its device is free again.

    ``outcome`` says why the runner stopped it: ``cancelled`` (asked to) or ``timed_out`` (its timeout);
    or, before its command started, ``source_unavailable`` (GitHub or the network failed the fetch). Any
    other job that ends before its command started failed on its host (``not_started``, the lab's failure).
    A job offered but never accepted cannot end this way: :class:`~kerrigan.core.lifecycle.TransitionError`.
    ``powered_off``: the job's boards its runner switched off at its end; ``power_unknown``: those it had to
    switch off and could not (their power did not answer). Each gets a recovery before its next job when the
    job ended in doubt (:func:`~kerrigan.core.recovery.needs_recovery`).
    """
    job = await owned_job(session, job_id, host)
    if job.state in ENDED:
        return Transition(job.state, changed=False)
    state, reason = ended_by_runner(exit_status, outcome, started=job.started_at is not None)
    if job.state == JobState.LEASED:  # only a lost lease ends a job its host never took
        raise TransitionError("job", job.state, state.value)
    held = set(held_devices(job))  # a host names only the job's own boards
    off, unknown = set(powered_off) & held, set(power_unknown) & held - set(powered_off)
    lab_job = job.task_id in (HEALTH_CHECK_TASK, RECOVERY_TASK)  # its own end decides what follows
    if (off or unknown) and not lab_job and needs_recovery(state, failure_class(state, reason, exit_status)):
        # Queued before the end is recorded, so that the device's count sees the recovery decide.
        why = why_queued(reason, state, job.pk)
        await queue_recoveries(session, off, at, why=why)
        await queue_recoveries(session, unknown, at, why=f"{why}; its power did not answer at the end")
    await move_job(session, job, state, at, reason=reason, exit_status=exit_status)
    job.accounting = accounting
    await settle_session(session, job.session_pk, at)
    return Transition(state, changed=True)
