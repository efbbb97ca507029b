"""The task's ``power`` as the agent reads it from an offer: ``keep`` only when the offer says so; an older
server's offer (none) and a value this agent does not know power-cycle, as every job did before the key."""

from __future__ import annotations

import pytest

from kerrigan.core.manifest import PowerChoice
from kerrigan.runner.wired_jobs import offered_power


@pytest.mark.parametrize(
    ("offer", "choice"),
    [
        ({"power": "keep"}, PowerChoice.KEEP),
        ({"power": "cycle"}, PowerChoice.CYCLE),
        ({}, PowerChoice.CYCLE),
        ({"power": None}, PowerChoice.CYCLE),
        ({"power": "KEEP"}, PowerChoice.CYCLE),
        ({"power": "hibernate"}, PowerChoice.CYCLE),
        ({"power": ["keep"]}, PowerChoice.CYCLE),
    ],
)
def test_the_offer_says_keep_or_the_boards_are_cycled(offer: dict[str, object], choice: PowerChoice) -> None:
    assert offered_power(offer) is choice
