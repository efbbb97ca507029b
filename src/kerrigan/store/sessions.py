"""Sessions and their jobs, stored; handed out as core :class:`~kerrigan.core.sessions.Session` objects.

A session's resolution names every device of the lab for every task: for a large manifest in a large lab,
compacting it to store and expanding it to hand out take a while, so both run in a thread
(``asyncio.to_thread``) on plain data, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.diagnostics_store import compact, expand
from kerrigan.core.lifecycle import JobState, RetryPolicy, SessionOutcome, check_session_transition
from kerrigan.core.resolution import Resolution
from kerrigan.core.sessions import Job, Session, SessionState
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.job_specs import spec_columns, spec_of
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.row_locks import lock_jobs
from kerrigan.store.signals import SessionConcluded, Topic, mark, note
from kerrigan.store.transitions import locked_session, move_job, record_version, session_moved


def read_resolution(stored: Mapping[str, Any] | None, *, device_lists: bool = True) -> Resolution:
    """A stored resolution document, its per-device lists expanded (without ``device_lists`` they are not,
    and read as empty: for a reader that needs none of them)."""
    return Resolution.from_document(expand(stored or {}) if device_lists else stored)


def stored_resolution(resolution: Resolution) -> dict[str, Any]:
    """The document to store for ``resolution``, its per-device lists compact."""
    return compact(resolution.to_document())


def _session(
    row: SessionRow, jobs: Iterable[JobRow] = (), *, resolution: Resolution | None = None
) -> Session:
    """The session of ``row``; ``resolution``: its resolution read already (else read here)."""
    return Session(
        id=row.id,
        repository=row.repository,
        installation_id=row.installation_id,
        head_sha=row.head_sha,
        workflow=row.workflow,
        manifest_path=row.manifest_path,
        event=row.event,
        priority=row.priority,
        state=row.state,
        created_at=row.created_at,
        head_branch=row.head_branch,
        pull_request=row.pull_request,
        awaiting_approval=row.awaiting_approval,
        fork_owner=row.fork_owner,
        conclusion=row.conclusion,
        check_run_id=row.check_run_id,
        delivery_id=row.delivery_id,
        workflow_run_id=row.workflow_run_id,
        resolution=resolution if resolution is not None else read_resolution(row.resolution),
        retry=RetryPolicy.from_dict(row.retry),
        jobs=tuple(
            Job(
                spec_of(job),
                device_id=job.device_id,
                state=job.state,
                exit_status=job.exit_status,
                failure_class=job.failure_class,
                attempt=job.attempt,
            )
            for job in jobs
        ),
        strategy=row.strategy,
        max_devkits=row.max_devkits,
        queue_wait_limit_s=row.queue_wait_limit_s,
        version=row.version,
        shown_version=row.shown_version,
        check_run_error=row.check_run_error,
        secrets_allowed=row.secrets_allowed,
    )


async def _jobs(session: AsyncSession, session_pk: int) -> list[JobRow]:
    return list(
        (
            await session.scalars(select(JobRow).where(JobRow.session_pk == session_pk).order_by(JobRow.pk))
        ).all()
    )


async def create_session(
    session: AsyncSession, new: Session, at: datetime, *, concurrency_group: str | None = None
) -> Session:
    """Store a session and a queued job per task named in ``new.jobs``; ``concurrency_group`` is its
    manifest's expanded ``concurrency.group`` (None: it supersedes nothing and nothing supersedes it)."""
    row = SessionRow(
        id=new.id,
        repository=new.repository,
        installation_id=new.installation_id,
        head_sha=new.head_sha,
        head_branch=new.head_branch,
        workflow=new.workflow,
        manifest_path=new.manifest_path,
        event=new.event,
        priority=new.priority,
        state=new.state,
        conclusion=new.conclusion,
        pull_request=new.pull_request,
        awaiting_approval=new.awaiting_approval,
        fork_owner=new.fork_owner,
        delivery_id=new.delivery_id,
        workflow_run_id=new.workflow_run_id,
        resolution=stored_resolution(new.resolution),
        retry=new.retry.as_dict(),
        strategy=new.strategy,
        max_devkits=new.max_devkits,
        queue_wait_limit_s=new.queue_wait_limit_s,
        created_at=at,
        updated_at=at,
        concurrency_group=concurrency_group,
        secrets_allowed=new.secrets_allowed,
    )
    session.add(row)
    await session.flush()
    if new.state is SessionState.COMPLETED and new.conclusion is not None:
        note(session, SessionConcluded(new.conclusion))  # decided at once: manifest errors, none to run
    jobs = [
        JobRow(
            session_pk=row.pk,
            device_id=job.device_id,
            created_at=at,
            state=JobState.WAITING if job.spec.needs else JobState.QUEUED,
            detail=f"needs {', '.join(job.spec.needs)}"[:500] if job.spec.needs else None,
            **spec_columns(job.spec),
        )
        for job in new.jobs
    ]
    session.add_all(jobs)
    await session.flush()
    return _session(row, jobs)


async def superseded_sessions(
    session: AsyncSession, newer: Session, group: str, *, running_too: bool
) -> list[str]:
    """The ids of the sessions ``newer`` supersedes: of its repository, fork scope (the repository's own
    sessions, or one fork owner's) and concurrency ``group``, at another commit, created before it, not
    ended, not of a merge group; unless ``running_too``, only those none of whose jobs started."""
    scope = (
        SessionRow.fork_owner.is_(None)
        if newer.fork_owner is None
        else SessionRow.fork_owner == newer.fork_owner
    )
    query = (
        select(SessionRow.id)
        .where(
            SessionRow.repository == newer.repository,
            scope,
            SessionRow.concurrency_group == group,
            SessionRow.head_sha != newer.head_sha,
            SessionRow.id != newer.id,
            SessionRow.state != SessionState.COMPLETED,
            SessionRow.event != "merge_group",
            SessionRow.created_at <= newer.created_at,
        )
        .order_by(SessionRow.pk)
    )
    if not running_too:
        started = select(JobRow.pk).where(JobRow.session_pk == SessionRow.pk, JobRow.started_at.is_not(None))
        query = query.where(~started.exists())
    return list((await session.scalars(query)).all())


async def resolve_session(
    session: AsyncSession,
    session_id: str,
    at: datetime,
    *,
    outcome: SessionOutcome,
    resolution: Resolution,
    check_run: Mapping[str, Any],
    retry: RetryPolicy | None = None,
    requirements: Mapping[str, Mapping[str, Any]] | None = None,
    unschedulable: Iterable[str] = (),
    awaiting_approval: bool | None = None,
    secrets_allowed: bool | None = None,
) -> Session:
    """A session's manifest was read and resolved (``secrets_allowed``: an approval gave its jobs their
    secrets): store the resolution (its per-device lists compact:
    :mod:`kerrigan.core.diagnostics_store`) and the check run it makes (the
    body GitHub should show until a job starts), its manifest's ``retry`` policy (None: as it was), each
    task's requirements, and the session's state; a
    session that can never run ends its jobs (the unschedulable tasks ``unschedulable``, the others
    ``session_unschedulable``). Records the check run's next version; queued work wakes dispatch."""
    row = await _row(session, session_id)
    await lock_jobs(session, row.pk)  # its jobs, then the session: the one order (store.row_locks)
    row = await locked_session(session, row.pk)
    before = row.state
    check_session_transition(before, outcome.state)
    row.state = outcome.state
    row.conclusion = outcome.conclusion
    session_moved(session, row, before)
    if outcome.state is SessionState.COMPLETED and row.conclusion is not None:
        note(session, SessionConcluded(row.conclusion))
    row.resolution = await asyncio.to_thread(stored_resolution, resolution)
    if retry is not None:
        row.retry = retry.as_dict()
    row.check_run_resolution = dict(check_run)
    if awaiting_approval is not None:
        row.awaiting_approval = awaiting_approval
    if secrets_allowed is not None:
        row.secrets_allowed = secrets_allowed
    row.updated_at = at
    jobs = await _jobs(session, row.pk)
    never = set(unschedulable)
    for job in jobs:
        if requirements is not None and job.task_id in requirements:
            job.requirements = dict(requirements[job.task_id])
        if outcome.state is SessionState.COMPLETED and job.state in (JobState.QUEUED, JobState.WAITING):
            reason = "unschedulable" if job.task_id in never else "session_unschedulable"
            await move_job(session, job, JobState.REFUSED_BEFORE_START, at, reason=reason, detail="")
    if outcome.state is SessionState.QUEUED and not row.awaiting_approval:
        mark(session, Topic.DISPATCH)
    record_version(session, row, at)
    await session.flush()
    return _session(row, jobs, resolution=resolution)  # what is stored reads back the same


async def _row(session: AsyncSession, session_id: str) -> SessionRow:
    row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
    if row is None:
        raise NotFoundError(f"no session {session_id!r}")
    return row


async def get_session(session: AsyncSession, session_id: str, *, device_lists: bool = True) -> Session:
    """One session with its jobs; without ``device_lists`` its resolution keeps each task's per-device
    lists unread (empty), for a reader that needs none of them and should not pay for expanding thousands of
    devices a task."""
    row = await _row(session, session_id)
    jobs = await _jobs(session, row.pk)
    stored = row.resolution or {}
    resolution = await asyncio.to_thread(read_resolution, stored, device_lists=device_lists)
    return _session(row, jobs, resolution=resolution)


async def find_sessions(
    session: AsyncSession,
    repository: str,
    *,
    head_sha: str | None = None,
    workflow: str | None = None,
    check_run_id: int | None = None,
    delivery_id: str | None = None,
    awaiting_approval: bool | None = None,
    manifest_path: str | None = None,
) -> list[Session]:
    """Sessions of a repository, oldest first, narrowed by the given fields."""
    query = select(SessionRow).where(SessionRow.repository == repository).order_by(SessionRow.pk)
    filters: Mapping[str, Any] = {
        "head_sha": head_sha,
        "workflow": workflow,
        "check_run_id": check_run_id,
        "delivery_id": delivery_id,
        "awaiting_approval": awaiting_approval,
        "manifest_path": manifest_path,
    }
    for name, value in filters.items():
        if value is not None:
            query = query.where(getattr(SessionRow, name) == value)
    rows = (await session.scalars(query)).all()
    stored = [row.resolution or {} for row in rows]
    read = await asyncio.to_thread(lambda: [read_resolution(resolution) for resolution in stored])
    return [_session(row, resolution=resolution) for row, resolution in zip(rows, read, strict=True)]


async def delivered_manifests(session: AsyncSession, repository: str, delivery_id: str) -> set[str]:
    """The manifests a delivery already started sessions of (before a restart took its claim over)."""
    query = select(SessionRow.manifest_path).where(
        SessionRow.repository == repository, SessionRow.delivery_id == delivery_id
    )
    return set((await session.scalars(query)).all())


async def commits_beginning(session: AsyncSession, repository: str, prefix: str) -> set[str]:
    """The head commits of the repository's sessions whose SHA begins with ``prefix`` (hex digits)."""
    query = (
        select(SessionRow.head_sha)
        .where(SessionRow.repository == repository, SessionRow.head_sha.startswith(prefix, autoescape=True))
        .distinct()
    )
    return set((await session.scalars(query)).all())


def latest_per_workflow(sessions: Iterable[Session]) -> list[Session]:
    """The newest session of each workflow, in workflow order of first appearance."""
    latest: dict[str, Session] = {}
    for found in sessions:
        latest[found.workflow] = found
    return list(latest.values())


async def queue_position(session: AsyncSession, session_id: str) -> int:
    """1 + how many queued sessions (not waiting for approval) came before this one."""
    row = await _row(session, session_id)
    ahead = await session.scalar(
        select(func.count())
        .select_from(SessionRow)
        .where(
            SessionRow.state == SessionState.QUEUED,
            SessionRow.awaiting_approval.is_(False),
            SessionRow.pk < row.pk,
        )
    )
    return int(ahead or 0) + 1
