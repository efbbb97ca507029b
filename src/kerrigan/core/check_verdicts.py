"""Whether a health check's end says something of its device, or only that the check itself is broken.

A check that cannot run says nothing of the device it ran on: its command not found (exit 127) or not
executable (exit 126), or the same failure on every device it ran on within an hour (at least two: one
device failing alone is that device's failure). Such an end is ``check_broken``
(:data:`kerrigan.core.lifecycle.CHECK_BROKEN`, the job's reason): the device keeps its
health, and a device set bad by the same failure earlier in that hour gets its health back (the store does
that). A check stays broken while it fails the same way, past the hour too; a pass, or a different failure,
ends it.

"The same check" is one command on the devices of one pool (the pool's check, or a device's own). Its
failures are compared by how the job ended and its exit status: the output is not kept to compare. Ends
that say nothing of the command (a lost runner, a cancel, a check that never started) are not weighed.

Everything here is pure: times are given, never read from a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kerrigan.core.lifecycle import JobState

CANNOT_RUN: Final = {126: "not executable", 127: "command not found"}  # what /bin/sh -c exits with
SAME_FAILURE_WITHIN: Final = timedelta(hours=1)
SAME_FAILURE_DEVICES: Final = 2  # the fewest devices whose same failure says the check, not a board, fails


class Verdict(enum.StrEnum):
    """What a health check's end says."""

    PASSED = "passed"  # the device works
    FAILED = "failed"  # the device does not: it is set bad
    BROKEN = "broken"  # the check cannot run: the device keeps its health


@dataclass(frozen=True, slots=True)
class Failure:
    """How a check failed, as far as two failures are compared: its end state and exit status."""

    state: JobState
    exit_status: int | None

    def words(self) -> str:
        """``exit 127``, ``timed out``."""
        if self.state is JobState.TIMED_OUT:
            return "timed out"
        return f"exit {self.exit_status}"

    @property
    def cannot_run(self) -> str | None:
        """Why the command could not even start (``command not found``), when its exit status says so."""
        if self.state is not JobState.FAILED or self.exit_status is None:
            return None
        return CANNOT_RUN.get(self.exit_status)


@dataclass(frozen=True, slots=True)
class CheckEnd:
    """One ended health-check job of a check: its device, job, end and whether it was judged broken."""

    device_id: str
    job_pk: int
    at: datetime
    state: JobState
    exit_status: int | None
    broken: bool = False  # its reason is ``check_broken``

    @property
    def passed(self) -> bool:
        return self.state is JobState.SUCCEEDED

    @property
    def failure(self) -> Failure | None:
        """How the command failed; None when it passed or its end says nothing of the command (a lost
        runner, a cancel)."""
        if self.state is JobState.TIMED_OUT or (
            self.state is JobState.FAILED and self.exit_status is not None
        ):
            return Failure(self.state, self.exit_status)
        return None

    @property
    def weighed(self) -> bool:
        """Whether the end says anything of the check: it passed, or its command failed."""
        return self.passed or self.failure is not None


def verdict(end: CheckEnd, earlier: Iterable[CheckEnd]) -> Verdict:
    """What ``end`` says, given the ``earlier`` ends of the same check (same pool, same command): at least
    those of the hour before it, and the latest weighed one before it whatever its age. An end that is not
    weighed is ``FAILED``, as it always was (the store sets the device bad only for one that started)."""
    if end.passed:
        return Verdict.PASSED
    failure = end.failure
    if failure is None:
        return Verdict.FAILED
    if failure.cannot_run is not None:
        return Verdict.BROKEN
    before = sorted((e for e in earlier if e.weighed and e.at <= end.at), key=lambda e: (e.at, e.job_pk))
    if before and before[-1].broken and before[-1].failure == failure:
        return Verdict.BROKEN  # broken already, and failing the same way: still broken
    latest = {e.device_id: e for e in before if e.at >= end.at - SAME_FAILURE_WITHIN}
    latest[end.device_id] = end
    if len(latest) >= SAME_FAILURE_DEVICES and all(e.failure == failure for e in latest.values()):
        return Verdict.BROKEN
    return Verdict.FAILED


def same_failure_in_hour(end: CheckEnd, earlier: Iterable[CheckEnd]) -> tuple[CheckEnd, ...]:
    """The ends of the hour before ``end`` (each device's latest) that failed the way it did and were not
    judged broken: the devices a check judged broken at ``end`` set bad wrongly, oldest first."""
    failure = end.failure
    latest: dict[str, CheckEnd] = {}
    for e in sorted(earlier, key=lambda e: (e.at, e.job_pk)):
        if e.weighed and end.at - SAME_FAILURE_WITHIN <= e.at <= end.at and e.job_pk != end.job_pk:
            latest[e.device_id] = e
    return tuple(e for e in latest.values() if not e.broken and failure is not None and e.failure == failure)


@dataclass(frozen=True, slots=True)
class Broken:
    """A check that is broken now: how it fails, the devices it failed on, since when."""

    command: str
    failure: Failure
    devices: tuple[str, ...]
    since: datetime

    def sentence(self) -> str:
        """``exit 127 on board-a, board-b (command not found)``."""
        why = f" ({self.failure.cannot_run})" if self.failure.cannot_run else ""
        return f"{self.failure.words()} on {', '.join(self.devices)}{why}"


def broken_now(command: str, ends: Sequence[CheckEnd]) -> Broken | None:
    """The check broken now, from its ends (any order): broken when its latest weighed end was judged
    broken; since the first of the broken ends that lead up to it."""
    run: list[CheckEnd] = []
    for e in sorted((e for e in ends if e.weighed), key=lambda e: (e.at, e.job_pk)):
        run = [*run, e] if e.broken else []
    if not run:
        return None
    failure = run[-1].failure
    if failure is None:  # a broken end is a failure; a row says otherwise only if edited by hand
        return None
    devices = tuple(sorted({e.device_id for e in run}))
    return Broken(command, failure, devices, run[0].at)
