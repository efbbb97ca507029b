"""The agent's job records and their output pages, on disk under ``<work dir>/jobs/<job id>/``.

``record.json`` holds what the agent knows of the job (its offer, state, CPU set, process, result) and is
rewritten whole (beside it, then renamed) at every change, so a restarted agent finds each job as it was:
the CPU set is recorded before the command starts. The command's output goes to ``output.log``; the agent
cuts it into numbered pages (``pages/<seq>.log``), each one chunk of the runner protocol, and uploads them in
order. Pages are kept until the record expires (24 hours after the job ended) or until the job's pages pass
``MAX_RETAINED_BYTES``, oldest first; a replay that needs an evicted page starts at the first page kept,
marked ``truncated_before_seq``, so the server shows the gap instead of skipping it silently.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from kerrigan.core.accounting import FinishedJob
from kerrigan.core.disk import job_history_expired
from kerrigan.core.masking import Masker, OutputMasker
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES

log = logging.getLogger(__name__)

PAGE_BYTES: Final = 64 * 1024
MAX_RETAINED_BYTES: Final = 64 * 1024 * 1024


@dataclass
class JobRecord:
    """One job as the agent keeps it. ``state``: accepted, waiting, running, ended."""

    id: str
    offer: dict[str, Any]
    state: str = "accepted"
    accepted_at: float = 0.0
    ready_at: float | None = None  # when it was fetched and began waiting for capacity on this host
    started_at: float | None = None
    ended_at: float | None = None
    workspace: str | None = None
    cpus: list[int] = field(default_factory=list)
    pid: int | None = None
    pid_started: int | None = None  # the process's start time, so a reused pid is not mistaken for it
    user: int | None = (
        None  # the uid (and gid) the job runs as; held until the job ended and its cgroup is gone
    )
    cgroup: dict[str, Any] | None = (
        None  # the job's cgroup (isolation.cgroups), until it is emptied and removed
    )
    exit_status: int | None = None
    # cancelled, timed_out, withdrawn, lost, source_unavailable, or a board's fault (power_failed,
    # boot_failed, console_lost)
    outcome: str | None = None
    accounting: dict[str, Any] | None = None
    reported: bool = False  # the server acknowledged the end
    # Its wired boards were taken (wired_jobs): given back at its end, even by a restarted agent.
    boards: bool = False
    # Of them, those switched off at its end: the server recovers them when the job ended in doubt.
    powered_off: list[str] = field(default_factory=list)
    # And those that had to be and whose power did not answer: the server recovers them too.
    power_unknown: list[str] = field(default_factory=list)
    # Output: bytes of output.log cut into pages so far, the next page's number and offset (in the UTF-8
    # text sent), the next page the server expects, and the first page still kept.
    cut_bytes: int = 0
    next_page: int = 0
    next_offset: int = 0
    uploaded: int = 0
    first_kept: int = 0
    # Bytes after ``cut_bytes`` already hidden under the last mask cut (a secret that straddles the cut).
    mask_covered: int = 0

    @property
    def claim(self) -> int:
        """The vCPUs the job claims."""
        return int(self.offer.get("claim", {}).get("vcpus", 2))

    @property
    def repository(self) -> str:
        """The repository the job runs."""
        return str(self.offer.get("repository", ""))

    def finished(self) -> FinishedJob | None:
        """The record as the health report counts it, once the job ended."""
        if self.ended_at is None:
            return None
        use = (self.accounting or {}).get("reservation_use") or {}
        return FinishedJob(
            self.id,
            self.repository,
            str(self.offer.get("task", "")),
            self.claim,
            self.ended_at,
            use.get("wall_s"),
            use.get("average_use_ppm"),
            "queue_wait_exceeded" if self.outcome == "withdrawn" else self.outcome,
        )


class JobRecords:
    """Every job record under one work dir."""

    def __init__(self, work_dir: Path, output_max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES) -> None:
        self.root = work_dir / "jobs"
        self.output_max_bytes = output_max_bytes

    def folder(self, job_id: str) -> Path:
        """The job's folder."""
        if not (job_id.isascii() and job_id.isdigit()):
            raise ValueError(f"not a job id: {job_id!r}")
        return self.root / job_id

    def output_path(self, job_id: str) -> Path:
        """Where the command's output goes."""
        return self.folder(job_id) / "output.log"

    def result_path(self, job_id: str) -> Path:
        """Where the launcher writes the exit status and accounting."""
        return self.folder(job_id) / "result.json"

    def save(self, record: JobRecord) -> None:
        """Write the record whole (never a token: the offer's credentials are kept in memory only)."""
        folder = self.folder(record.id)
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # records and results are the agent's alone
        (folder / "pages").mkdir(parents=True, exist_ok=True)
        document = asdict(record)
        document["offer"] = {key: value for key, value in record.offer.items() if key != "github"}
        staged = folder / "record.json.tmp"
        staged.write_text(json.dumps(document), encoding="utf-8")
        staged.replace(folder / "record.json")

    def load_all(self) -> list[JobRecord]:
        """Every readable record, by job id; an unreadable one is logged and left alone."""
        found = []
        for path in sorted(self.root.glob("*/record.json"), key=lambda p: int(p.parent.name)):
            try:
                found.append(JobRecord(**json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, TypeError) as err:
                log.warning("ignoring unreadable job record %s: %s", path, err)
        return found

    def cut_pages(self, record: JobRecord, final: bool = False, masker: Masker | None = None) -> bool:
        """Cut the output written since the last cut into pages, every secret of ``masker`` hidden; whether
        any was cut.

        A character the command has only partly written yet stays for the next cut, and so does what may
        be the start of a secret (nothing is kept in memory, so a restarted agent cuts it whole);
        ``final``: the command ended, cut everything left. Cutting stops with the page that passes
        ``output_max_bytes`` (the server, whose cap it is too, then marks the cut): whatever the log's
        size says, no more of it is read.
        """
        source = self.output_path(record.id)
        cut = False
        held = masker.held if masker is not None else 0
        try:
            with source.open("rb") as log_file:
                log_file.seek(record.cut_bytes)
                while record.next_offset <= self.output_max_bytes and (
                    raw := log_file.read(PAGE_BYTES + held)
                ):
                    at_end = len(raw) < PAGE_BYTES + held
                    last = final and at_end
                    if masker is None:
                        usable = raw if last else raw[: _complete_utf8(raw)]
                        text, consumed = usable, len(usable)
                    else:
                        # Settle at a character's edge with ``held`` bytes after it read, so that a secret
                        # starting before the edge is seen whole.
                        edge = len(raw) if last else _complete_utf8(raw[: max(len(raw) - held, 0)])
                        masked = masker.cut(raw[: edge + held], record.mask_covered, final=last)
                        text, consumed = masked.text, masked.consumed
                        record.mask_covered = masked.covered
                    if not consumed:
                        break  # only the start of a character (or of a secret) so far
                    log_file.seek(record.cut_bytes + consumed)
                    # PostgreSQL text cannot hold NUL, which serial consoles print: shown as U+FFFD.
                    self._write_page(record, text.decode("utf-8", "replace").replace("\x00", "\ufffd"))
                    record.cut_bytes += consumed
                    cut = True
        except FileNotFoundError:
            return False
        if cut:
            self._evict_pages(record)
        return cut

    def _write_page(self, record: JobRecord, text: str) -> None:
        page = self.folder(record.id) / "pages" / f"{record.next_page}.log"
        data = text.encode()
        page.write_bytes(data)  # bytes: text mode would turn \r\n into \n and the offsets would lie
        page.with_suffix(".json").write_text(json.dumps({"offset": record.next_offset}), encoding="utf-8")
        record.next_page += 1
        record.next_offset += len(data)

    def page(self, record: JobRecord, seq: int) -> tuple[int, str] | None:
        """Page ``seq``: its byte offset and text, or None when it was never cut or was evicted."""
        path = self.folder(record.id) / "pages" / f"{seq}.log"
        try:
            meta = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
            return int(meta["offset"]), path.read_bytes().decode("utf-8")
        except (OSError, ValueError, KeyError):
            return None

    def _evict_pages(self, record: JobRecord) -> None:
        """Keep at most MAX_RETAINED_BYTES of a job's pages, dropping the oldest."""
        kept = record.next_offset - (self.page(record, record.first_kept) or (record.next_offset, ""))[0]
        while kept > MAX_RETAINED_BYTES and record.first_kept < record.next_page - 1:
            found = self.page(record, record.first_kept)
            size = len(found[1].encode()) if found else 0
            for suffix in (".log", ".json"):
                with contextlib.suppress(FileNotFoundError):
                    (self.folder(record.id) / "pages" / f"{record.first_kept}{suffix}").unlink()
            record.first_kept += 1
            kept -= size

    def mask_output(self, record: JobRecord, masker: Masker) -> None:
        """Hide the job's secrets in its raw log, kept on the host (its output was cut): rewritten a piece
        at a time, never held whole."""
        source = self.output_path(record.id)
        masked = source.with_suffix(".masking")
        stream = OutputMasker(masker)
        try:
            with source.open("rb") as raw, masked.open("wb") as out:
                while piece := raw.read(PAGE_BYTES):
                    out.write(stream.feed(piece))
                out.write(stream.flush())
        except FileNotFoundError:
            return
        masked.replace(source)

    def drop_output(self, record: JobRecord) -> None:
        """The command ended and its output is cut: the raw log is no longer needed."""
        with contextlib.suppress(FileNotFoundError):
            self.output_path(record.id).unlink()

    def expire(
        self, records: dict[str, JobRecord], now_s: float, keep: Collection[str] = frozenset()
    ) -> list[str]:
        """Delete records (and their pages) 24 hours after their job ended and was reported, but those of
        ``keep``; their ids."""
        gone = []
        for job_id, record in list(records.items()):
            if job_id in keep:
                continue
            if record.reported and job_history_expired(record.ended_at, record.accepted_at, now_s):
                shutil.rmtree(self.folder(job_id), ignore_errors=True)
                del records[job_id]
                gone.append(job_id)
        return gone


def _complete_utf8(raw: bytes) -> int:
    """How many leading bytes of ``raw`` hold whole UTF-8 characters (a character cut off at the end is
    left for later; bytes that can never be valid are kept, to be replaced)."""
    for back in range(1, min(4, len(raw)) + 1):
        byte = raw[-back]
        if byte & 0xC0 == 0x80:
            continue  # a continuation byte: its lead is further back
        needed = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return len(raw) - back if needed > back else len(raw)
    return len(raw)
