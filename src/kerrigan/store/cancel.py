"""Cancelling a session: who asked and why are kept on it, its queued jobs end at once, its running ones
are stopped by their runners (asked on the next poll), and its check run shows it.

Every way to cancel (the check run's action, the session page, the API, the CLI, ``/kerrigan cancel``,
a newer commit superseding an older one) ends here, in the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import Conclusion, SessionState, check_session_transition
from kerrigan.store.jobs.lifecycle import request_cancel
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.row_locks import lock_jobs
from kerrigan.store.signals import SessionConcluded, note
from kerrigan.store.transitions import locked_session, record_version, session_moved


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What a cancel did: ``changed`` is False when the session had ended already (``state`` says how),
    or a cancel was asked before; ``ended`` are the jobs that ended now, ``stopping`` the running jobs
    whose runners were asked to stop them."""

    changed: bool
    state: SessionState
    conclusion: Conclusion | None
    ended: tuple[int, ...] = ()
    stopping: int = 0


async def cancel_session(
    session: AsyncSession, session_id: str, at: datetime, *, by: str | None, reason: str
) -> Cancelled | None:
    """Cancel the session ``session_id`` (None: there is none). ``by`` is the login who asked (None when
    Kerrigan did, superseding it); ``reason`` is what the check run says, e.g. ``cancelled by hubot`` or
    ``superseded by 3f2a1b0``. The first cancel's reason is kept."""
    found = await session.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
    if found is None:
        return None
    # Its jobs first, then the session: the order a runner's call (its job, then the job's session) and
    # every other writer take them in (docs/architecture.md, "Row locks").
    await lock_jobs(session, found)
    row = await locked_session(session, found)
    state = row.state
    if state is SessionState.COMPLETED:
        return Cancelled(False, state, row.conclusion)
    asked_before = row.cancel_reason is not None
    if not asked_before:
        row.cancelled_by, row.cancel_reason = by, reason[:500]
    ended = await request_cancel(session, session_id, at)
    jobs = (await session.scalars(select(JobRow).where(JobRow.session_pk == row.pk))).all()
    if not jobs:
        # Nothing was ever queued (a fork's session awaiting approval): it ends here.
        check_session_transition(state, SessionState.COMPLETED)
        row.state, row.conclusion = SessionState.COMPLETED, Conclusion.CANCELLED
        session_moved(session, row, state)
        note(session, SessionConcluded(Conclusion.CANCELLED))
        row.updated_at = at
        record_version(session, row, at)
    elif not ended and not asked_before:
        row.updated_at = at
        record_version(session, row, at)  # the check run says the cancel was asked while jobs stop
    stopping = sum(1 for job in jobs if job.cancel_requested_at is not None and job.finished_at is None)
    return Cancelled(not asked_before, row.state, row.conclusion, tuple(ended), stopping)
