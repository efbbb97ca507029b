"""A session's jobs as its page shows them: each with its state and why, how long it took, what it used
of what it reserved, its attempt, its tests and files, and the end of its output (at most ``TAIL_BYTES``,
less when a session has many jobs, so the page stays small whatever they printed), its whole output a page
of ``CHUNKS_PER_PAGE`` chunks at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kerrigan.core.lifecycle import JobState, RetryPolicy, describe_attempt, reason_words, retry_cause
from kerrigan.core.results import ResultsSummary
from kerrigan.core.results.summary import headline
from kerrigan.core.runner_fields import MAX_CHUNK_BYTES, size_text
from kerrigan.store.artifacts import ArtifactInfo
from kerrigan.store.session_pages import JobDetails, OutputTail, page_count

CHUNKS_PER_PAGE: Final = 4  # a chunk is at most MAX_CHUNK_BYTES: a page of output is at most 1 MiB
PAGE_BYTES_AT_MOST: Final = CHUNKS_PER_PAGE * MAX_CHUNK_BYTES
TAIL_BYTES: Final = 64 * 1024  # of each job's output on the session page
SESSION_TAIL_BYTES: Final = 512 * 1024  # of all its jobs' output: many jobs show less each
LEAST_TAIL_BYTES: Final = 4 * 1024


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def duration_text(seconds: float) -> str:
    """A duration for people: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 07 min``."""
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


@dataclass(frozen=True, slots=True)
class AccountingView:
    """A finished job's ``reservation_use``: the CPU time it used of what it reserved."""

    cpu_s: float | None
    wall_s: float | None
    vcpus: int | None
    use_percent: str | None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def accounting_view(accounting: Mapping[str, Any] | None) -> AccountingView | None:
    """The accounting a runner reported, or None when it had none (absent, never zero)."""
    use = _dict((accounting or {}).get("reservation_use"))
    if not use:
        return None
    ppm = _number(use.get("average_use_ppm"))
    return AccountingView(
        _number(use.get("cpu_s")),
        _number(use.get("wall_s")),
        _int(use.get("vcpus")),
        f"{ppm / 10_000:.1f}%" if ppm is not None else None,
    )


NOT_RUN: Final = "not_run"
_WAITING_STATES: Final = frozenset({"queued", "leased"})
# A console comes from the accept (the board powers on and boots before the command starts) to the end.
_CONSOLE_LIVE: Final = frozenset({JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING})


def attempt_text(job: JobDetails, jobs: Sequence[JobDetails], retry: RetryPolicy) -> str | None:
    """The attempt in the check run's words, for a job that is a retry or was retried (its session's
    ``retry`` policy gives how many attempts it may have); else None."""
    if job.attempt <= 1 and job.state != JobState.RETRIED:
        return None
    attempts = retry.max_attempts
    before = next((other for other in jobs if other.pk == job.retry_of), None)
    after = retry_cause(before.reason, before.exit_status, before.ran_on) if before else None
    return describe_attempt(job.attempt, attempts, job.ran_on, after)


@dataclass(frozen=True, slots=True)
class JobView:
    """A job with the end of its output; ``session_ended`` when its session is completed."""

    job: JobDetails
    duration: str | None
    accounting: AccountingView | None
    output: OutputTail
    session_ended: bool = False
    tail_bytes: int = TAIL_BYTES
    attempt_text: str | None = None  # "attempt 2 of 3 on modalix-redbox after runner_lost on ..."
    results: ResultsSummary | None = None  # every test of the JUnit XML files its runner sent
    files: tuple[ArtifactInfo, ...] = ()  # what it uploaded (artifacts.upload), and notes of what not
    console: OutputTail | None = None  # the end of its board's console, when its runner sent one

    @property
    def console_size(self) -> str:
        """How much console the runner host sent, for people."""
        return size_text(self.job.console_bytes)

    @property
    def console_streaming(self) -> bool:
        """Whether its console is still coming: from the accept (power-on, boot) to the job's end."""
        return self.job.finished_at is None and self.state in _CONSOLE_LIVE

    @property
    def results_headline(self) -> str:
        """``**1 failed**, 2 passed`` without the markdown: the counts of its tests."""
        return headline(self.results.counts).replace("**", "") if self.results else ""

    @property
    def pages(self) -> int:
        """How many pages its whole output fills."""
        return page_count(self.job.chunks, CHUNKS_PER_PAGE)

    @property
    def output_size(self) -> str:
        """How much output the runner host sent, for people."""
        return size_text(self.job.output_bytes)

    @property
    def tail_size(self) -> str:
        """How much of the end of it the session page shows, for people."""
        return size_text(self.tail_bytes)

    @property
    def state(self) -> str:
        """The job's state; ``not_run`` for a job its session ended without (the dispatcher skips it)."""
        if self.session_ended and self.job.state in _WAITING_STATES:
            return NOT_RUN
        return self.job.state

    @property
    def reason_text(self) -> str | None:
        """Why the job ended as it did, in words, with the runner's detail."""
        if self.state == NOT_RUN:
            return "the session ended before it was dispatched"
        reason = self.job.reason
        words = reason_words(reason) if reason else None
        detail = self.job.detail
        if words and detail:
            return f"{words} ({detail})"
        return words or detail

    @property
    def requested(self) -> str | None:
        """A stop Kerrigan asked for and the runner has not answered yet."""
        if self.job.cancel_requested and self.job.finished_at is None:
            return "cancel requested"
        if self.job.withdraw_requested and self.job.finished_at is None:
            return "withdraw requested"
        return None


def duration(started: datetime | None, finished: datetime | None, now: datetime) -> str | None:
    """How long a job ran (until now while it runs), for people; None before it started."""
    if started is None:
        return None
    return duration_text(((finished or now) - started).total_seconds())


def cut_text(notice: str | None) -> str | None:
    """The cut notice as the start of a sentence: ``Output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)``."""
    words = notice.strip().strip("[]") if notice else ""
    return words[:1].upper() + words[1:] if words else None


def tail_bytes(jobs: int) -> int:
    """How much of each job's output the session page shows: a session's page stays small however many."""
    return max(LEAST_TAIL_BYTES, min(TAIL_BYTES, SESSION_TAIL_BYTES // max(jobs, 1)))
