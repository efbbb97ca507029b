"""The queue-wait budget (seed 003): how long a job may wait for a device before it is withdrawn.

The clock starts when the job becomes dispatchable. It runs while the job waits on shared things (a busy
device, a runner host's capacity, a fence) and pauses while the only thing it waits on is its own session's
earlier job; when another blocker appears it resumes from what it had spent. When the budget runs out the
job is withdrawn, unless the runner has already answered ``started``: the runner's answer decides.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from kerrigan.core.dispatch_order import WaitKind
from kerrigan.core.manifest import DEFAULT_QUEUE_WAIT_LIMIT_S
from kerrigan.core.matching import HostResolution, TaskResolution

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


# -- what a job waited on, kept when its budget ends it ------------------------------------------------

WAITED_ROOM: Final = 500  # a job's ``detail`` keeps this much
# What a job that waited on no device's or host's reason waited on (the dispatcher's words for it).
WAIT_KIND_WORDS: Final = {
    WaitKind.DEVICE: "every device it may use was busy",
    WaitKind.CAPACITY: "the runner hosts of its free devices lacked the vCPUs it claims",
    WaitKind.FENCED: "its free devices were kept for an older job that needs them",
    WaitKind.GANG: "no one runner host had a free device for every role",
    WaitKind.OWN_SESSION: "its session held as many devices as its max_devkits allows",
    WaitKind.HOST: "no runner host it may run on was online and not paused",
}


def blockers_of(resolution: TaskResolution, role: str | None = None) -> list[tuple[str, str]]:
    """The devices a task could run on but for something that may pass (maintenance, reserved, health bad,
    absent, its runner host offline or paused, busy), each with every such reason in the diagnostics'
    words: ``("modalix-bluebox", "device in maintenance since 2026-12-01 09:12 by hubot: reflashing")``.
    A gang's ``role`` leads its devices' reasons."""
    lead = f"role {role}: " if role else ""
    return [
        (verdict.id, lead + "; ".join(reason.text for reason in verdict.reasons))
        for verdict in resolution.rejected
        if not verdict.never
    ]


def host_blockers_of(resolution: HostResolution) -> list[tuple[str, str]]:
    """:func:`blockers_of` for a task with ``board: none``: the runner hosts it could run on but for
    something that may pass (offline, paused, not reported yet)."""
    return [
        (verdict.host, "; ".join(reason.text for reason in verdict.reasons))
        for verdict in resolution.rejected
        if not verdict.never
    ]


def waited_words(
    spent_s: float, blockers: Sequence[tuple[str, str]], otherwise: str = "", room: int = WAITED_ROOM
) -> str:
    """What a job its queue-wait budget ended waited on, within ``room`` characters: ``waited 300 s:
    modalix-bluebox device in maintenance since 2026-12-01 09:12 by hubot: reflashing; modalix-redbox
    runner host lab-a-01 offline``. Devices with the same reasons share them (``board-a, board-b runner host
    rig-02 offline``); what does not fit is counted (``and 3 more devices``). ``otherwise`` says what it
    waited on when no device or host had a reason (every one busy, say)."""
    lead = f"waited {spent_s:.0f} s"
    grouped: dict[str, list[str]] = {}
    for subject, reasons in blockers:
        grouped.setdefault(reasons, []).append(subject)
    if not grouped:
        return f"{lead}: {otherwise}"[:room] if otherwise else lead
    parts: list[str] = []
    left = len(blockers)
    for reasons, subjects in grouped.items():
        part = f"{', '.join(subjects)} {reasons}"
        more = left - len(subjects)
        tail = f"; and {more} more" if more else ""
        if len(lead) + 2 + len("; ".join([*parts, part])) + len(tail) > room:
            break
        parts.append(part)
        left = more
    if not parts:  # the first group's devices alone are too many: as many named as fit, the rest counted
        reasons, subjects = next(iter(grouped.items()))
        named = list(subjects)
        while named:
            rest = len(blockers) - len(named)
            text = f"{lead}: {', '.join(named)}{f' and {rest} more' if rest else ''} {reasons}"
            if len(text) <= room:
                return text
            named.pop()
        return f"{lead}: {len(blockers)} {reasons}"[:room]
    others = f"; and {left} more" if left else ""
    return f"{lead}: {'; '.join(parts)}{others}"
