"""Issue 28, DESIGN.md "A lab problem is not a code failure", across real processes: ``kerrigan serve``, the
GitHub stand-in and ``kerrigan runner`` agents.

A task whose boards are in maintenance or behind an offline runner host, past its ``queue_wait_limit_s``,
ends ``action_required`` (the default ``KERRIGAN_LAB_CONCLUSION``), not ``timed_out``: its check run's title
begins ``Lab problem:`` and its summary keeps every reason it waited, in the diagnostics' words. A task
whose every board exits 75 (a device fault) on all three attempts ends with the lab's conclusion too
(``neutral`` here, as a lab that chose it gets), naming each attempt and its board, not ``failure``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Final

import aiohttp
from sqlalchemy import select

from kerrigan.core.inventory import DeviceState
from kerrigan.store.audit import Change
from kerrigan.store.inventory import set_state
from kerrigan.store.models import RunnerHostRow
from kerrigan.testing.process_lab import (
    ProcessLab,
    finished_check_run,
    jobs_of,
    process_lab,
    push,
    runner_agent,
    session_at,
)

INVENTORY: Final = """
hosts:
  - id: rig-01
  - id: rig-02
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-c, board: modalix, target_type: devkit, os_type: linux, host: rig-02}
"""

WAITS: Final = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  labels: {sdk: "2.2.0"}
  queue_wait_limit_s: 3
tasks:
  - id: smoke
    run: ./scripts/task.sh
    vcpus: 1
"""

FAULTS: Final = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  labels: {sdk: "2.2.0"}
tasks:
  - id: flash
    run: ./scripts/task.sh
    vcpus: 1
"""

DEVICE_FAULT: Final = '#!/bin/sh\necho "no console on $KERRIGAN_DEVICE_ID"\nexit 75\n'


@asynccontextmanager
async def _lab(
    tmp_path: Path, manifest: str, environment: Mapping[str, str] | None = None
) -> AsyncIterator[ProcessLab]:
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/bench.yml": manifest, "scripts/task.sh": DEVICE_FAULT},
        environment={"KERRIGAN_RUNNER_LEASE_S": "4", **(environment or {})},
    ) as lab:
        yield lab


async def _scrape(lab: ProcessLab, conclusion: str) -> float:
    """``kerrigan_sessions_total{conclusion=...}`` as the server's ``/metrics`` says it now."""
    async with aiohttp.ClientSession() as http, http.get(f"{lab.base}/metrics") as answer:
        text = await answer.text()
    wanted = f'kerrigan_sessions_total{{conclusion="{conclusion}"}} '
    found = [line.removeprefix(wanted) for line in text.splitlines() if line.startswith(wanted)]
    return float(found[0]) if found else 0.0


async def _counted(lab: ProcessLab, conclusion: str, timeout: float = 15) -> float:
    deadline = time.monotonic() + timeout
    while (value := await _scrape(lab, conclusion)) < 1 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return value


async def test_a_task_whose_boards_are_out_of_reach_past_its_queue_wait_is_a_lab_problem(
    tmp_path: Path,
) -> None:
    sha = "1" * 40
    async with _lab(tmp_path, WAITS) as lab:
        database = lab.database
        async with database.sessions() as session, session.begin():
            for device, who, why in (("board-a", "hubot", "reflashing"), ("board-b", "octocat", "new cable")):
                change = Change(who, database.clock())
                await set_state(session, device, DeviceState.MAINTENANCE, why, until=None, change=change)
            rig = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == "rig-02"))
            assert rig is not None
            rig.online = False  # its agent is not running
        async with runner_agent(lab, "rig-01"):
            await push(lab, sha)
            finished = await session_at(lab, sha, timeout=60)
            run = await finished_check_run(lab, sha, timeout=60)
            counted = await _counted(lab, "action_required")
        # Read while the lab's database is open: an engine used after its close opens a connection that
        # nothing closes.
        [job] = await jobs_of(lab)
    assert finished.conclusion is not None
    assert finished.conclusion.value == "action_required"
    assert (job.state, job.reason, job.failure_class) == (
        "refused_before_start",
        "queue_wait_exceeded",
        "queue_wait_exceeded",
    )
    # What GitHub shows: the lab's conclusion, not timed_out, with every reason it waited.
    assert (run["status"], run["conclusion"]) == ("completed", "action_required")
    title, summary = run["output"]["title"], run["output"]["summary"]
    assert title == "Lab problem: 1 job did not start (queue_wait_exceeded)"
    assert "its queue-wait budget ran out before it started: waited " in summary
    assert "board-a device in maintenance since " in summary
    assert "by hubot: reflashing" in summary
    assert "board-b device in maintenance since " in summary
    assert "by octocat: new cable" in summary
    assert "board-c runner host rig-02 offline" in summary
    assert "It ends `action_required`" in summary
    assert counted == 1  # kerrigan_sessions_total{conclusion="action_required"}


async def test_a_device_fault_on_every_attempt_is_the_labs_conclusion_naming_each_board(
    tmp_path: Path,
) -> None:
    sha = "2" * 40
    async with (
        _lab(tmp_path, FAULTS, {"KERRIGAN_LAB_CONCLUSION": "neutral"}) as lab,
        runner_agent(lab, "rig-01"),
        runner_agent(lab, "rig-02"),
    ):
        await push(lab, sha)
        finished = await session_at(lab, sha, timeout=120)
        run = await finished_check_run(lab, sha, timeout=60)
        counted = await _counted(lab, "neutral")
        rows = await jobs_of(lab)
    assert finished.conclusion is not None
    assert finished.conclusion.value == "neutral"
    assert [(row.attempt, row.state, row.reason, row.exit_status) for row in rows] == [
        (1, "retried", "device_fault", 75),
        (2, "retried", "device_fault", 75),
        (3, "failed", "device_fault", 75),
    ]
    boards = [row.device_id for row in rows]
    assert sorted(boards) == ["board-a", "board-b", "board-c"]  # each retry off the boards that failed it
    assert (run["status"], run["conclusion"]) == ("completed", "neutral")
    title, summary = run["output"]["title"], run["output"]["summary"]
    assert title == "Lab problem: 1 job failed (device_fault)"
    assert (
        "- `flash`: its command reported a device fault (exit status 75); "
        f"attempt 1 on {boards[0]}, attempt 2 on {boards[1]}, attempt 3 on {boards[2]}"
    ) in summary
    assert f"attempt 3 of 3 on {boards[2]} after device_fault on {boards[1]}" in summary
    assert "It ends `neutral`" in summary
    assert counted == 1
