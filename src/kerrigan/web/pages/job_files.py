"""A job's uploaded files (``artifacts.upload``), downloaded from its session page:
``/sessions/{id}/jobs/{job}/files/{file}`` streams the file a chunk at a time, as an attachment named
after its path (a reader never has a job's file rendered as a page of Kerrigan's)."""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from kerrigan.store.artifacts import artifact, artifact_data
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.sessions import job_of
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()


@routes.get("/sessions/{session_id}/jobs/{job_id}/files/{file_id}")
async def job_file(request: web.Request) -> web.StreamResponse:
    """One uploaded file of the job, streamed (to a reader of its repository: :func:`job_of`)."""
    _, job_pk = await job_of(request)
    raw = request.match_info["file_id"]
    database = request.config_dict[DATABASE]
    number = int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 12 else None
    async with database.sessions() as db:
        found = await artifact(db, job_pk, number) if number is not None else None
    if found is None:
        raise ApiError(404, "not_found", f"Job {job_pk} has no file {raw[:20]}.")
    name = found.path.rsplit("/", 1)[-1]
    response = web.StreamResponse(
        headers={
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
            "Content-Length": str(found.size),
            "X-Content-Type-Options": "nosniff",
        }
    )
    await response.prepare(request)
    async for chunk in artifact_data(database, found.pk):  # a database session a chunk
        await response.write(chunk)
    await response.write_eof()
    return response
