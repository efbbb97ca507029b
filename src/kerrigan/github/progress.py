"""Check runs follow their session's jobs: ``in_progress`` when the first starts, ``completed`` at the end.

Each report sends the whole state, so a report that fails (GitHub unreachable) is made good by the next.
"""

from __future__ import annotations

import logging

from kerrigan.core.sessions import Conclusion, SessionState
from kerrigan.github.checks import JobProgress, SessionContext, progress_body
from kerrigan.github.sessions import GitHubApp
from kerrigan.store.jobs import output_tail, session_jobs_of
from kerrigan.store.sessions import get_session, update_session

log = logging.getLogger(__name__)


async def report_progress(app: GitHubApp, job_pk: int) -> None:
    """Bring the check run of this job's session up to date."""
    async with app.database.sessions() as db:
        found = await session_jobs_of(db, job_pk)
        if found is None:
            return
        session_id, jobs = found
        session = await get_session(db, session_id)
        progress = [
            JobProgress(
                job.task_id,
                job.state,
                job.device_id,
                job.host,
                job.exit_status,
                job.reason,
                (job.finished_at - job.started_at).total_seconds()
                if job.started_at and job.finished_at
                else None,
                await output_tail(db, job.pk) if job.finished_at else "",
                job.detail,
            )
            for job in jobs
        ]
    if session.check_run_id is None or session.installation_id is None:
        return
    context = SessionContext(
        session.id, app.details_url(session.id), session.head_sha, session.event, session.head_branch
    )
    body = progress_body(session.workflow, context, progress)
    repo = app.repository(session.installation_id, session.repository)
    await repo.update_check_run(session.check_run_id, body)
    status = body.fields["status"]
    state = {"completed": SessionState.COMPLETED, "in_progress": SessionState.IN_PROGRESS}.get(
        status, SessionState.QUEUED
    )
    async with app.database.sessions() as db, db.begin():
        await update_session(
            db,
            session.id,
            app.database.clock(),
            state=state,
            conclusion=Conclusion(body.conclusion).value if body.conclusion else None,
        )
