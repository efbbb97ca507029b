"""Reporting a job: its output cut into numbered pages and uploaded in order, then its end.

The server stores a job's output up to its ``KERRIGAN_OUTPUT_MAX_BYTES``; once it answers ``output_cut``
the agent sends no more of it (a mark in the job's folder says so across restarts) and keeps ``output.log``
(the output up to its own ``--output-max-bytes``) on the host until the job's record expires, for whoever
needs what the server did not keep — masked like the pages, or not kept at all when the job's secrets are
no longer known to mask it with. The job's results and uploaded files are sent after its last output and
before its end is reported, read as the job's own files only (:mod:`kerrigan.runner.results`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection
from typing import Any, Final

from kerrigan.core.lifecycle import DEVICE_FAULT_EXIT, RUNNER_LOST
from kerrigan.core.results import results_masker
from kerrigan.core.runner_protocol import POWER_UNKNOWN
from kerrigan.runner.boards.control import BOARD_FAULTS
from kerrigan.runner.host_state import HostState
from kerrigan.runner.records import JobRecord
from kerrigan.runner.results import (
    MAX_UPLOAD_BYTES,
    MAX_UPLOADS,
    open_job_file,
    read_head,
    results_files,
    shows_secret,
)
from kerrigan.runner.server import ServerRefused, ServerUnavailable
from kerrigan.runner.workspaces import UnsafeWorkspaceError

log = logging.getLogger(__name__)

# A job's end this host does not know: dropped after a restart ("lost"), or its launcher killed.
LOST: Final = frozenset({"lost", RUNNER_LOST})


def lost_body(capabilities: Collection[str]) -> dict[str, Any]:
    """The finish of a job this host lost: ``runner_lost`` to a server that announced it, else exit 75."""
    if RUNNER_LOST in capabilities:
        return {"exit_status": -1, "outcome": RUNNER_LOST}
    return {"exit_status": DEVICE_FAULT_EXIT}


OUTPUT_CUT_MARK: Final = "output-cut"  # in the job's folder: the server stores no more of its output


class Reporting(HostState):
    """Output pages and the end of a job, sent to the server."""

    async def _upload(self, record: JobRecord, final: bool = False, retry_s: float = 120.0) -> bool:
        """Cut new output into pages and send the pages the server has not acknowledged, in order;
        whether all were sent (or need not be: the server cut the job's output)."""
        if self._output_cut(record):
            return True
        if self._needs_secrets(record):  # restarted since the accept: ask again, to mask its output
            state = await self._accept(record.id)
            if self._needs_secrets(record):
                if state is None:
                    return False  # the server did not answer: nothing is cut unmasked, the next upload asks
                # It answered without them (a secret deleted since): no more of the output can be masked,
                # so none is sent, and the raw log is not kept (see _end).
                log.warning("job %s: its secrets are no longer given; no more output is sent", record.id)
                self._mark_output_cut(record)
                return True
        masker = self._masker_of(record)
        if await asyncio.to_thread(self.records.cut_pages, record, final, masker):
            self.records.save(record)
        while record.uploaded < record.next_page:
            body: dict[str, Any]
            page = self.records.page(record, record.uploaded)
            if page is None:  # evicted before it was sent: say so, starting at the first page kept
                kept = self.records.page(record, record.first_kept)
                if kept is None or "log_pages" not in self.capabilities:
                    log.error(
                        "job %s: output page %s is gone and cannot be replayed", record.id, record.uploaded
                    )
                    return True
                body = {
                    "seq": record.first_kept,
                    "offset": kept[0],
                    "data": kept[1],
                    "truncated_before_seq": record.first_kept,
                }
            else:
                body = {"seq": record.uploaded, "offset": page[0], "data": page[1]}
            try:
                answer = await self.server.call(
                    "POST", f"/jobs/{record.id}/output", body, retry_timeout_s=retry_s
                )
            except ServerRefused as err:
                if err.code == "gap" and isinstance(err.body.get("next_seq"), int):
                    record.uploaded = int(err.body["next_seq"])  # re-send from where the server is
                    continue
                log.warning("job %s: output refused (%s); skipping page %s", record.id, err, record.uploaded)
                record.uploaded += 1  # a page the server will never take must not hold up the rest
                continue
            except ServerUnavailable as err:
                log.warning("job %s: output not sent yet: %s", record.id, err)
                return False
            record.uploaded = int(answer.get("next_seq", record.uploaded + 1))
            self.records.save(record)
            if answer.get("output_cut") is True:
                self._mark_output_cut(record)
                return True
        return True

    def _output_cut(self, record: JobRecord) -> bool:
        return (self.records.folder(record.id) / OUTPUT_CUT_MARK).exists()

    def _mark_output_cut(self, record: JobRecord) -> None:
        (self.records.folder(record.id) / OUTPUT_CUT_MARK).touch()
        log.warning(
            "job %s: the server stores no more of its output (its KERRIGAN_OUTPUT_MAX_BYTES); no more is "
            "sent, and its output up to --output-max-bytes stays in %s until the job's record expires",
            record.id,
            self.records.output_path(record.id),
        )

    async def _end(
        self,
        record: JobRecord,
        exit_status: int | None,
        outcome: str | None,
        accounting: dict[str, Any] | None = None,
        note: str = "",
    ) -> None:
        if note:
            with self.records.output_path(record.id).open("a", encoding="utf-8") as output:
                output.write(note)
        # All output reaches the server before the end does: the check run shows the last lines.
        while not await self._upload(record, final=True) and not record.reported:
            await asyncio.sleep(5.0)
        if not record.reported:  # before the workspace is free for another job, and with the masker
            for send in (self._send_results, self._send_artifacts):
                try:
                    await send(record)
                except Exception:  # what the job left must never keep its end from being reported
                    log.exception("job %s: its files could not be sent", record.id)
        if not self._output_cut(record) or self._needs_secrets(record):
            # A cut job's log is the only whole copy of its output, kept; but never with secrets in clear.
            self.records.drop_output(record)
        elif (masker := self._masker_of(record)) is not None:  # kept: without its secrets
            await asyncio.to_thread(self.records.mask_output, record, masker)
        record.state, record.ended_at = "ended", self.clock()
        record.exit_status, record.outcome, record.accounting = exit_status, outcome, accounting
        self.records.save(record)
        self._revoke_tokens(record.id)
        if record.workspace:
            with contextlib.suppress(OSError, UnsafeWorkspaceError):
                self.workspaces.mark_used(record.workspace, self.clock())
        self._changed.set()
        if not record.reported:
            await self._report_end(record)

    async def _send_results(self, record: JobRecord) -> None:
        """Send the JUnit XML files the manifest's ``results`` globs match, before the end is reported
        (the check run that ends shows them). A file the server cannot take is logged, never retried for
        long: results never hold up a job's end. Only the job's own files are read
        (:func:`~kerrigan.runner.results.open_job_file`)."""
        globs = [glob for glob in record.offer.get("results") or () if isinstance(glob, str)]
        if not globs or not record.workspace:
            return
        workspace = self.workspaces.path(record.workspace)
        masker = self._masker_of(record)
        settings = self._given_device_secrets(record)
        # The server hides the repository's secrets in what it parses; the devices file's it does not know.
        device_masker = results_masker(settings)
        for path in await asyncio.to_thread(results_files, workspace, globs):
            try:
                data, size = await asyncio.to_thread(read_head, workspace, path, record.user)
                if masker is not None:  # its failures' text reaches the check run and its annotations
                    data = await asyncio.to_thread(masker.mask_all, data)
                withheld = device_masker is not None and await asyncio.to_thread(
                    shows_secret, data, path, device_masker, str(workspace)
                )
                if withheld:
                    log.warning(
                        "job %s: results file %s is not sent: once parsed, it shows a secret_env setting of "
                        "the devices file that its bytes do not",
                        record.id,
                        path,
                    )
                    data = b""
                answer = await self.server.results(
                    record.id, path, data, size, str(workspace), withheld=withheld
                )
            except OSError as err:
                log.warning("job %s: results file %s not read: %s", record.id, path, err)
                continue
            except (ServerUnavailable, ServerRefused) as err:
                log.warning("job %s: results file %s not sent: %s", record.id, path, err)
                continue
            log.info("job %s: results %s: %s tests", record.id, path, answer.get("tests"))

    async def _send_artifacts(self, record: JobRecord) -> None:
        """Upload the files the manifest's ``artifacts.upload`` globs match, streamed from disk; one over
        the server's limit is declared, not sent (its page lists it as not kept). Only the job's own files
        are read, each from the descriptor that was checked. Never holds up the end."""
        artifacts = record.offer.get("artifacts")
        listed = artifacts.get("upload") if isinstance(artifacts, dict) else None
        globs = [glob for glob in listed or () if isinstance(glob, str)]
        if not globs or not record.workspace:
            return
        workspace = self.workspaces.path(record.workspace)
        for path in await asyncio.to_thread(results_files, workspace, globs, MAX_UPLOADS):
            try:
                with open_job_file(workspace, path, record.user) as file:  # a few calls; the upload streams
                    sent = file.reader if file.size <= MAX_UPLOAD_BYTES else None
                    await self.server.artifact(record.id, path, sent, file.size)
            except (OSError, ServerUnavailable, ServerRefused) as err:
                log.warning("job %s: file %s not uploaded: %s", record.id, path, err)

    async def _report_end(self, record: JobRecord) -> None:
        body: dict[str, Any] = {"exit_status": record.exit_status if record.exit_status is not None else -1}
        if record.outcome in ("cancelled", "timed_out", "source_unavailable"):
            body["outcome"] = record.outcome
        elif record.outcome in BOARD_FAULTS:
            # Exit 75 (a device fault) is the lab's failure to any server; one that knows the board's
            # faults is told which.
            body["exit_status"] = DEVICE_FAULT_EXIT
            if "board_faults" in self.capabilities:
                body["outcome"] = record.outcome
        elif record.outcome in LOST:
            # This host lost the job (a restart, its launcher killed): its end is unknown, which is the
            # lab's failure, never the test's. Exit 75 says so to a server that does not know the word.
            body.update(lost_body(self.capabilities))
        if record.accounting is not None:
            body["accounting"] = record.accounting
        if record.powered_off and "recovery" in self.capabilities:
            body["powered_off"] = record.powered_off
        if record.power_unknown and POWER_UNKNOWN in self.capabilities:
            body["power_unknown"] = record.power_unknown
        while True:
            try:
                await self.server.job(record.id, "finish", body)
                break
            except ServerUnavailable as err:
                log.warning("job %s: end not reported yet: %s", record.id, err)
                await asyncio.sleep(5.0)
            except ServerRefused as err:
                log.warning("job %s: end refused: %s", record.id, err)
                break
        record.reported = True
        self.records.save(record)
        log.info("job %s: ended (%s, exit %s)", record.id, record.outcome or "done", record.exit_status)
