"""``workflow_run``: workflows that follow named GitHub Actions workflows."""

from __future__ import annotations

import pytest

from tests.integration.github.conftest import REPO, SHA, Harness, check_run_name, manifest_files, webhook

TASK = "tasks:\n  - id: flash\n    run: ./scripts/flash.sh\n"
AFTER_BUILD = {
    ".kerrigan/workflows/after-build.yml": (
        "name: after-build\non: {workflow_run: {workflows: [build-firmware]}}\n" + TASK
    ),
    ".kerrigan/workflows/after-release-build.yml": (
        "name: after-release-build\n"
        "on: {workflow_run: {workflows: [build-firmware], branches: ['release/*']}}\n" + TASK
    ),
}


@pytest.mark.parametrize(
    ("workflow", "action", "branch", "started"),
    [
        pytest.param("build-firmware", "completed", "main", ["after-build", "hil-smoke"], id="completed"),
        pytest.param(
            "build-firmware",
            "completed",
            "release/2.2",
            ["after-build", "after-release-build", "hil-smoke"],
            id="completed-on-release-branch",
        ),
        pytest.param("build-firmware", "requested", "main", [], id="requested"),
        pytest.param("lint", "completed", "main", [], id="other-workflow"),
    ],
)
async def test_workflow_run_starts_the_workflows_that_follow_its_completed_run(
    bare_harness: Harness, workflow: str, action: str, branch: str, started: list[str]
) -> None:
    bare_harness.github.add_commit(REPO, SHA, manifest_files() | AFTER_BUILD)
    payload = webhook("workflow_run-completed") | {"action": action}
    payload["workflow"]["name"] = payload["workflow_run"]["name"] = workflow
    payload["workflow_run"]["head_branch"] = branch
    await bare_harness.deliver("workflow_run", payload)
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.check_run_names() == [check_run_name(w) for w in started]
    assert {(s.event, s.head_sha) for s in await bare_harness.sessions()} <= {("workflow_run", SHA)}


async def test_a_run_of_a_forks_commit_waits_for_approval_like_its_pull_request(
    bare_harness: Harness,
) -> None:
    bare_harness.github.add_commit(REPO, SHA, AFTER_BUILD)
    payload = webhook("workflow_run-completed")
    payload["workflow_run"]["head_repository"]["full_name"] = "mona/firmware"
    await bare_harness.deliver("workflow_run", payload)
    await bare_harness.settle()
    [session] = await bare_harness.sessions()
    assert session.awaiting_approval
    [run] = bare_harness.github.check_runs.values()
    assert (run["status"], run["output"]["title"]) == (
        "queued",
        "Waiting for approval to run on lab hardware",
    )


async def test_a_run_whose_head_repository_is_gone_waits_for_approval_without_secrets(
    bare_harness: Harness,
) -> None:
    # A deleted fork: GitHub sends head_repository null. Its code is not the repository's own.
    bare_harness.github.add_commit(REPO, SHA, AFTER_BUILD)
    payload = webhook("workflow_run-completed")
    payload["workflow_run"]["head_repository"] = None
    await bare_harness.deliver("workflow_run", payload)
    await bare_harness.settle()
    [session] = await bare_harness.sessions()
    assert (session.awaiting_approval, session.secrets_allowed) == (True, False)
