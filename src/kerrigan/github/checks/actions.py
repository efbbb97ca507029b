"""The buttons a check run shows: *Cancel* while it can still be stopped; once it completed, *Retry*, and
*Hold board* beside it when a job failed on a board (GitHub shows at most 3: these are never more than 2)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from kerrigan.github.checks.limits import MAX_ACTIONS

RETRY_ACTION: Final = {
    "label": "Retry",
    "description": "Run this workflow again",
    "identifier": "retry",
}
CANCEL_ACTION: Final = {
    "label": "Cancel",
    "description": "Stop this session's jobs",
    "identifier": "cancel",
}

HOLD_ACTION: Final = {
    "label": "Hold board",
    "description": "Reserve the failed job's board for you",
    "identifier": "hold",
}


def validate_actions(actions: Sequence[dict[str, Any]]) -> None:
    """GitHub's rules for actions, checked before sending (and by the stand-in on receipt)."""
    if len(actions) > MAX_ACTIONS:
        raise ValueError(f"at most {MAX_ACTIONS} actions, not {len(actions)}")
    for action in actions:
        if len(action["label"]) > 20 or len(action["description"]) > 40 or len(action["identifier"]) > 20:
            raise ValueError(f"action {action['identifier']!r} breaks GitHub's length limits")
