"""Re-runs from GitHub's UI: a check run's *Re-run* and *Retry* action, and *Re-run all* on its suite."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.integration.github.conftest import REPO, SHA, Harness, check_run_name, manifest_files, webhook

TYPO = check_run_name("typo")


# Three manifests are enough here: two run on push, org-class does not. Nothing here depends on the
# inventory, so the tests run on an empty one.
FILES = manifest_files("hil-smoke.yml", "org-class.yml", "typo.yml")
PUSHED = ("hil-smoke", "typo")


@pytest.fixture
async def pushed(bare_harness: Harness) -> Harness:
    """The push of ``fixtures/webhooks/push.json`` processed: a check run per push workflow at SHA."""
    bare_harness.github.add_commit(REPO, SHA, FILES)
    await bare_harness.deliver("push", webhook("push"))
    await bare_harness.settle()
    return bare_harness


def check_run_event(harness: Harness, action: str, **extra: Any) -> dict[str, Any]:
    """``fixtures/webhooks/check_run-rerequested.json`` for the typo workflow's check run."""
    [run] = harness.github.runs_named(TYPO)
    payload = webhook("check_run-rerequested") | {"action": action, **extra}
    payload["check_run"].update(id=run["id"], name=TYPO, head_sha=SHA, external_id=run["external_id"])
    return payload


@pytest.mark.parametrize(
    ("action", "extra"),
    [
        pytest.param("rerequested", {}, id="re-run"),
        pytest.param("requested_action", {"requested_action": {"identifier": "retry"}}, id="retry-action"),
    ],
)
async def test_check_run_rerun_creates_a_fresh_session_and_check_run_for_the_same_commit(
    pushed: Harness, action: str, extra: dict[str, Any]
) -> None:
    await pushed.deliver("check_run", check_run_event(pushed, action, **extra))
    await pushed.settle()
    old, new = pushed.github.runs_named(TYPO)
    assert (old["head_sha"], new["head_sha"]) == (SHA, SHA)
    first, second = await pushed.sessions(workflow="typo")
    assert first.id != second.id
    assert (first.check_run_id, second.check_run_id) == (old["id"], new["id"])
    assert new["details_url"].endswith(f"/sessions/{second.id}")


@pytest.mark.parametrize(
    ("action", "extra", "name"),
    [
        pytest.param(
            "requested_action", {"requested_action": {"identifier": "lgtm"}}, TYPO, id="other-action"
        ),
        pytest.param("rerequested", {}, "build / firmware", id="not-ours"),
    ],
)
async def test_check_run_request_that_is_not_a_rerun_of_ours_is_ignored(
    pushed: Harness, action: str, extra: dict[str, Any], name: str
) -> None:
    payload = check_run_event(pushed, action, **extra)
    payload["check_run"]["name"] = name
    await pushed.deliver("check_run", payload)
    await pushed.settle()
    [*_, delivery] = await pushed.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert len(pushed.github.check_runs) == len(PUSHED)
    assert len(await pushed.sessions()) == len(PUSHED)


async def test_check_suite_rerun_starts_fresh_sessions_for_every_workflow_that_ran_at_the_commit(
    pushed: Harness,
) -> None:
    await pushed.deliver("check_suite", webhook("check_suite-rerequested"))
    await pushed.settle()
    runs = Counter(run["name"] for run in pushed.github.check_runs.values())
    assert runs == {check_run_name(w): 2 for w in PUSHED}
    sessions = await pushed.sessions(head_sha=SHA)
    assert len({s.id for s in sessions}) == 2 * len(PUSHED)
