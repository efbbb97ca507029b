"""A job's uploaded files (``artifacts.upload``), downloaded from its session page:
``/sessions/{id}/jobs/{job}/files/{file}`` streams the file a chunk at a time, as an attachment named
after its path (a reader never has a job's file rendered as a page of Kerrigan's)."""

from __future__ import annotations

from aiohttp import web

from kerrigan.web.downloads import send_job_file
from kerrigan.web.pages.sessions.output import job_of

routes = web.RouteTableDef()


@routes.get("/sessions/{session_id}/jobs/{job_id}/files/{file_id}")
async def job_file(request: web.Request) -> web.StreamResponse:
    """One uploaded file of the job, streamed (to a reader of its repository: :func:`job_of`)."""
    _, job_pk = await job_of(request)
    return await send_job_file(request, job_pk, request.match_info["file_id"])
