"""``merge_group`` (checks_requested): the merge queue's commit, as gate sessions."""

from __future__ import annotations

from tests.integration.github.conftest import MERGE_SHA, Harness, check_run_name, webhook


async def test_merge_group_starts_gate_sessions_for_the_merge_queue_workflows(bare_harness: Harness) -> None:
    assert await bare_harness.deliver("merge_group", webhook("merge_group-checks_requested")) == 202
    await bare_harness.settle()
    sessions = await bare_harness.sessions(head_sha=MERGE_SHA)
    # Of the example manifests only hil-smoke has on.merge_group.
    assert [(s.workflow, s.event, s.priority) for s in sessions] == [("hil-smoke", "merge_group", "gate")]
    [run] = bare_harness.github.check_runs.values()
    assert (run["name"], run["head_sha"]) == (check_run_name("hil-smoke"), MERGE_SHA)
