"""A board's recovery: what brings a device with power back after a job left it in doubt.

After an infrastructure failure on a device whose runner host switches its power, or a cancelled or
timed-out job there, the agent powers the board off and the server queues a recovery: a job of its own on
the device (a health-check session, task :data:`RECOVERY_TASK`), ahead of the device's next job, that the
agent runs as it runs any job on a wired board: power-cycled, its boot waited for, then the device's health
check (or :data:`RECOVERY_COMMAND` when it has none). A recovery that succeeds sets the device ``good``; one
that fails is followed by another, until :data:`FAILED_RECOVERIES_FOR_BAD` in a row set it ``bad`` with the
console's last lines as the evidence. A later recovery that boots sets it ``good`` again.

A board whose power did not answer (its PDU silent, at the job's end or at the recovery's power cycle) is in
doubt too, but its power's silence says nothing of the board: such a recovery is tried again without
counting, the device ``unknown`` meanwhile, and only a power silent for :data:`POWER_WAIT_FOR_BAD_S` sets
it ``bad``.

Everything here is pure: the store applies it.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

from kerrigan.core.lifecycle import (
    BOARD_FAULTS,
    POWER_FAILED,
    POWER_WAIT_S,
    FailureClass,
    JobState,
    power_unanswered,
)

RECOVERY_TASK: Final = "recovery"
RECOVERY_COMMAND: Final = "true"  # a device without a health check: the boot alone is the test
FAILED_RECOVERIES_FOR_BAD: Final = 3
EVIDENCE_LINES: Final = 5  # of the console's last lines, how many the device's health reason keeps
REASON_MAX: Final = 500  # a device's health reason is at most this long
# A PDU down for a lab's ordinary outage (minutes) leaves its boards waiting; an hour is the board's own.
POWER_WAIT_FOR_BAD_S: Final = POWER_WAIT_S  # as long as a job waits for it (kerrigan.core.lifecycle)


class RecoveryOutcome(enum.StrEnum):
    """What a recovery's end says of its board (``kerrigan_device_recoveries_total``'s ``outcome``)."""

    RECOVERED = "recovered"  # booted (and its check passed): the device is good
    FAILED = "failed"  # did not boot, or its check failed: another recovery follows
    BAD = "bad"  # the last of too many failures in a row: the device is bad until one boots
    WAITING_FOR_POWER = "waiting_for_power"  # its power did not answer: tried again, not counted
    NONE = "none"  # cancelled, or it never got the board: says nothing of the board


def needs_recovery(state: JobState, klass: FailureClass | None) -> bool:
    """Whether a job that ended in ``state`` (failure class ``klass``) on a board the agent powered off
    leaves that board to be recovered before its next job."""
    return klass is FailureClass.INFRASTRUCTURE or state in (JobState.CANCELLED, JobState.TIMED_OUT)


def recovery_outcome(
    state: JobState,
    reason: str | None,
    *,
    started: bool,
    failures_before: int,
    power_waited_s: float | None = None,
) -> RecoveryOutcome:
    """What a recovery that ended in ``state`` for ``reason`` says, ``failures_before`` recoveries of the
    device having failed in a row before it, and its power having not answered for ``power_waited_s``
    (``None``: it answered the last time). A recovery that never started failed only if its board did (its
    boot); one whose power did not answer waits for it, until :data:`POWER_WAIT_FOR_BAD_S`; one stopped by a
    person, or whose host went away, says nothing."""
    if state is JobState.SUCCEEDED:
        return RecoveryOutcome.RECOVERED
    if power_unanswered(reason) and state is not JobState.CANCELLED:
        if power_waited_s is not None and power_waited_s >= POWER_WAIT_FOR_BAD_S:
            return RecoveryOutcome.BAD
        return RecoveryOutcome.WAITING_FOR_POWER
    if state is JobState.CANCELLED or (not started and reason not in BOARD_FAULTS):
        return RecoveryOutcome.NONE
    if failures_before + 1 >= FAILED_RECOVERIES_FOR_BAD:
        return RecoveryOutcome.BAD
    return RecoveryOutcome.FAILED


def why_queued(reason: str | None, state: JobState, job_pk: int) -> str:
    """Why a recovery was queued after job ``job_pk``, in the device page's words."""
    return f"recovery after {reason or state.value} (job {job_pk})"


def why_again(failures: int, reason: str | None) -> str:
    """Why the next recovery was queued after ``failures`` failed in a row (the last for ``reason``)."""
    return f"recovery {failures + 1} of {FAILED_RECOVERIES_FOR_BAD}: the last {reason or 'failed'}"


def why_waiting(reason: str | None) -> str:
    """Why the next recovery was queued after one whose power did not answer."""
    return f"recovery waits for its power: the last {reason or POWER_FAILED}"


def waiting_reason(detail: str | None) -> str:
    """The health reason of a device whose recovery waits for its power (the power's failure ``detail``)."""
    words = "its power did not answer; its recovery is tried again until it does (not counted against it)"
    text = f"{words}: {detail}" if detail else words
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"


def power_bad_reason(waited_s: float) -> str:
    """The health reason of a device whose power has not answered for ``waited_s``."""
    return f"its power has not answered for {waited_s / 60:.0f} min (every recovery's power cycle failed)"


def bad_reason(failures: int, reason: str | None, console: Sequence[str]) -> str:
    """The health reason of a device set bad by ``failures`` failed recoveries (the last for ``reason``),
    with the console's last lines as the evidence, at most :data:`REASON_MAX` characters."""
    words = f"{failures} recoveries failed in a row (the last {reason or 'failed'})"
    lines = [line.strip() for line in console if line.strip()][-EVIDENCE_LINES:]
    if not lines:
        return f"{words}; the console said nothing"
    evidence = " | ".join(lines)
    text = f"{words}; the console's last lines: {evidence}"
    return text if len(text) <= REASON_MAX else text[: REASON_MAX - 1] + "…"
