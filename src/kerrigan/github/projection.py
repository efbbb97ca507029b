"""A session's check run as a pure function of the session as stored (``store.check_runs.Projection``).

Until a job starts, ends or is sent back to the queue for a reason, GitHub shows the resolution (the body
made when the session was resolved, kept with it); a session its resolution completed (an invalid manifest,
a task no device can ever run) keeps showing it. After that the check run shows the jobs, with the
session's own state and conclusion.
"""

from __future__ import annotations

from typing import Final

from kerrigan.core.holds import hold_line
from kerrigan.core.lifecycle import retry_cause
from kerrigan.core.results import summarise
from kerrigan.github.checks import (
    CheckRunBody,
    JobFile,
    JobProgress,
    SessionContext,
    body_from_json,
    progress_body,
    short_body,
)
from kerrigan.store.check_runs import Projection

MAX_HOLD_LINES: Final = 10  # the newest holds a check run lists


def context_of(view: Projection, details_url: str) -> SessionContext:
    """Where the session comes from, as its check run says."""
    session = view.session
    return SessionContext(session.id, details_url, session.head_sha, session.event, session.head_branch)


def cancel_reason_of(view: Projection) -> str | None:
    """Why the session was cancelled (``cancelled by hubot``, ``superseded by 3f2a1b0``), when it was."""
    return view.cancel_reason or None


def progress_of(view: Projection, details_url: str = "") -> list[JobProgress]:
    """Each job as the check run shows it, with its attempt and what ended the attempt it retries."""
    records = {job.record.pk: job.record for job in view.jobs}
    attempts = view.session.retry.max_attempts
    base = details_url.rstrip("/")
    progress = []
    for job in view.jobs:
        record = job.record
        before = records.get(record.retry_of) if record.retry_of is not None else None
        after = None
        if before is not None:  # where it ran: its device, or its runner host without a board
            ran_on = before.host if before.boardless else before.device_id
            after = retry_cause(before.reason, before.exit_status, ran_on)
        progress.append(
            JobProgress(
                record.task_id,
                record.state,
                record.device_id,
                record.host,
                record.exit_status,
                record.reason,
                (record.finished_at - record.started_at).total_seconds()
                if record.started_at and record.finished_at
                else None,
                job.output_tail,
                record.detail,
                record.attempt,
                attempts,
                after,
                job.suspect,
                summarise(job.results) if job.results else None,
                tuple(
                    JobFile(file.path, f"{base}/jobs/{record.pk}/files/{file.pk}", file.size, file.note)
                    for file in job.files
                ),
                record.roles,
                record.boardless,
                record.suspect_failure,
                job.console_tail,
            )
        )
    return progress


def render(view: Projection, details_url: str) -> CheckRunBody:
    """The body GitHub should show for ``view`` (its session's ``version``)."""
    stored = view.resolution_body
    cancel_reason = cancel_reason_of(view)
    if stored is not None and cancel_reason is None:
        resolved = body_from_json(stored)
        # A job started, ended, or was sent back to the queue for a reason (a full disk, a lost runner).
        jobs_moved = any(
            job.record.started_at or job.record.finished_at or job.record.reason for job in view.jobs
        )
        if resolved.fields.get("status") == "completed" or not jobs_moved:
            return resolved
    session = view.session
    return progress_body(
        session.workflow,
        context_of(view, details_url),
        progress_of(view, details_url),
        session.state,
        session.conclusion,
        cancel_reason=cancel_reason,
        holds=holds_of(view),
    )


def holds_of(view: Projection) -> list[str]:
    """Who holds which failed job's board, in words, and why the last click held nothing."""
    lines = [hold_line(hold) for hold in view.holds[-MAX_HOLD_LINES:]]
    return [*lines, view.hold_note] if view.hold_note else lines


def render_short(view: Projection, details_url: str, refusal: str) -> CheckRunBody:
    """The short body sent when GitHub refuses the full one: the state and a link to the session page."""
    session = view.session
    return short_body(
        session.workflow,
        context_of(view, details_url),
        session.state,
        session.conclusion,
        refusal,
        cancel_reason=cancel_reason_of(view),
    )
