"""Which failed sessions ``/kerrigan retry`` leaves alone: those a re-run at the same commit would fail the
same way."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kerrigan.core.resolution import Resolution
from kerrigan.testing import builders

ERROR = {"path": ".kerrigan/workflows/hil.yml", "line": 7, "column": 3, "field": "on", "message": "bad"}


@pytest.mark.parametrize(
    ("resolution", "reason"),
    [
        ({"errors": [ERROR]}, "its manifest has errors: .kerrigan/workflows/hil.yml:7: bad"),
        (
            {"errors": [ERROR, ERROR | {"line": 9}]},
            "its manifest has errors: .kerrigan/workflows/hil.yml:7: bad (and 1 more)",
        ),
        (
            {"tasks": [{"id": "smoke", "outcome": "eligible"}, {"id": "soak", "outcome": "unschedulable"}]},
            "task soak can never be scheduled on the lab's devices",
        ),
        ({"tasks": [{"id": "smoke", "outcome": "waiting"}]}, None),  # busy devices free up: it may pass
        ({"errors": [], "tasks": "not a list"}, None),
    ],
)
def test_a_session_that_would_fail_the_same_way_says_why(
    resolution: dict[str, Any], reason: str | None
) -> None:
    # Set after building: the builder reads a resolution's tasks, and an odd shape is the point here.
    session = dataclasses.replace(
        builders.session("1111-2222"), resolution=Resolution.from_document(resolution)
    )
    assert session.cannot_pass() == reason
