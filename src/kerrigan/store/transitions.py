"""Job transitions applied with everything that follows from them, in the caller's transaction.

:func:`move_job` asks :mod:`kerrigan.core.lifecycle` whether the move is allowed (and refuses it with
:class:`~kerrigan.core.lifecycle.TransitionError` if not), frees the device when the job stops holding one,
stamps the end and its failure class; :func:`settle_session` then derives the session's state and conclusion
from all its jobs and records the check run's next version. Both are written together, never as a side
effect of talking to GitHub.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.health_checks import HEALTH_CHECK_TASK
from kerrigan.core.lifecycle import (
    ENDED,
    HOLDING_A_DEVICE,
    JobFacts,
    JobState,
    RetryPolicy,
    SessionState,
    check_session_transition,
    check_transition,
    failure_class,
    power_unanswered,
    session_outcome,
    should_retry,
    spends_retries,
)
from kerrigan.core.matrix import task_of
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.core.suspect_retry import SuspectRetry
from kerrigan.core.task_graph import Skip, Waiting, readiness, task_states
from kerrigan.store.database import lab_conclusion_of
from kerrigan.store.device_health import count_outcome
from kerrigan.store.health_checks.ends import checked_device, record_check_end
from kerrigan.store.health_checks.recoveries import record_recovery_end
from kerrigan.store.job_specs import spec_columns, spec_of
from kerrigan.store.leases import release_job_leases
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.signals import (
    JobEnded,
    JobMoved,
    JobStarted,
    SessionConcluded,
    SessionMoved,
    Topic,
    mark,
    note,
)
from kerrigan.store.suspect_retries import SuspectLookup, record_verdict, suspect_verdict

# Moves a check run shows: a job starting or ending (leases and acceptances are not news on GitHub).
VISIBLE = frozenset({JobState.RUNNING}) | ENDED


async def move_job(
    session: AsyncSession,
    job: JobRow,
    to: JobState,
    at: datetime,
    *,
    reason: str | None = None,
    detail: str | None = None,
    exit_status: int | None = None,
) -> None:
    """Move ``job`` to ``to`` (the caller holds its row); the session is settled by :func:`settle_session`."""
    before = job.state
    check_transition(before, to)
    if (
        before in HOLDING_A_DEVICE
        and to not in HOLDING_A_DEVICE
        and (job.device_id is not None or job.boardless)
    ):
        await release_job_leases(session, job.pk)  # every device of a gang, or a boardless job's room
        mark(session, Topic.DISPATCH)
    job.state = to
    if before is not to:
        owner = await session.get(SessionRow, job.session_pk)  # in the session already, as a rule
        session_id, repository = (owner.id, owner.repository) if owner is not None else ("", "")
        note(session, JobMoved(job.pk, job.task_id, session_id, repository, before, to, reason))
    if reason is not None:
        job.reason = reason
    if detail is not None:
        job.detail = detail[:500]
    if exit_status is not None:
        job.exit_status = exit_status
    if to is JobState.QUEUED:
        job.device_id = None
        job.devices = []
        mark(session, Topic.DISPATCH)
    if to is JobState.RUNNING:
        note(session, JobStarted(max(0.0, (at - job.created_at).total_seconds())))
    if to in ENDED:
        job.finished_at = at
        klass = failure_class(to, job.reason, job.exit_status)
        job.failure_class = klass
        if before not in ENDED:  # failed -> retried is the same run, counted when it failed
            ran_s = (at - job.started_at).total_seconds() if job.started_at is not None else 0.0
            note(session, JobEnded(to, klass, held_devices(job), max(0.0, ran_s)))
        lab_job = job.task_id in (HEALTH_CHECK_TASK, RECOVERY_TASK)
        checked = await checked_device(session, job.session_pk) if lab_job else None
        if checked is not None and job.task_id == RECOVERY_TASK:
            await record_recovery_end(session, checked, job, to, at)  # its own count, not a job's failure
        elif checked is not None:
            await record_check_end(session, checked, job, to, at)  # never counted as a device's failure
        elif before in HOLDING_A_DEVICE and job.device_id is not None and job.started_at is not None:
            # Each device of a gang ran it: a success clears each one's count, a failure of the lab's
            # counts on each (their health checks tell the broken board from its peers).
            for device_id in held_devices(job):
                await count_outcome(session, device_id, to, klass, job_pk=job.pk, reason=job.reason, at=at)


def held_devices(job: JobRow) -> tuple[str, ...]:
    """The devices the job holds or held: each role's of a gang, else its one (none before it got one)."""
    gang = tuple(str(role["device"]) for role in job.devices or ())
    return gang or ((job.device_id,) if job.device_id is not None else ())


def session_moved(session: AsyncSession, row: SessionRow, before: SessionState) -> None:
    """Tell the fact listeners (the log) once the transaction commits that ``row`` left ``before``."""
    after = row.state
    if after is not before:
        note(session, SessionMoved(row.id, row.repository, before, after, row.conclusion))


def record_version(session: AsyncSession, row: SessionRow, at: datetime) -> None:
    """The check run should show ``row`` as it is now: its next version, due to be sent at once unless the
    reconciler is backing off after GitHub failed (then the version waits for the backoff to end).
    A health-check session has no check run: nothing is recorded for it."""
    if row.health_check_device is not None:
        return
    row.version += 1
    row.version_at = at
    if row.unshown_since is None:
        row.unshown_since = at
    if row.sync_due_at is None or row.sync_attempts == 0:
        row.sync_due_at = at
    mark(session, Topic.CHECK_RUNS)


async def locked_session(session: AsyncSession, session_pk: int) -> SessionRow:
    """The session row, locked for this transaction on PostgreSQL, so two jobs of one session ending at
    once settle it one after the other (each reads the other's end).

    The lock is taken after the session's jobs (docs/architecture.md, "Row locks"), and is ``FOR NO KEY
    UPDATE``: a job inserted or updated meanwhile checks its foreign key with ``FOR KEY SHARE``, which
    that does not block. The row is read afresh: one loaded before the lock may be stale."""
    row = await session.scalar(
        select(SessionRow)
        .where(SessionRow.pk == session_pk)
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    if row is None:
        raise LookupError(f"no session with key {session_pk}")
    return row


def job_facts(job: JobRow) -> JobFacts:
    """What the session rule needs of a stored job."""
    return JobFacts(
        job.state,
        started=job.started_at is not None,
        failure_class=job.failure_class,
        reason=job.reason,
    )


async def settle_session(
    session: AsyncSession, session_pk: int, at: datetime, *, news: bool = True
) -> SessionRow:
    """Derive the session's state and conclusion from its jobs; record a check-run version when that
    changed or ``news`` says a job moved in a way the check run shows."""
    row = await locked_session(session, session_pk)
    jobs = list((await session.scalars(select(JobRow).where(JobRow.session_pk == session_pk))).all())
    before = row.state
    if before is SessionState.COMPLETED or not jobs:
        return row  # decided already (its jobs' ends, or its resolution, completed it)
    jobs += await retry_failed(session, row, jobs, at)
    news = await release_waiting(session, jobs, at) or news
    outcome = session_outcome([job_facts(job) for job in jobs], lab=lab_conclusion_of(session))
    check_session_transition(before, outcome.state)
    conclusion = outcome.conclusion
    changed = (outcome.state, conclusion) != (before, row.conclusion)
    row.state, row.conclusion = outcome.state, conclusion
    session_moved(session, row, before)
    if outcome.state is SessionState.COMPLETED and conclusion is not None:
        note(session, SessionConcluded(conclusion))
    if changed or news:
        row.updated_at = at
        record_version(session, row, at)
    return row


async def release_waiting(session: AsyncSession, jobs: list[JobRow], at: datetime) -> bool:
    """Queue the waiting jobs whose tasks' needs all succeeded, and skip those with a need that ended
    without success (``core.task_graph``); whether any moved."""
    if not any(job.state == JobState.WAITING for job in jobs):
        return False
    needs: dict[str, tuple[str, ...]] = {}
    for job in jobs:
        needs.setdefault(task_of(job.task_id), tuple(job.needs or ()))
    verdicts = readiness(needs, task_states((task_of(job.task_id), job.state) for job in jobs))
    moved = False
    for job in jobs:
        verdict = verdicts.get(task_of(job.task_id))
        if job.state != JobState.WAITING or verdict is None or isinstance(verdict, Waiting):
            continue
        if isinstance(verdict, Skip):
            await move_job(session, job, JobState.SKIPPED, at, reason="skipped", detail=verdict.reason)
        else:
            await move_job(session, job, JobState.QUEUED, at, detail="")  # what it waited for is done
        moved = True
    return moved


async def retry_failed(
    session: AsyncSession, row: SessionRow, jobs: list[JobRow], at: datetime
) -> list[JobRow]:
    """Give each failed job of ``row`` that its session's retry policy allows another attempt: it becomes
    ``retried`` and a new job of the same task is queued, avoiding the devices where this task failed.
    A boardless job's new attempt avoids the runner hosts where it failed instead. A job that failed on a
    device suspect for its task gets its suspect retry first (:mod:`kerrigan.store.suspect_retries`): its
    new attempt is never leased where it failed nor a suspect; without such a peer it is not retried
    (unless another budget retries it) and says why. A session being cancelled, or a health check,
    retries nothing. The new jobs."""
    if row.cancel_reason is not None or row.health_check_device is not None:
        return []
    policy = RetryPolicy.from_dict(row.retry)
    lookup = SuspectLookup(session, at)
    added = []
    for job in jobs:
        if job.state != JobState.FAILED:
            continue
        klass = job.failure_class
        spends = _spending_attempts(job, jobs, at)
        earlier = [
            other.failure_class
            for other in jobs
            if other.task_id == job.task_id
            and other.state == JobState.RETRIED
            and other.suspect_retry != SuspectRetry.RETRIED  # counted against the suspect budget
            and spends[other.pk]
        ]
        # Judged once, when it ends: a device that becomes suspect later (another session's failures)
        # does not bring back a job that ended failed before it was. A board whose power did not answer
        # said nothing of itself.
        judged = job.suspect_retry is None and job.finished_at == at and spends[job.pk]
        verdict = await suspect_verdict(lookup, row, job, jobs, policy) if judged else None
        suspect = verdict is not None and verdict.failure.retry is SuspectRetry.RETRIED
        if not suspect and not should_retry(
            policy,
            JobState.FAILED,
            klass,
            job.exit_status,
            earlier,
            reason=job.reason,
            free=not spends[job.pk],
        ):
            if verdict is not None:
                record_verdict(job, verdict)  # it stays failed: its check run says why
            continue
        if verdict is not None and suspect:
            record_verdict(job, verdict)
        await move_job(session, job, JobState.RETRIED, at)
        held = [str(d["device"]) for d in job.devices or ()] or ([job.device_id] if job.device_id else [])
        avoid = list(dict.fromkeys([*(job.avoid_devices or []), *held]))  # each of a gang's devices
        if verdict is not None and suspect:
            avoid = list(verdict.avoid)
        ran_on = [job.host] if job.boardless and job.host else []
        avoid_hosts = list(dict.fromkeys([*(job.avoid_hosts or []), *ran_on]))
        added.append(
            JobRow(
                session_pk=job.session_pk,
                created_at=at,
                attempt=job.attempt + 1,
                retry_of=job.pk,
                avoid_devices=avoid,
                avoid_hosts=avoid_hosts,
                avoid_strict=suspect,
                **spec_columns(spec_of(job)),
            )
        )
    if added:
        session.add_all(added)
        await session.flush()
        mark(session, Topic.DISPATCH)
    return added


def _spending_attempts(job: JobRow, jobs: Iterable[JobRow], at: datetime) -> dict[int, bool]:
    """:func:`spends_retries` of ``job`` and its task's attempts already retried, by key."""
    attempts = sorted(
        (other for other in jobs if other.task_id == job.task_id and other.state == JobState.RETRIED),
        key=lambda other: other.attempt,
    )
    attempts.append(job)
    # Since when the task's power has not answered: the end of its first attempt that met it.
    since = min((other.finished_at or at for other in attempts if power_unanswered(other.reason)), default=at)
    waited = [((other.finished_at or at) - since).total_seconds() for other in attempts]
    verdicts = spends_retries(
        [(other.reason, waited_s) for other, waited_s in zip(attempts, waited, strict=True)]
    )
    return {other.pk: spends for other, spends in zip(attempts, verdicts, strict=True)}


async def settle_sessions(session: AsyncSession, session_pks: Iterable[int], at: datetime) -> None:
    """:func:`settle_session` for each session, in key order (the order every writer locks them in)."""
    for pk in sorted(set(session_pks)):
        await settle_session(session, pk, at)
