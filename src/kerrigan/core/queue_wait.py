"""The queue-wait budget (seed 003): how long a job may wait for a device before it is withdrawn.

The clock starts when the job becomes dispatchable. It runs while the job waits on shared things (a busy
device, a runner host's capacity, a fence) and pauses while the only thing it waits on is its own session's
earlier job; when another blocker appears it resumes from what it had spent. When the budget runs out the
job is withdrawn, unless the runner has already answered ``started``: the runner's answer decides.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from kerrigan.core.manifest import DEFAULT_QUEUE_WAIT_LIMIT_S

DEFAULT_LIMIT_S = float(DEFAULT_QUEUE_WAIT_LIMIT_S)  # the manifest's default


@dataclass(frozen=True, slots=True)
class QueueWait:
    """A job's queue-wait clock; times are seconds passed in by the caller."""

    limit_s: float = DEFAULT_LIMIT_S
    spent_s: float = 0.0
    since: float | None = None  # when the clock last started running; None while paused

    @classmethod
    def start(cls, ready_at: float, limit_s: float = DEFAULT_LIMIT_S) -> QueueWait:
        """A clock that runs from the moment the job became dispatchable."""
        return cls(limit_s, 0.0, ready_at)

    def spent(self, now: float) -> float:
        """Seconds of budget used up to ``now``."""
        running = max(0.0, now - self.since) if self.since is not None else 0.0
        return self.spent_s + running

    def remaining(self, now: float) -> float:
        """Seconds of budget left (never below zero)."""
        return max(0.0, self.limit_s - self.spent(now))

    def exceeded(self, now: float) -> bool:
        """Whether the budget has run out."""
        return self.spent(now) >= self.limit_s

    def observe(self, now: float, *, counts: bool) -> QueueWait:
        """What the job waits on changed at ``now``: run the clock if it ``counts``, else pause it."""
        if counts:
            return self if self.since is not None else replace(self, since=now)
        if self.since is None:
            return self
        return replace(self, spent_s=self.spent(now), since=None)


class RunnerAnswer(enum.StrEnum):
    """What a runner says when asked to withdraw a job whose budget ran out."""

    WITHDRAWN = "withdrawn"
    STARTED = "started"


class WithdrawalOutcome(enum.StrEnum):
    """How the job goes on after the withdrawal request."""

    REFUSED_BEFORE_START = "refused_before_start"  # reason: queue_wait_exceeded
    RUNS = "runs"  # too late: it started, and it runs to its end


def withdrawal_outcome(answer: RunnerAnswer) -> WithdrawalOutcome:
    """Only the runner's answer decides: a job it already started is never reported as withdrawn."""
    return (
        WithdrawalOutcome.RUNS if answer is RunnerAnswer.STARTED else WithdrawalOutcome.REFUSED_BEFORE_START
    )
