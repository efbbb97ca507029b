"""A killed runner's job is retried on another device, to a green check run, across real processes.

``kerrigan serve``, the GitHub stand-in and two ``kerrigan runner`` processes (rig-01 with board-a, rig-02
with board-b). Both tasks hang on board-a; rig-01's runner is killed while one of them hangs there. Its
lease ends (four seconds here), the job fails ``runner_lost`` (the lab's failure), and the manifest's
default retry runs it again off board-a, on board-b: the check run at the stand-in ends ``success`` and
its summary lists both attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from kerrigan.runner.isolation.cgroups import empty
from kerrigan.runner.records import JobRecords
from kerrigan.testing.process_lab import ProcessLab, check_runs, jobs_of, push, runner_agent, session_at
from tests.e2e.conftest import LEASE_S


async def test_a_killed_runners_job_is_retried_on_another_device_to_a_green_check_run(
    rigs: ProcessLab,
) -> None:
    sha = "c" * 40
    async with runner_agent(rigs, "rig-01") as doomed, runner_agent(rigs, "rig-02"):
        await push(rigs, sha)
        records = JobRecords(rigs.folder / "rig-01")
        deadline = time.monotonic() + 60
        while not (hung := [r for r in records.load_all() if r.state == "running" and r.pid is not None]):
            assert time.monotonic() < deadline, "no job started on board-a"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # it has printed "hanging" and sleeps
        doomed.kill()
        await doomed.wait()
        finished = await session_at(rigs, sha, timeout=LEASE_S + 60)
    for record in hung:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGKILL)  # the agent is gone: what it ran is ours to end
        empty(record.cgroup)
    assert finished.conclusion is not None
    assert finished.conclusion.value == "success"
    rows = await jobs_of(rigs)
    [lost] = [row for row in rows if row.state == "retried"]
    assert (lost.reason, lost.failure_class, lost.device_id) == ("runner_lost", "infrastructure", "board-a")
    [again] = [row for row in rows if row.retry_of == lost.pk]
    assert (again.task_id, again.state, again.attempt, again.device_id) == (
        lost.task_id,
        "succeeded",
        2,
        "board-b",
    )
    # What GitHub shows: one check run, green, its summary naming the lost attempt and the one that passed.
    [run] = await check_runs(rigs, sha)
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    summary = run["output"]["summary"]
    assert "runner_lost" in summary
    assert "attempt 2" in summary.lower()
