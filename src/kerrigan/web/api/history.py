"""History: ``GET /api/v1/sessions`` (filtered, newest first, cursor paging), ``/sessions/{id}`` with its jobs
and attempts, ``/jobs/{id}`` (with the files it uploaded), ``/jobs/{id}/output`` (the raw log),
``/jobs/{id}/console`` (its board's console, a log of its own),
``/jobs/{id}/files/{file}`` (one uploaded file) and ``/devices/{id}/jobs``.

Each answers only what the caller may read (:mod:`kerrigan.web.reading`): a list leaves out the sessions
and jobs of repositories the caller may not read on GitHub, and one of them read by its id is a 404, the
same as one that does not exist.

A list answers ``{"items": [...], "next_cursor": "..." | null}``. A cursor is opaque to clients and bound to
the filters it was made for: sent with other filters, it is refused (400 naming ``cursor``) rather than
silently paging a different list. An unknown query parameter is a 400 naming it.
"""

from __future__ import annotations

import enum
import hashlib
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from aiohttp import web
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.instants import TimeError, read_time
from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.core.log_streams import LogStream
from kerrigan.core.output_times import LineStamper
from kerrigan.store.artifacts import ArtifactInfo, artifacts_of
from kerrigan.store.history import (
    JobEntry,
    Position,
    SessionEntry,
    SessionFilters,
    device_jobs,
    job_detail,
    list_sessions,
    session_detail,
    timed_output_chunks,
)
from kerrigan.store.models import DeviceRow
from kerrigan.web import short_ids
from kerrigan.web.api.cursors import binding, make_cursor, not_ours, read_cursor
from kerrigan.web.auth import reader
from kerrigan.web.downloads import send_job_file
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
SESSION_FILTERS: Final = ("repository", "branch", "workflow", "state", "conclusion", "device", "since")
E = TypeVar("E", bound=enum.StrEnum)
PAGING: Final = ("limit", "cursor")
MAX_PK: Final = 2**63  # a cursor's row id past what a BIGINT holds is not one of ours


@dataclass(frozen=True, slots=True)
class ListQuery:
    """A list request read and checked: its filters, page size and where it resumes."""

    filters: SessionFilters
    limit: int
    after: Position | None
    binding: str  # what a cursor of this query carries: a digest of its filters
    before: Position | None = None

    def cursor(self, position: Position | None, *, backwards: bool = False) -> str | None:
        """The opaque cursor resuming this query after ``position`` (``backwards``: the page before it)."""
        if position is None:
            return None
        place: dict[str, Any] = {"t": position.created_at.isoformat(), "p": position.pk}
        if backwards:
            place["b"] = 1
        return make_cursor(self.binding, place)


def parse_since(text: str, field: str = "since") -> datetime:
    """An ISO 8601 time with a zone (``2026-12-01T09:00:00Z``); anything else is a 400 naming ``field``."""
    try:
        return read_time(text)
    except TimeError as exc:
        raise bad_request(f"{field} {exc}", field=field) from None


def _limit(text: str | None) -> int:
    if not text:  # absent, or a form's empty field
        return DEFAULT_LIMIT
    if re.fullmatch(r"[0-9]{1,4}", text) is None or not 1 <= int(text) <= MAX_LIMIT:
        raise bad_request(f"limit must be a whole number from 1 to {MAX_LIMIT}", field="limit")
    return int(text)


def _position(cursor: str, bound: str) -> tuple[Position, bool]:
    """Where ``cursor`` resumes, and whether it pages backwards."""
    raw = read_cursor(cursor, bound)
    try:
        at, pk = datetime.fromisoformat(raw["t"]), int(raw["p"])
        backwards = raw.get("b") == 1
        if at.tzinfo is None or not 0 <= pk < MAX_PK:
            raise ValueError(at)
        at = at.astimezone(UTC)
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError):
        raise not_ours() from None
    return Position(at, pk), backwards


def _member(kind: type[E], text: str | None, field: str) -> E | None:
    """The member of ``kind`` whose value ``text`` is (None: not given); anything else is a 400."""
    if text is None:
        return None
    try:
        return kind(text)
    except ValueError:
        raise bad_request(f"{field} must be one of {', '.join(m.value for m in kind)}", field=field) from None


def read_query(
    query: Mapping[str, str], scope: str, allowed: Collection[str], *, ignore: Collection[str] = ()
) -> ListQuery:
    """Check a list's query string: only ``allowed`` filters (plus ``limit`` and ``cursor``), each once."""
    given: dict[str, str] = {}
    for name, value in query.items():
        if name in ignore:
            continue
        if name not in allowed and name not in PAGING:
            known = ", ".join((*allowed, *PAGING))
            raise bad_request(f"unknown filter {name!r}; known: {known}", field=name)
        if name in given:
            raise bad_request(f"{name} may be given once", field=name)
        given[name] = value
    filters = {name: value for name, value in given.items() if name in allowed and value != ""}
    state = _member(SessionState, filters.get("state"), "state")
    conclusion = _member(Conclusion, filters.get("conclusion"), "conclusion")
    since = parse_since(filters["since"]) if "since" in filters else None
    bound = binding(scope, filters)
    cursor = given.get("cursor")
    position, backwards = _position(cursor, bound) if cursor else (None, False)
    return ListQuery(
        filters=SessionFilters(
            repository=filters.get("repository"),
            branch=filters.get("branch"),
            workflow=filters.get("workflow"),
            state=state,
            conclusion=conclusion,
            device=filters.get("device"),
            since=since,
        ),
        limit=_limit(given.get("limit")),
        after=None if backwards else position,
        before=position if backwards else None,
        binding=bound,
    )


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def job_json(job: JobEntry, files: list[ArtifactInfo] | None = None) -> dict[str, Any]:
    """A job in the API: its attempt, where and when it ran, how it ended; with ``files``, the files it
    uploaded (``artifacts.upload``), each with its size and where to download it (or the note saying why it
    was not kept)."""
    body: dict[str, Any] = {
        "id": job.id,
        "session": job.session_id,
        "repository": job.repository,
        "workflow": job.workflow,
        "task": job.task_id,
        "state": job.state,
        "attempt": job.attempt,
        "retry_of": job.retry_of,
        "failure_class": job.failure_class,
        "reason": job.reason,
        "detail": job.detail,
        "device": job.device_id,
        "host": job.host,
        "boardless": job.boardless,
        "exit_status": job.exit_status,
        "created_at": _time(job.created_at),
        "started_at": _time(job.started_at),
        "finished_at": _time(job.finished_at),
        "output_bytes": job.log_bytes,
        "output_url": f"/api/v1/jobs/{job.id}/output",
    }
    if files is not None:
        body["files"] = [
            {
                "id": item.pk,
                "path": item.path,
                "size": item.size,
                "url": None if item.note else f"/api/v1/jobs/{job.id}/files/{item.pk}",
                "note": item.note,
            }
            for item in files
        ]
    return body


def session_json(
    entry: SessionEntry, *, with_jobs: bool = False, files: Mapping[int, list[ArtifactInfo]] | None = None
) -> dict[str, Any]:
    """A session in the API; with its jobs (every attempt) when asked, and each job's uploaded files when
    ``files`` holds them."""
    body: dict[str, Any] = {
        "id": entry.id,
        "repository": entry.repository,
        "branch": entry.branch,
        "workflow": entry.workflow,
        "commit": entry.head_sha,
        "event": entry.event,
        "state": entry.state,
        "conclusion": entry.conclusion,
        "cancelled_by": entry.cancelled_by,
        "cancel_reason": entry.cancel_reason,
        "devices": list(entry.devices),
        "created_at": _time(entry.created_at),
        "updated_at": _time(entry.updated_at),
        "started_at": _time(entry.started_at),
        "finished_at": _time(entry.finished_at),
        "duration_s": entry.duration_s,
        "url": f"/sessions/{entry.id}",
    }
    if with_jobs:
        body["jobs"] = [job_json(job, None if files is None else files.get(job.id, [])) for job in entry.jobs]
    return body


def _etag(body: Mapping[str, Any]) -> str:
    return '"' + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:20] + '"'


def _read(request: web.Request, body: Mapping[str, Any]) -> web.Response:
    """A read with an ETag; a client that already has this version gets a 304."""
    etag = _etag(body)
    if etag in {tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")}:
        return web.Response(status=304, headers={"ETag": etag})
    return web.json_response(body, headers={"ETag": etag})


def _job_id(request: web.Request) -> int:
    text = request.match_info["job_id"]
    if re.fullmatch(r"[0-9]{1,18}", text) is None:
        raise ApiError(404, "not_found", f"no job {text[:40]!r}: job ids are whole numbers")
    return int(text)


@routes.get("/sessions")
async def sessions_index(request: web.Request) -> web.Response:
    """Sessions newest first, by ``repository``, ``branch``, ``workflow``, ``state``, ``conclusion``,
    ``device`` (a job ran there) and ``since``; ``limit`` (1-500, default 50) and ``cursor``."""
    principal = await reader(request)
    query = read_query(request.query, "sessions", SESSION_FILTERS)
    filters = replace(
        query.filters, readable=await read_access(request, principal).all_readable(query.filters.repository)
    )
    async with request.config_dict[DATABASE].sessions() as session:
        page = await list_sessions(
            session, filters, limit=query.limit, after=query.after, before=query.before
        )
    return web.json_response(
        {"items": [session_json(entry) for entry in page.items], "next_cursor": query.cursor(page.next)}
    )


@routes.get("/sessions/{session_id}")
async def session_read(request: web.Request) -> web.Response:
    """One session with its jobs, each attempt its own."""
    principal = await reader(request)
    session_id = await short_ids.session_id(request, request.match_info["session_id"])
    async with request.config_dict[DATABASE].sessions() as session:
        entry = await session_detail(session, session_id)
        files = await artifacts_of(session, [job.id for job in entry.jobs]) if entry is not None else {}
    missing = ApiError(404, "not_found", f"no session {session_id[:40]!r}")
    if entry is None:
        raise missing
    await read_access(request, principal).check(entry.repository, missing)
    return _read(request, session_json(entry, with_jobs=True, files=files))


@routes.get("/jobs/{job_id}")
async def job_read(request: web.Request) -> web.Response:
    """One job."""
    job = await _readable_job(request)
    async with request.config_dict[DATABASE].sessions() as session:
        files = (await artifacts_of(session, [job.id])).get(job.id, [])
    return _read(request, job_json(job, files))


@routes.get("/jobs/{job_id}/files/{file_id}")
async def job_file(request: web.Request) -> web.StreamResponse:
    """One file the job uploaded, streamed as an attachment (``application/octet-stream``), to a reader of
    its repository."""
    job = await _readable_job(request)
    return await send_job_file(request, job.id, request.match_info["file_id"])


@routes.get("/jobs/{job_id}/output")
async def job_output(request: web.Request) -> web.StreamResponse:
    """The job's whole stored output as plain text, written chunk by chunk as it is read."""
    job = await _readable_job(request)
    async with request.config_dict[DATABASE].sessions() as session:
        return await stream_log(request, session, job.id)


@routes.get("/jobs/{job_id}/console")
async def job_console(request: web.Request) -> web.StreamResponse:
    """The job's whole stored console (its board's) as plain text, written chunk by chunk as it is read;
    empty for a job whose runner sent none."""
    job = await _readable_job(request)
    async with request.config_dict[DATABASE].sessions() as session:
        return await stream_log(request, session, job.id, LogStream.CONSOLE)


async def _readable_job(request: web.Request) -> JobEntry:
    """The job of the path, when the caller may read its repository; else the 404 of no such job."""
    principal = await reader(request)
    job_id = _job_id(request)
    async with request.config_dict[DATABASE].sessions() as session:
        job = await job_detail(session, job_id)
    missing = ApiError(404, "not_found", f"no job {job_id}")
    if job is None:
        raise missing
    await read_access(request, principal).check(job.repository, missing)
    return job


async def stream_log(
    request: web.Request, session: AsyncSession, job_pk: int, stream: LogStream = LogStream.OUTPUT
) -> web.StreamResponse:
    """Answer with job ``job_pk``'s whole stored output (or console) as ``text/plain``, written chunk by chunk
    as it is read (the cut notice last, when it was cut): the API's and the session page's raw log. With
    ``?timestamps=true`` each line starts with when it reached the server (:mod:`kerrigan.core.output_times`);
    any other query parameter, or another value, is a 400 naming it."""
    timestamps = _timestamps(request)
    response = web.StreamResponse(headers={"Cache-Control": "no-store"})
    response.content_type = "text/plain"
    response.charset = "utf-8"
    await response.prepare(request)
    stamper = LineStamper()
    async for chunk, received_at in timed_output_chunks(session, job_pk, stream):
        await response.write((stamper.feed(chunk, received_at) if timestamps else chunk).encode())
    await response.write_eof()
    return response


def _timestamps(request: web.Request) -> bool:
    for name in request.query:
        if name != "timestamps":
            raise bad_request(f"unknown parameter {name[:40]!r}; known: timestamps", field=name[:40])
    value = request.query.get("timestamps", "false")
    if value not in ("true", "false"):
        raise bad_request("timestamps must be true or false", field="timestamps")
    return value == "true"


@routes.get("/devices/{device_id}/jobs")
async def device_jobs_index(request: web.Request) -> web.Response:
    """The jobs a device ran, newest first (those of repositories the caller may read); ``limit`` and
    ``cursor`` as ``/sessions``."""
    principal = await reader(request)
    device_id = request.match_info["device_id"]
    query = read_query(request.query, f"devices/{device_id}/jobs", ())
    if query.before is not None:
        raise bad_request(
            "a device's jobs page forwards only: start again without the cursor", field="cursor"
        )
    readable = await read_access(request, principal).all_readable()
    async with request.config_dict[DATABASE].sessions() as session:
        page = await device_jobs(session, device_id, limit=query.limit, after=query.after, readable=readable)
        if not page.items and query.after is None:
            known = await session.scalar(select(DeviceRow.pk).where(DeviceRow.id == device_id))
            if known is None:
                raise ApiError(404, "not_found", f"no device {device_id[:63]!r}")
    return web.json_response(
        {"items": [job_json(job) for job in page.items], "next_cursor": query.cursor(page.next)}
    )


def filters_of(query: SessionFilters) -> dict[str, Any]:
    """The filters as the pages show them back in their form (empty strings for open ones)."""
    return {name: ("" if value is None else value) for name, value in asdict(query).items()}
