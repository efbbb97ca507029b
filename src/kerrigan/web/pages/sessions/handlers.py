"""``/sessions/{id}``: the check run's details page, and its *Cancel* button.

The resolution shown is the one stored with the session (the ``kerrigan explain`` JSON of DESIGN.md, as it was
when the session was resolved), task by task (:mod:`.resolution_views`). Then the jobs (:mod:`.job_views`),
each with the end of its output and links to its output a page at a time, its whole log and its stream
(:mod:`.output`). A finished session's page starts with its jobs; the resolution comes below them in a
``<details>``, one click away. Without JavaScript the page shows each job's tail and reloads itself every
few seconds (a ``<meta>`` refresh inside ``<noscript>``).

Those who may cancel from the web (:mod:`kerrigan.web.api.cancel`: System Admins and the owners of a pool
the session uses) see a *Cancel* button while it has not ended: a form posting to
``/sessions/{id}/cancel`` with the CSRF token, which redirects back to the page, now saying who cancelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import quote, urlencode

from aiohttp import web
from sqlalchemy import select

from kerrigan.core.log_streams import LogStream
from kerrigan.core.matching import Outcome
from kerrigan.core.results import summarise
from kerrigan.core.runner_fields import size_text
from kerrigan.core.sessions import Session, SessionState
from kerrigan.store.artifacts import artifacts_of
from kerrigan.store.models import SessionRow
from kerrigan.store.results import results_of
from kerrigan.store.session_pages import device_facts, output_tail, session_jobs
from kerrigan.store.sessions import queue_position
from kerrigan.store.short_ids import FULL_LENGTH
from kerrigan.web import short_ids
from kerrigan.web.api.cancel import cancel_from_web, web_may_cancel
from kerrigan.web.editing import PostedForm
from kerrigan.web.pages.rendering import render
from kerrigan.web.pages.sessions.access import readable_session, session_or_404
from kerrigan.web.pages.sessions.job_views import (
    JobView,
    accounting_view,
    attempt_text,
    cut_text,
    duration,
    tail_bytes,
)
from kerrigan.web.pages.sessions.output import (
    file_path,
    output_path,
    page_number,
    raw_log_path,
    stream_path,
)
from kerrigan.web.pages.sessions.resolution_views import TaskView, bounded, named_devices, task_view
from kerrigan.web.signin import page_reader, redirect
from kerrigan.web.state import DATABASE, SETTINGS
from kerrigan.web.writers import WritersUnknownError

routes = web.RouteTableDef()

REFRESH_S: Final = 5
MAX_QUERY: Final = 200


def _link(path: str, query: Mapping[str, str], fragment: str = "", **changes: str | None) -> str:
    """``path`` with the current query changed (None removes a parameter)."""
    merged = {key: value for key, value in query.items() if key in ("q", "task", "job", "page", "refresh")}
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    search = urlencode(merged)
    return path + (f"?{search}" if search else "") + (f"#{fragment}" if fragment else "")


def _diagnostics_open(session: Session, tasks: Sequence[TaskView], query: str) -> bool:
    """Whether the scheduling diagnostics start open: for a session that has not ended, a filter asked
    for, or a task no device can run (then they are the news). A finished session opens on its jobs."""
    return (
        session.state is not SessionState.COMPLETED
        or bool(query.strip())
        or any(task.outcome is not Outcome.ELIGIBLE for task in tasks)
    )


def _refresh(session: Session, query: Mapping[str, str]) -> int | None:
    if query.get("refresh") == "0" or session.awaiting_approval:
        return None
    return REFRESH_S if session.state is not SessionState.COMPLETED else None


@routes.get("/sessions/{session_id}")
async def session_page(request: web.Request) -> web.Response:
    """A session: where it comes from, how each task resolved, and its jobs with their output."""
    principal = await page_reader(request)
    session_id = request.match_info["session_id"]
    if len(session_id) != FULL_LENGTH:  # typed short, as pages and check runs print it: to its own page
        whole = await short_ids.session_id(request, session_id)
        await readable_session(request, principal, whole)  # a session it may not read: its 404 here
        query = f"?{request.query_string}" if request.query_string else ""
        raise web.HTTPFound(f"/sessions/{whole}{query}")
    await readable_session(request, principal, session_id)
    query_text = request.query.get("q", "")[:MAX_QUERY]
    only_task = request.query.get("task") or None
    chosen_job = page_number(request.query.get("job"))
    chosen_page = page_number(request.query.get("page"))
    database = request.config_dict[DATABASE]
    async with database.sessions() as db:
        session = await session_or_404(db, session_id)
        jobs = await session_jobs(db, session_id)
        resolution = session.resolution
        facts = await device_facts(
            db, named_devices(resolution) | {job.device_id for job in jobs if job.device_id}
        )
        position = (
            await queue_position(db, session_id)
            if session.state is SessionState.QUEUED and not session.awaiting_approval
            else None
        )
        if chosen_job is not None and any(job.pk == chosen_job for job in jobs):
            # A page of output used to be shown here (``?job=&page=``): links to it still lead to it.
            raise web.HTTPFound(output_path(session_id, chosen_job, chosen_page))
        each = tail_bytes(len(jobs))
        outputs = [await output_tail(db, job.pk, job.chunks, each) for job in jobs]
        consoles = [
            await output_tail(db, job.pk, job.console_chunks, each, LogStream.CONSOLE)
            if job.console_chunks or job.console_cut
            else None
            for job in jobs
        ]
        results = await results_of(db, [job.pk for job in jobs])
        files = await artifacts_of(db, [job.pk for job in jobs])
        cancelled = (
            await db.execute(
                select(SessionRow.cancelled_by, SessionRow.cancel_reason).where(SessionRow.id == session_id)
            )
        ).one_or_none()
        try:
            may_cancel = session.state is not SessionState.COMPLETED and await web_may_cancel(
                request, db, principal, session
            )
        except WritersUnknownError:  # GitHub silent: no button; the check run's Cancel still works
            may_cancel = False
    now = database.clock()
    tasks = [
        bounded(task_view(task, facts, query_text if only_task in (None, task.id) else ""))
        for task in resolution.tasks
    ]
    job_views = [
        JobView(
            job,
            duration(job.started_at, job.finished_at, now),
            accounting_view(job.accounting),
            output,
            session_ended=session.state is SessionState.COMPLETED,
            tail_bytes=each,
            attempt_text=attempt_text(job, jobs, session.retry),
            results=summarise(results[job.pk]) if job.pk in results else None,
            files=tuple(files.get(job.pk, ())),
            console=console,
        )
        for job, output, console in zip(jobs, outputs, consoles, strict=True)
    ]
    github = request.config_dict[SETTINGS].github_url.rstrip("/")
    path = f"/sessions/{quote(session_id)}"

    def link(fragment: str = "", **changes: str | None) -> str:
        return _link(path, request.query, fragment, **changes)

    def output_link(job_pk: int, page: int | None = None) -> str:
        return output_path(session_id, job_pk, page)

    def raw_link(job_pk: int) -> str:
        return raw_log_path(session_id, job_pk)

    def stream_link(job_pk: int) -> str:
        return stream_path(session_id, job_pk)

    def console_raw_link(job_pk: int) -> str:
        return raw_log_path(session_id, job_pk, LogStream.CONSOLE)

    def console_stream_link(job_pk: int) -> str:
        return stream_path(session_id, job_pk, LogStream.CONSOLE)

    def file_link(job_pk: int, file_pk: int) -> str:
        return file_path(session_id, job_pk, file_pk)

    return await render(
        request,
        "session.html",
        {
            "session": session,
            "short_id": session_id[:8],
            "repo_url": f"{github}/{session.repository}" if session.repository else None,
            "errors": resolution.errors,
            "warnings": resolution.warnings,
            "resolved": resolution.recorded,
            "tasks": tasks,
            "jobs": job_views,
            "jobs_by_task": {view.job.task_id: view for view in job_views},
            "facts": facts,
            "position": position,
            "refresh": _refresh(session, request.query),
            "refresh_off": request.query.get("refresh") == "0",
            "filter_action": path,
            "filter_keep": {key: request.query[key] for key in ("refresh",) if key in request.query},
            "link": link,
            "output_link": output_link,
            "raw_link": raw_link,
            "stream_link": stream_link,
            "console_raw_link": console_raw_link,
            "console_stream_link": console_stream_link,
            "file_link": file_link,
            "size_text": size_text,
            "diagnostics_open": _diagnostics_open(session, tasks, query_text),
            "cut_text": cut_text,
            "cancelled_by": cancelled[0] if cancelled else None,
            "cancel_reason": cancelled[1] if cancelled else None,
            "may_cancel": may_cancel,
            "cancel_action": f"{path}/cancel",
        },
    )


@routes.post("/sessions/{session_id}/cancel")
async def cancel_session_page(request: web.Request) -> web.Response:
    """The page's *Cancel* button: sign-in and the CSRF token first, then the same rule as the API (403
    and 404 are the error page); back to the session page, which says who cancelled. An ended session is
    left as it was."""
    posted = await PostedForm.read(request)
    session_id = request.match_info["session_id"]
    await cancel_from_web(request, posted.principal, session_id)
    return redirect(f"/sessions/{quote(session_id)}")
