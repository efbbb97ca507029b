"""The runner protocol's results upload: a JUnit XML file a job wrote, parsed here and kept with the job.

``POST /api/runner/v1/jobs/{job_id}/results?path=results/unit.xml&size=N&workspace=/abs/dir`` with the
file's bytes as the body (at most :data:`MAX_FILE_BYTES`; ``size`` is the whole file's, when the agent sent
only its beginning). The runner sends each file once its command has ended, before it reports the end.
The parse (``kerrigan.core.results``, defusedxml: no DTD, no entity) runs in a thread, so a big file never
holds the event loop; a malformed file is stored with its problem and answered 200, never refused. A job
keeps at most :data:`MAX_FILES` files; the answer counts the file's tests.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from kerrigan.core.job_files import RESULTS_MAX_BYTES, RESULTS_MAX_FILES
from kerrigan.core.manifest.paths import glob_problem
from kerrigan.core.printable import is_printable
from kerrigan.core.results import Locator, ParseLimits, parse_junit
from kerrigan.core.runner_fields import MAX_RESOURCE
from kerrigan.dispatch.protocol import ProtocolError, RunnerProtocol, error_response, read_bounded
from kerrigan.store import jobs
from kerrigan.store.results import result_count, store_results

# What of one file is read and kept: the first 16 MiB; 50,000 tests; the text of 200 failures.
LIMITS: Final = ParseLimits(max_bytes=RESULTS_MAX_BYTES, max_cases=50_000, max_detailed=200)
MAX_FILE_BYTES: Final = RESULTS_MAX_BYTES
MAX_FILES: Final = RESULTS_MAX_FILES
MAX_WORKSPACE: Final = 4096


class ResultsUpload:
    """Receives results files for the runner protocol (a runner host's token, as its other calls)."""

    def __init__(self, protocol: RunnerProtocol) -> None:
        self.protocol = protocol
        self.database = protocol.database

    def routes(self) -> list[web.RouteDef]:
        """The route, beside the protocol's own."""
        return [web.post("/api/runner/v1/jobs/{job_id}/results", self.receive)]

    async def receive(self, request: web.Request) -> web.Response:
        """Parse and keep one results file; its counts and problems."""
        try:
            host = await self.protocol.host_of(request)
            job_id = self.protocol.job_id_of(request)
            path = workspace_path(request.query.get("path"))
            size = declared_size(request.query.get("size"))
            workspace = request.query.get("workspace", "")
            if len(workspace) > MAX_WORKSPACE or not is_printable(workspace):
                raise ProtocolError(400, "invalid", "workspace is an absolute folder", "workspace")
            data = await _read(request)
            report = await asyncio.to_thread(
                parse_junit, data, path, limits=LIMITS, locator=Locator(workspace), size=size
            )
            try:
                async with self.database.writing(), self.database.sessions() as session, session.begin():
                    if await result_count(session, job_id, excluding=path) >= MAX_FILES:
                        raise ProtocolError(
                            409, "too_many", f"a job keeps at most {MAX_FILES} results files", "path"
                        )
                    await store_results(session, job_id, host, report, self.database.clock())
            except jobs.NotYoursError as exc:
                raise ProtocolError(404, "not_found", str(exc)) from None
        except ProtocolError as exc:
            return error_response(exc)
        counts = report.counts
        return web.json_response(
            {
                "path": path,
                "tests": counts.total,
                "failed": counts.failed,
                "errors": counts.errors,
                "problems": [str(problem) for problem in report.problems],
            }
        )


def workspace_path(text: str | None) -> str:
    """A file's path in the workspace, as a call names it (no glob, no `..`, not absolute), or a 400."""
    if not text:
        raise ProtocolError(400, "invalid", "path names the file in the workspace", "path")
    problem = glob_problem(text) if len(text) <= 500 and is_printable(text) else "is not a workspace path"
    if problem is not None or any(mark in text for mark in "*?["):
        raise ProtocolError(400, "invalid", f"path {problem or 'is a path, not a glob'}", "path")
    return text


def declared_size(text: str | None) -> int | None:
    """The whole size a call declares for its file, or a 400."""
    if text is None:
        return None
    if not (text.isascii() and text.isdigit() and len(text) <= 19) or int(text) > MAX_RESOURCE:
        raise ProtocolError(400, "invalid", "size is the file's size in bytes", "size")
    return int(text)


async def _read(request: web.Request) -> bytes:
    too_large = ProtocolError(
        413, "too_large", f"a results file is sent as its first {MAX_FILE_BYTES} bytes at most", "size"
    )
    return await read_bounded(request, MAX_FILE_BYTES, too_large)
