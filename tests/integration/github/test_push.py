"""A push, end to end: signed delivery in, manifests read at the commit, check runs out."""

from __future__ import annotations

from tests.integration.github.conftest import SHA, Harness, push_payload


async def test_push_to_main_creates_a_check_run_per_triggered_workflow(harness: Harness) -> None:
    assert await harness.deliver("push", push_payload()) == 202
    await harness.settle()
    names = sorted(run["name"] for run in harness.github.check_runs.values())
    # on push to main: hil-smoke (main), select-pool ([push]), select-device (main), task-refinement,
    # legacy (**), waiting, typo; org-class runs on pull_request only.
    assert names == sorted(f"kerrigan / {n}" for n in (
        "hil-smoke", "select-pool", "select-device", "task-refinement", "legacy", "waiting", "typo"))
    smoke = harness.github.runs_named("kerrigan / hil-smoke")[0]
    assert smoke["head_sha"] == SHA
    assert smoke["status"] == "queued"
    assert smoke["details_url"].startswith("http://kerrigan.test/sessions/")
    typo = harness.github.runs_named("kerrigan / typo")[0]
    assert (typo["status"], typo["conclusion"]) == ("completed", "failure")
    assert "did you mean 'form_factor'" in typo["output"]["summary"]
