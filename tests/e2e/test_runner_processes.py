"""Push → devices → runner → check run, across real processes on loopback.

``kerrigan serve``, ``kerrigan runner`` and the GitHub stand-in each run as their own process. A push runs
a two-task manifest whose commands are scripts in the pushed repository, on two devices of one runner host:
the session ends ``success`` with both jobs' output. Then the runner is killed in the middle of a job, and
the session ends with the lab's conclusion (``action_required``: a lost runner is the lab's problem, not the
code's, issue 28) with ``runner_lost`` within the lease time (shortened here to four seconds).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kerrigan.runner.isolation.cgroups import empty
from kerrigan.runner.records import JobRecord, JobRecords
from kerrigan.store.jobs import output
from kerrigan.testing.process_lab import ProcessLab, jobs_of, process_lab, push, runner_agent, session_at

LEASE_S = 4

INVENTORY = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""

MANIFEST = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 2
  labels: {sdk: "2.2.0"}
retry: {infrastructure: 0}  # the killed runner's job ends the session, not retried elsewhere
tasks:
  - id: flash
    run: ./scripts/flash.sh
    vcpus: 1
  - id: smoke
    run: ./scripts/smoke.sh
    vcpus: 1
"""

# On commits starting with b the flash hangs (the test finds it by its job record, as root: the job runs as
# its own user with a private /tmp where the host allows it).
FLASH = """#!/bin/sh
echo "flashing $KERRIGAN_DEVICE_ID"
case "$GITHUB_SHA" in
  b*) echo hanging; sleep 300 ;;
esac
echo "flashed"
"""

SMOKE = """#!/bin/sh
echo "smoke on $KERRIGAN_DEVICE_ID at $GITHUB_SHA"
"""


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[ProcessLab]:
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={
            ".kerrigan/workflows/bench.yml": MANIFEST,
            "scripts/flash.sh": FLASH,
            "scripts/smoke.sh": SMOKE,
        },
        environment={"KERRIGAN_RUNNER_LEASE_S": str(LEASE_S)},
    ) as started:
        yield started


def hanging_job(lab: ProcessLab) -> JobRecord | None:
    """The running flash job of a b-commit, from the runner's records, once its command has started."""
    for record in JobRecords(lab.folder / "rig-01").load_all():
        if (
            record.state == "running"
            and record.pid is not None
            and record.offer.get("sha", "").startswith("b")
        ):
            output = JobRecords(lab.folder / "rig-01").output_path(record.id)
            pages = list((output.parent / "pages").glob("*.log"))
            if any("hanging" in page.read_text() for page in pages) or (
                output.exists() and "hanging" in output.read_text()
            ):
                return record
    return None


async def test_a_push_runs_on_a_runner_process_and_a_killed_runner_ends_the_check_run_runner_lost(
    lab: ProcessLab,
) -> None:
    async with runner_agent(lab, "rig-01") as agent:
        first = "a" * 40
        await push(lab, first)
        finished = await session_at(lab, first, timeout=60)
        assert finished.conclusion is not None
        assert finished.conclusion.value == "success"
        rows = await jobs_of(lab)
        assert sorted((row.task_id, row.state, row.exit_status) for row in rows) == [
            ("flash", "succeeded", 0),
            ("smoke", "succeeded", 0),
        ]
        assert {row.device_id for row in rows} == {"board-a", "board-b"}
        async with lab.database.sessions() as db:
            texts = {row.task_id: "".join(data for _, data in await output(db, row.pk)) for row in rows}
        assert "flashed" in texts["flash"]
        assert f"at {first}" in texts["smoke"]

        # A commit whose flash script hangs: kill the runner while it runs.
        second = "b" * 40
        await push(lab, second)
        deadline = time.monotonic() + 60
        while (hung := hanging_job(lab)) is None:
            assert time.monotonic() < deadline, "the hanging job never started"
            await asyncio.sleep(0.1)
        agent.kill()
        await agent.wait()
        killed_at = time.monotonic()
        lost = await session_at(lab, second, timeout=LEASE_S + 20)
        waited = time.monotonic() - killed_at
    with contextlib.suppress(ProcessLookupError):
        os.killpg(hung.pid, signal.SIGKILL)  # the agent is gone: what it ran is ours to end
    empty(hung.cgroup)
    assert lost.conclusion is not None
    assert lost.conclusion.value == "action_required"  # was "failure" before issue 28
    hung = [row for row in await jobs_of(lab) if row.task_id == "flash" and row.state == "failed"]
    assert [row.reason for row in hung] == ["runner_lost"]
    assert waited < LEASE_S + 10, f"the session ended {waited:.1f} s after the runner died"
