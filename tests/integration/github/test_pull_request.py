"""``pull_request``: opened, synchronised or reopened against a matching base branch; forks wait."""

from __future__ import annotations

import pytest

from tests.integration.github.conftest import (
    FORK_SHA,
    PULL_REQUEST_WORKFLOWS,
    SHA,
    Harness,
    check_run_name,
    webhook,
)


@pytest.mark.parametrize("action", ["opened", "synchronize", "reopened"])
async def test_pull_request_starts_the_workflows_for_its_base_branch(
    bare_harness: Harness, action: str
) -> None:
    payload = webhook("pull_request-opened") | {"action": action}
    assert await bare_harness.deliver("pull_request", payload) == 202
    await bare_harness.settle()
    assert bare_harness.check_run_names() == [check_run_name(w) for w in PULL_REQUEST_WORKFLOWS]
    sessions = await bare_harness.sessions()
    assert {(s.head_sha, s.pull_request, s.event) for s in sessions} == {(SHA, 7, "pull_request")}


async def test_pull_request_against_an_unlisted_base_branch_starts_nothing(bare_harness: Harness) -> None:
    payload = webhook("pull_request-opened")
    payload["pull_request"]["base"]["ref"] = "develop"
    await bare_harness.deliver("pull_request", payload)
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.github.check_runs == {}
    assert await bare_harness.sessions() == []


async def test_fork_pull_request_check_runs_wait_for_approval_and_say_who_may_give_it(
    bare_harness: Harness,
) -> None:
    await bare_harness.deliver("pull_request", webhook("pull_request-fork"))
    await bare_harness.settle()
    runs = sorted(bare_harness.github.check_runs.values(), key=lambda run: run["name"])
    assert [run["name"] for run in runs] == [check_run_name(w) for w in PULL_REQUEST_WORKFLOWS]
    for run in runs:
        assert (run["head_sha"], run["status"], run["conclusion"]) == (FORK_SHA, "queued", None)
        assert run["output"]["title"] == "Waiting for approval to run on lab hardware"
        summary = run["output"]["summary"]
        assert (
            f"someone with write access to the repository has read this commit and comments "
            f"`/kerrigan approve {FORK_SHA}` on the pull request"
        ) in summary


async def test_fork_pull_request_sessions_are_not_resolved_until_approved(bare_harness: Harness) -> None:
    await bare_harness.deliver("pull_request", webhook("pull_request-fork"))
    await bare_harness.settle()
    sessions = await bare_harness.sessions()
    assert [s.workflow for s in sessions] == list(PULL_REQUEST_WORKFLOWS)
    assert all(s.awaiting_approval and s.resolution.to_document() == {} for s in sessions)
