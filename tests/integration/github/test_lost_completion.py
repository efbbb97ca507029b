"""The update that completes a check run with failed tests, done by GitHub but its answer lost: the retry
asks GitHub what it shows and sends nothing twice (GitHub adds up annotations), through real agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import HIL, RESULTS, AgentFactory, completed, markers, start_both

UPDATE = r"/repos/[^/]+/[^/]+/check-runs/\d+$"
# The job waits for the test: the fault is armed while nothing else is on its way to GitHub.
GATED = HIL.replace("#!/bin/sh\n", "#!/bin/sh\nwhile [ ! -f go ]; do sleep 0.05; done\n", 1)


async def test_a_completing_update_whose_answer_was_lost_adds_its_annotations_once(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    await start_both(harness, agents)
    files = {".kerrigan/workflows/results.yml": RESULTS, "scripts/hil.sh": GATED, "tests/test_uart.py": "x\n"}
    [run] = await harness.push_commit(files)
    shown: dict[str, Any] = harness.github.check_runs[run["id"]]

    async def running_and_shown() -> bool:
        [session] = await harness.sessions(workflow="results")
        return (
            bool(markers(tmp_path, "scripts"))
            and shown["status"] == "in_progress"
            and (session.shown_version == session.version)
        )

    await wait_until(running_and_shown, what="the job running, GitHub showing it")
    lost = harness.github.faults.inject("PATCH", UPDATE, act_first=True, drop=True)
    [workspace] = [path.parent for path in markers(tmp_path, "scripts")]
    (workspace / "go").write_text("")
    await completed(harness, run)

    async def caught_up() -> bool:
        [session] = await harness.sessions(workflow="results")
        return session.shown_version == session.version and session.state.value == "completed"

    await wait_until(caught_up, what="the check run shown completed")
    assert lost.hits == 1
    patches = [r for r in harness.requests("PATCH", f"/check-runs/{run['id']}") if r.body.get("conclusion")]
    assert patches[0].status == 0  # the fault met the completing update: GitHub did it, the answer was lost
    assert [r.status for r in patches] == [0]  # and it was not sent again
    assert shown["conclusion"] == "failure"
    [annotation] = shown["output"]["annotations"]
    assert (annotation["path"], annotation["start_line"]) == ("tests/test_uart.py", 42)
    assert harness.requests("GET", f"/check-runs/{run['id']}")  # GitHub was asked what it shows
