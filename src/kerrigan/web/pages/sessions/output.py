"""A job's output on the web: a page at a time (``/sessions/{id}/jobs/{job}/output?page=<n>``, each page at
most ``CHUNKS_PER_PAGE`` chunks), whole as plain text (``/sessions/{id}/jobs/{job}/output.txt``), and
streamed while it runs; its board's console whole (``console.txt``) and streamed (``console/stream``) alike.

``/sessions/{id}/jobs/{job}/output/stream`` is a stream of server-sent events, each a chunk stored after the
last one the page has, read from the store every ``STREAM_POLL_S`` (no signal fires for output), and an
``end`` event once the job has ended; ``static/session.js`` appends them. A connection sends at most
``STREAM_BYTES`` and lasts at most ``STREAM_S``, then closes: the browser reconnects from the last chunk it
got (``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

from aiohttp import web

from kerrigan.core.log_streams import LogStream
from kerrigan.core.runner_fields import size_text
from kerrigan.store.session_pages import output_page, output_since, session_job_pk, session_jobs
from kerrigan.web.api.history import stream_log
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.rendering import render
from kerrigan.web.pages.sessions.access import readable_session, session_or_404
from kerrigan.web.pages.sessions.job_views import CHUNKS_PER_PAGE, PAGE_BYTES_AT_MOST, cut_text
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

# A line reaches the page within a second (issue 29): the runner sends every 0.5 s, the page reads this
# often (two indexed reads a poll; 1.0 s made the p95 1.5 s, benchmarks/bench_console_latency.py).
STREAM_POLL_S: Final = 0.25
STREAM_BATCH: Final = 8  # chunks read at a time
STREAM_BYTES: Final = 4 * 1024 * 1024  # a connection's output at most; the browser reconnects for more
STREAM_S: Final = 600.0


def page_number(value: str | None) -> int | None:
    """A page or job number of the path or query: digits, or None."""
    return (
        int(value) if value is not None and value.isascii() and value.isdigit() and len(value) < 10 else None
    )


def output_path(session_id: str, job_pk: int, page: int | None = None) -> str:
    """Where a job's output is, a page at a time (the newest without ``page``)."""
    path = f"/sessions/{quote(session_id)}/jobs/{job_pk}/output"
    return path + (f"?page={page}" if page is not None else "")


def raw_log_path(session_id: str, job_pk: int, stream: LogStream = LogStream.OUTPUT) -> str:
    """Where a job's whole log (its output, or its console) is, as plain text."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/{stream.value}.txt"


def file_path(session_id: str, job_pk: int, file_pk: int) -> str:
    """Where a job's uploaded file (``artifacts.upload``) is downloaded (:mod:`.job_files`)."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/files/{file_pk}"


def stream_path(session_id: str, job_pk: int, stream: LogStream = LogStream.OUTPUT) -> str:
    """Where a running job's new output (or console) streams from (server-sent events)."""
    return f"/sessions/{quote(session_id)}/jobs/{job_pk}/{stream.value}/stream"


def sse_event(data: Mapping[str, Any], *, event: str | None = None, event_id: int | None = None) -> bytes:
    """One server-sent event whose data is ``data`` as JSON: one line, whatever the output holds (a raw
    newline or carriage return in it would end the event's field)."""
    lines = [f"event: {event}"] if event else []
    if event_id is not None:
        lines.append(f"id: {event_id}")
    lines.append("data: " + json.dumps(data, ensure_ascii=True))
    return ("\n".join(lines) + "\n\n").encode()


@routes.get("/sessions/{session_id}/jobs/{job_id}/output")
async def job_output(request: web.Request) -> web.Response:
    """A job's output a page at a time (``?page=<n>``, 1 the oldest, the newest by default), each page at
    most ``CHUNKS_PER_PAGE`` chunks, with links to the first, previous, next and last pages."""
    principal = await page_reader(request)
    session_id = request.match_info["session_id"]
    await readable_session(request, principal, session_id)
    job_pk = page_number(request.match_info["job_id"])
    database = request.config_dict[DATABASE]
    async with database.sessions() as db:
        session = await session_or_404(db, session_id)
        job = next((job for job in await session_jobs(db, session_id) if job.pk == job_pk), None)
        if job is None:
            raise ApiError(
                404, "not_found", f"Session {session_id} has no job {request.match_info['job_id']}."
            )
        page = await output_page(
            db, job.pk, job.chunks, page_number(request.query.get("page")), CHUNKS_PER_PAGE
        )

    def page_link(number: int) -> str:
        return output_path(session_id, job.pk, number)

    return await render(
        request,
        "session_output.html",
        {
            "session": session,
            "short_id": session_id[:8],
            "session_link": f"/sessions/{quote(session_id)}",
            "job": job,
            "output": page,
            "output_size": size_text(job.output_bytes),
            "page_size": size_text(PAGE_BYTES_AT_MOST),
            "cut": cut_text(job.output_cut),
            "page_link": page_link,
        },
    )


async def job_of(request: web.Request) -> tuple[str, int]:
    """The session id and job of the path, for a reader of its repository (else the session's 404); 404
    when the job is not one of that session's."""
    session_id = request.match_info["session_id"]
    await readable_session(request, await page_reader(request), session_id)
    job_pk = page_number(request.match_info["job_id"])
    async with request.config_dict[DATABASE].sessions() as db:
        found = await session_job_pk(db, session_id, job_pk) if job_pk is not None else None
    if found is None:
        job = request.match_info["job_id"][:20]
        raise ApiError(404, "not_found", f"Session {session_id} has no job {job}.")
    return session_id, found


@routes.get("/sessions/{session_id}/jobs/{job_id}/output.txt")
async def job_raw_log(request: web.Request) -> web.StreamResponse:
    """A job's whole stored output as plain text, written chunk by chunk as it is read (the cut notice
    last, when it was cut): what the REST ``/api/v1/jobs/{id}/output`` serves, for the page's readers."""
    _, job_pk = await job_of(request)
    async with request.config_dict[DATABASE].sessions() as db:
        return await stream_log(request, db, job_pk)


@routes.get("/sessions/{session_id}/jobs/{job_id}/console.txt")
async def job_raw_console(request: web.Request) -> web.StreamResponse:
    """A job's whole stored console as plain text: what ``/api/v1/jobs/{id}/console`` serves."""
    _, job_pk = await job_of(request)
    async with request.config_dict[DATABASE].sessions() as db:
        return await stream_log(request, db, job_pk, LogStream.CONSOLE)


def _after(request: web.Request) -> int:
    """The last chunk the page has: the browser's ``Last-Event-ID`` on a reconnect, else ``?after=``."""
    for raw in (request.headers.get("Last-Event-ID"), request.query.get("after")):
        if raw is not None and raw.lstrip("-").isascii() and raw.lstrip("-").isdigit() and len(raw) < 12:
            return max(int(raw), -1)
    return -1


@routes.get("/sessions/{session_id}/jobs/{job_id}/output/stream")
async def job_output_stream(request: web.Request) -> web.StreamResponse:
    """The job's output after the chunk the page has, as server-sent events: one ``message`` a chunk
    (``{"seq", "data", "evicted"}``, its ``id`` the chunk's number), then ``end`` (``{"state", "cut"}``)
    once the job has ended and every chunk was sent. At most ``STREAM_BYTES`` and ``STREAM_S`` a
    connection: then it closes without ``end``, and the browser reconnects from where it was."""
    return await _log_stream(request, LogStream.OUTPUT)


@routes.get("/sessions/{session_id}/jobs/{job_id}/console/stream")
async def job_console_stream(request: web.Request) -> web.StreamResponse:
    """The job's console after the chunk the page has, as :func:`job_output_stream` sends its output."""
    return await _log_stream(request, LogStream.CONSOLE)


async def _log_stream(request: web.Request, stream: LogStream) -> web.StreamResponse:
    _, job_pk = await job_of(request)
    after = _after(request)
    database = request.config_dict[DATABASE]
    response = web.StreamResponse(
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"}  # no proxy holds events back
    )
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    await response.write(b"retry: 2000\n\n")
    loop = asyncio.get_running_loop()
    until = loop.time() + STREAM_S
    sent = 0
    while sent < STREAM_BYTES and loop.time() < until:
        # A database session per read: none is held while the stream waits.
        async with database.sessions() as db:
            since = await output_since(db, job_pk, after, STREAM_BATCH, stream)
        for chunk in since.chunks:
            event = {"seq": chunk.seq, "data": chunk.data, "evicted": chunk.evicted}
            await response.write(sse_event(event, event_id=chunk.seq))
            after = chunk.seq
            sent += len(chunk.data.encode())
        if since.ended and len(since.chunks) < STREAM_BATCH:  # every chunk it stored was sent
            await response.write(sse_event({"state": since.state, "cut": since.cut}, event="end"))
            break
        if len(since.chunks) < STREAM_BATCH:
            await asyncio.sleep(STREAM_POLL_S)
    await response.write_eof()
    return response
