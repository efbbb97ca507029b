"""The runner protocol's artifact upload: a file the manifest's ``artifacts.upload`` globs matched, kept with
the job (``kerrigan.store.artifacts``) for its session page and check run to link.

``POST /api/runner/v1/jobs/{job_id}/artifacts?path=logs/console.log&size=N`` with the file's bytes as the
body, streamed: each piece is stored in a short transaction of its own as it arrives, never the whole file in
memory. A file over :data:`MAX_FILE_BYTES`, or one that would take the job past :data:`MAX_JOB_BYTES` or
:data:`MAX_FILES`, is not kept: the agent declares it (``&skipped=1``, no body) or the server finds it while
reading, and the file is listed with a note saying so. A file sent again replaces the one of the same path.
"""

from __future__ import annotations

import hashlib
from typing import Final

import aiohttp
from aiohttp import web
from sqlalchemy.exc import IntegrityError

from kerrigan.core.job_files import UPLOAD_MAX_BYTES, UPLOAD_MAX_FILES, UPLOAD_MAX_JOB_BYTES
from kerrigan.core.unpacking import amount
from kerrigan.dispatch.protocol import ProtocolError, RunnerProtocol
from kerrigan.dispatch.results import declared_size, workspace_path
from kerrigan.store.artifacts import append_chunk, begin_upload, finish_upload, job_usage, not_kept
from kerrigan.store.jobs.holders import NotYoursError

MAX_FILE_BYTES: Final = UPLOAD_MAX_BYTES
MAX_JOB_BYTES: Final = UPLOAD_MAX_JOB_BYTES
MAX_FILES: Final = UPLOAD_MAX_FILES
PIECE_BYTES: Final = 1 << 20


class ArtifactUpload:
    """Receives uploaded files for the runner protocol (a runner host's token, as its other calls)."""

    def __init__(self, protocol: RunnerProtocol) -> None:
        self.protocol = protocol
        self.database = protocol.database

    def routes(self) -> list[web.RouteDef]:
        """The route, beside the protocol's own."""
        return [web.post("/api/runner/v1/jobs/{job_id}/artifacts", self.protocol.authenticated(self.receive))]

    async def receive(self, request: web.Request, host: str) -> web.Response:
        """Keep one uploaded file (or the note that it was not kept); what became of it."""
        database = self.database
        job_id = self.protocol.job_id_of(request)
        path = workspace_path(request.query.get("path"))
        size = declared_size(request.query.get("size"))
        if size is None:
            raise ProtocolError(400, "invalid", "size is the file's size in bytes", "size")
        skipped = request.query.get("skipped") == "1"  # the agent found it over a limit
        try:
            async with database.writing(), database.sessions() as session, session.begin():
                artifact_pk = await begin_upload(session, job_id, host, path, database.clock())
                usage = await job_usage(session, int(job_id), excluding=path)
                refusal = _over(size, usage.files, usage.bytes, skipped=skipped)
                if refusal is not None:
                    await not_kept(session, artifact_pk, size, refusal)
        except NotYoursError as exc:
            raise ProtocolError(404, "not_found", str(exc)) from None
        except IntegrityError:  # the same path sent twice at once: one of them goes on
            raise ProtocolError(409, "conflict", f"{path} is being uploaded already", "path") from None
        if refusal is not None:
            return web.json_response({"path": path, "kept": False, "note": refusal})
        try:
            digest = await self._receive(request, artifact_pk, size)
        except (aiohttp.ClientPayloadError, ConnectionError) as err:  # the runner went away mid-file
            async with database.writing(), database.sessions() as session, session.begin():
                await not_kept(session, artifact_pk, size, "not kept: the upload was cut off")
            raise ProtocolError(400, "incomplete", f"the upload was cut off: {err}", "size") from None
        return web.json_response({"path": path, "kept": True, "size": size, "sha256": digest})

    async def _receive(self, request: web.Request, artifact_pk: int, size: int) -> str:
        """Store the body in pieces as it comes; its digest once it came whole, as big as said."""
        database = self.database
        digest, received, seq, buffer = hashlib.sha256(), 0, 0, bytearray()
        async for piece in request.content.iter_chunked(256 * 1024):
            received += len(piece)
            if received > size:  # (a size over MAX_FILE_BYTES was refused before a byte was read)
                note = f"not kept: more than the {size:,} bytes it was said to be"
                async with database.writing(), database.sessions() as session, session.begin():
                    await not_kept(session, artifact_pk, received, note)
                raise ProtocolError(413, "too_large", note, "size")
            digest.update(piece)
            buffer += piece
            if len(buffer) >= PIECE_BYTES:
                await self._store(artifact_pk, seq, bytes(buffer))
                seq, buffer = seq + 1, bytearray()
        if buffer or seq == 0:
            await self._store(artifact_pk, seq, bytes(buffer))
        if received != size:
            note = f"not kept: {received:,} bytes came, not the {size:,} said"
            async with database.writing(), database.sessions() as session, session.begin():
                await not_kept(session, artifact_pk, received, note)
            raise ProtocolError(400, "invalid", note, "size")
        async with database.writing(), database.sessions() as session, session.begin():
            await finish_upload(session, artifact_pk, size, digest.hexdigest())
        return digest.hexdigest()

    async def _store(self, artifact_pk: int, seq: int, data: bytes) -> None:
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            await append_chunk(session, artifact_pk, seq, data)


def _over(size: int, files: int, kept: int, *, skipped: bool) -> str | None:
    """Why a file of ``size`` bytes is not kept for a job that keeps ``files`` files of ``kept`` bytes."""
    if skipped or size > MAX_FILE_BYTES:
        return f"not kept: {amount(size)}, over the limit of {amount(MAX_FILE_BYTES)} a file"
    if files >= MAX_FILES:
        return f"not kept: the job keeps at most {MAX_FILES} files"
    if kept + size > MAX_JOB_BYTES:
        return f"not kept: the job's files would pass {amount(MAX_JOB_BYTES)}"
    return None
