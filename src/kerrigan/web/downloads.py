"""A job's uploaded file (``artifacts.upload``) sent to a reader: streamed a chunk at a time, as an attachment
named after its path, so a file a job wrote is never rendered as one of Kerrigan's pages. The session page's
link and the API's ``/jobs/{id}/files/{file}`` both answer this way."""

from __future__ import annotations

from urllib.parse import quote

from aiohttp import web

from kerrigan.store.artifacts import ArtifactInfo, artifact, artifact_data
from kerrigan.web.errors import ApiError
from kerrigan.web.state import DATABASE


async def send_job_file(request: web.Request, job_pk: int, file_id: str) -> web.StreamResponse:
    """Stream the job's kept file ``file_id`` (its number); a 404 naming it when the job has no such file."""
    database = request.config_dict[DATABASE]
    number = int(file_id) if file_id.isascii() and file_id.isdigit() and len(file_id) < 12 else None
    async with database.sessions() as db:
        found = await artifact(db, job_pk, number) if number is not None else None
    if found is None:
        raise ApiError(404, "not_found", f"Job {job_pk} has no file {file_id[:20]}.")
    return await _stream(request, found)


async def _stream(request: web.Request, found: ArtifactInfo) -> web.StreamResponse:
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
    async for chunk in artifact_data(request.config_dict[DATABASE], found.pk):  # a database session a chunk
        await response.write(chunk)
    await response.write_eof()
    return response
