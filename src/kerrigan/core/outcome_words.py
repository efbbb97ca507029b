"""A task's outcome in words, the same on the check run and on the session and explain pages."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kerrigan.core.matching import Outcome

OUTCOME_WORDS: Final[Mapping[Outcome, str]] = {
    Outcome.ELIGIBLE: "ready: waiting for dispatch",
    Outcome.WAITING: "waiting: matching devices are busy or offline",
    Outcome.UNSCHEDULABLE: "unschedulable: no device can ever match",
}
"""A task that holds devices (or a gang's role)."""

HOST_OUTCOME_WORDS: Final[Mapping[Outcome, str]] = {
    Outcome.ELIGIBLE: "ready: waiting for dispatch (no board)",
    Outcome.WAITING: "waiting: matching runner hosts are offline or paused",
    Outcome.UNSCHEDULABLE: "unschedulable: no runner host can ever run it",
}
"""A task with ``board: none``: its runner hosts decide."""


def outcome_words(outcome: Outcome, *, boardless: bool = False, never: str | None = None) -> str:
    """``outcome`` in words: a boardless task's by its runner hosts, a gang no runner host can ever hold
    (``never``: why) unschedulable for that reason."""
    if boardless:
        return HOST_OUTCOME_WORDS[outcome]
    if never:
        return f"unschedulable: {never}"
    return OUTCOME_WORDS[outcome]
