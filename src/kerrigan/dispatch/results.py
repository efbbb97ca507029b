"""The runner protocol's results upload: a JUnit XML file a job wrote, parsed here and kept with the job.

``POST /api/runner/v1/jobs/{job_id}/results?path=results/unit.xml&size=N&workspace=/abs/dir`` with the
file's bytes as the body (at most :data:`MAX_FILE_BYTES`; ``size`` is the whole file's, when the agent sent
only its beginning). The runner sends each file once its command has ended, before it reports the end.
The body is parsed as it arrives (``kerrigan.core.results``: no DTD, no entity, bounded in memory), each
piece in a thread, so a big file is never held whole and never holds the event loop; at most
:data:`PARSING` files are parsed at once in a process, the others' bodies wait unread. A malformed file is
stored with its problem and answered 200, never refused. A job keeps at most :data:`MAX_FILES` files; the
answer counts the file's tests.

The job's secrets are hidden in what is kept as the parser reads it: every name, message, text and problem,
and the file's path, with the values of the secrets the job was handed (read from the store for each file,
never logged). The agent masks the bytes it sends, but a file can spell a value in ways bytes do not show
(``&#118;pn…``, a CDATA section or a comment between two halves, ``&apos;``): only the parsed text has it
whole. When a secret the job was handed can no longer be read (deleted since, or its key dropped), the file's
tests are counted and nothing of their text is kept.

``&withheld=1`` (no body): the runner host did not send the file, because once parsed it would show a
secret setting of the host's devices file, which the server never sees; it is kept as a problem saying so.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from kerrigan.core.job_files import RESULTS_MAX_BYTES, RESULTS_MAX_FILES
from kerrigan.core.manifest.paths import glob_problem
from kerrigan.core.masking import Masker, SecretRefusedError
from kerrigan.core.printable import is_printable
from kerrigan.core.results import (
    UPLOAD_LIMITS,
    Counts,
    JUnitParser,
    JUnitReport,
    Locator,
    ResultsProblem,
    results_masker,
)
from kerrigan.core.runner_fields import MAX_RESOURCE
from kerrigan.dispatch.protocol import ProtocolError, RunnerProtocol
from kerrigan.store.jobs.holders import NotYoursError
from kerrigan.store.results import result_count, store_results
from kerrigan.store.secrets import SecretsKeyError, given_secrets

LIMITS: Final = UPLOAD_LIMITS  # what of one file is read and kept (kerrigan.core.results.parse)
MAX_FILE_BYTES: Final = RESULTS_MAX_BYTES
PARSING: Final = 2  # files parsed at once: each holds what its parser keeps, a few MiB at most
PIECE_BYTES: Final = 256 * 1024
MAX_FILES: Final = RESULTS_MAX_FILES
MAX_WORKSPACE: Final = 4096


class ResultsUpload:
    """Receives results files for the runner protocol (a runner host's token, as its other calls)."""

    def __init__(self, protocol: RunnerProtocol) -> None:
        self.protocol = protocol
        self.database = protocol.database
        self._parsing = asyncio.Semaphore(PARSING)

    async def _masker(self, job_id: str, host: str) -> Masker | None:
        """The masker of the secrets the job was handed (None when it was handed none)."""
        async with self.database.sessions() as session:
            values = await given_secrets(session, job_id, host, keys=self.protocol.secrets_keys)
        return results_masker(values)

    def routes(self) -> list[web.RouteDef]:
        """The route, beside the protocol's own."""
        return [web.post("/api/runner/v1/jobs/{job_id}/results", self.protocol.authenticated(self.receive))]

    async def receive(self, request: web.Request, host: str) -> web.Response:
        """Parse and keep one results file; its counts and problems."""
        job_id = self.protocol.job_id_of(request)
        path = workspace_path(request.query.get("path"))
        size = declared_size(request.query.get("size"))
        workspace = request.query.get("workspace", "")
        if len(workspace) > MAX_WORKSPACE or not is_printable(workspace):
            raise ProtocolError(400, "invalid", "workspace is an absolute folder", "workspace")
        try:
            masker, unreadable = await self._masker(job_id, host), None
        except (SecretsKeyError, SecretRefusedError) as exc:
            masker, unreadable = None, str(exc)
        except NotYoursError as exc:
            raise ProtocolError(404, "not_found", str(exc)) from None
        if masker is not None:
            path = masker.mask_all(path.encode()).decode()
        if request.query.get("withheld") == "1":  # its body, if any, is not read
            report = _withheld(path)
        else:
            parser = JUnitParser(path, limits=LIMITS, locator=Locator(workspace), masker=masker)
            async with self._parsing:
                received = await _parse(request, parser)
                report = await asyncio.to_thread(parser.report, max(size or 0, received))
            if unreadable is not None:
                report = _counted_only(report, unreadable)
        try:
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                if await result_count(session, job_id, excluding=path) >= MAX_FILES:
                    raise ProtocolError(
                        409, "too_many", f"a job keeps at most {MAX_FILES} results files", "path"
                    )
                await store_results(session, job_id, host, report, self.database.clock())
        except NotYoursError as exc:
            raise ProtocolError(404, "not_found", str(exc)) from None
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


async def _parse(request: web.Request, parser: JUnitParser) -> int:
    """Feed the request's body to ``parser`` as it arrives; how many bytes it held. A body over
    :data:`MAX_FILE_BYTES` is a 413, found from its ``Content-Length`` or as it is counted."""
    too_large = ProtocolError(
        413, "too_large", f"a results file is sent as its first {MAX_FILE_BYTES} bytes at most", "size"
    )
    if request.content_length is not None and request.content_length > MAX_FILE_BYTES:
        raise too_large
    received = 0
    async for piece in request.content.iter_chunked(PIECE_BYTES):
        received += len(piece)
        if received > MAX_FILE_BYTES:
            raise too_large
        await asyncio.to_thread(parser.feed, piece)
    return received


def _counted_only(report: JUnitReport, why: str) -> JUnitReport:
    """``report`` with its counts alone: its secrets could not be hidden in the rest."""
    problem = ResultsProblem(
        report.file,
        f"the tests are counted, and none of their names or text kept: {why}, so the job's secrets could "
        "not be hidden in them",
    )
    return JUnitReport(report.file, (), report.counts, (problem,))


def _withheld(path: str) -> JUnitReport:
    """A file the runner host did not send: it would show a secret the server does not know to hide."""
    problem = ResultsProblem(
        path,
        "not sent by the runner host: once parsed, its text shows a secret setting of the host's devices "
        "file (secret_env), spelled so that the host could not hide it in the file's bytes",
    )
    return JUnitReport(path, (), Counts(), (problem,))
