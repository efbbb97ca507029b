"""A session's check run as a pure function of the session as stored (``store.check_runs.Projection``).

Until a job starts, ends or is sent back to the queue for a reason, GitHub shows the resolution (the body
made when the session was resolved, kept with it); a session its resolution completed (an invalid manifest,
a task no device can ever run) keeps showing it. After that the check run shows the jobs, with the
session's own state and conclusion.
"""

from __future__ import annotations

from kerrigan.github.checks import (
    CheckRunBody,
    JobProgress,
    SessionContext,
    body_from_json,
    progress_body,
    short_body,
)
from kerrigan.store.check_runs import Projection


def context_of(view: Projection, details_url: str) -> SessionContext:
    """Where the session comes from, as its check run says."""
    session = view.session
    return SessionContext(session.id, details_url, session.head_sha, session.event, session.head_branch)


def render(view: Projection, details_url: str) -> CheckRunBody:
    """The body GitHub should show for ``view`` (its session's ``version``)."""
    stored = view.resolution_body
    if stored is not None:
        resolved = body_from_json(stored)
        # A job started, ended, or was sent back to the queue for a reason (a full disk, a lost runner).
        jobs_moved = any(
            job.record.started_at or job.record.finished_at or job.record.reason for job in view.jobs
        )
        if resolved.fields.get("status") == "completed" or not jobs_moved:
            return resolved
    progress = [
        JobProgress(
            job.record.task_id,
            job.record.state,
            job.record.device_id,
            job.record.host,
            job.record.exit_status,
            job.record.reason,
            (job.record.finished_at - job.record.started_at).total_seconds()
            if job.record.started_at and job.record.finished_at
            else None,
            job.output_tail,
            job.record.detail,
        )
        for job in view.jobs
    ]
    session = view.session
    return progress_body(
        session.workflow, context_of(view, details_url), progress, session.state, session.conclusion
    )


def render_short(view: Projection, details_url: str, refusal: str) -> CheckRunBody:
    """The short body sent when GitHub refuses the full one: the state and a link to the session page."""
    session = view.session
    return short_body(
        session.workflow, context_of(view, details_url), session.state, session.conclusion, refusal
    )
