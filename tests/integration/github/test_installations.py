"""``installation`` and ``installation_repositories`` keep the list of covered repositories current."""

from __future__ import annotations

from typing import Any

import pytest

from kerrigan.store.installations import repositories
from tests.integration.github.conftest import INSTALLATION, Harness, webhook

SENSORS = {
    "id": 563413001,
    "node_id": "MDEwOlJlcG9zaXRvcnk1NjM0MTMwMDE=",
    "name": "sensors",
    "full_name": "octo/sensors",
    "private": False,
}


def _created() -> dict[str, Any]:
    return webhook("installation-created")


def _changed(action: str, added: list[dict[str, Any]], removed: list[dict[str, Any]]) -> dict[str, Any]:
    created = _created()
    return {
        "action": action,
        "installation": created["installation"],
        "repository_selection": "selected",
        "repositories_added": added,
        "repositories_removed": removed,
        "requester": None,
        "sender": created["sender"],
    }


BOOTLOADER = _created()["repositories"][1]

CREATED = ("installation", _created())


@pytest.mark.parametrize(
    ("deliveries", "expected"),
    [
        pytest.param([CREATED], ["octo/bootloader", "octo/firmware"], id="created"),
        pytest.param([CREATED, ("installation", _created() | {"action": "deleted"})], [], id="deleted"),
        pytest.param(
            [CREATED, ("installation_repositories", _changed("added", [SENSORS], []))],
            ["octo/bootloader", "octo/firmware", "octo/sensors"],
            id="repositories-added",
        ),
        pytest.param(
            [CREATED, ("installation_repositories", _changed("removed", [], [BOOTLOADER]))],
            ["octo/firmware"],
            id="repositories-removed",
        ),
    ],
)
async def test_installation_events_keep_the_covered_repositories_current(
    bare_harness: Harness, deliveries: list[tuple[str, dict[str, Any]]], expected: list[str]
) -> None:
    for event, payload in deliveries:
        assert await bare_harness.deliver(event, payload) == 202
        await bare_harness.settle()
    assert all(d.error is None for d in await bare_harness.deliveries())
    async with bare_harness.database.sessions() as session:
        assert await repositories(session) == [(name, INSTALLATION) for name in expected]
