"""Issue 28, DESIGN.md "A lab problem is not a code failure", across real processes (``kerrigan serve``, the
GitHub stand-in, ``kerrigan runner`` agents): a job that fails on a board that fails its task far more often
than its peers (a *suspect*) is retried once on a peer that is not (``retry: {suspect: 1}``, the default),
and the push goes green when it passes there, its check run naming both attempts.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Final

from sqlalchemy import select

from kerrigan.store.models import JobRow, SessionRow
from kerrigan.testing.history import runs_of
from kerrigan.testing.process_lab import (
    REPOSITORY,
    ProcessLab,
    finished_check_run,
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
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-02}
"""

MANIFEST: Final = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  labels: {sdk: "2.2.0"}
tasks:
  - id: smoke
    run: ./scripts/task.sh
    vcpus: 1
"""

# The code is fine; board-a is not.
TASK: Final = (
    "#!/bin/sh\n"
    'echo "smoke on $KERRIGAN_DEVICE_ID"\n'
    'if [ "$KERRIGAN_DEVICE_ID" = board-a ]; then echo "uart: no echo" >&2; exit 1; fi\n'
)


async def push_jobs(lab: ProcessLab, sha: str) -> list[JobRow]:
    """The jobs of the push of ``sha``, by attempt."""
    async with lab.database.sessions() as session:
        rows = await session.scalars(
            select(JobRow)
            .join(SessionRow, SessionRow.pk == JobRow.session_pk)
            .where(SessionRow.head_sha == sha)
        )
        return sorted(rows, key=lambda row: row.attempt)


async def until_retry_queued(lab: ProcessLab, sha: str, timeout: float = 60) -> list[JobRow]:
    """The push's jobs once its first attempt failed and a second one waits."""
    deadline = time.monotonic() + timeout
    while True:
        mine = await push_jobs(lab, sha)
        if any(row.attempt == 2 for row in mine):
            return mine
        assert time.monotonic() < deadline, f"no second attempt: {[(r.state, r.device_id) for r in mine]}"
        await asyncio.sleep(0.2)


async def test_a_failure_on_a_suspect_board_is_retried_on_a_peer_and_the_push_goes_green(
    tmp_path: Path,
) -> None:
    sha = "3" * 40
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/bench.yml": MANIFEST, "scripts/task.sh": TASK},
    ) as lab:
        await runs_of(
            lab.database,
            "board-a",
            runs=10,
            failures=8,
            task="smoke",
            repository=REPOSITORY,
            workflow="bench",
        )  # it fails smoke 8 of 10 times this week
        await runs_of(
            lab.database,
            "board-b",
            runs=20,
            failures=0,
            task="smoke",
            repository=REPOSITORY,
            workflow="bench",
        )  # its peer passes it
        async with runner_agent(lab, "rig-01"):  # rig-02's agent not yet: the job goes to board-a
            await push(lab, sha)
            first = await until_retry_queued(lab, sha)
        async with runner_agent(lab, "rig-01"), runner_agent(lab, "rig-02"):
            finished = await session_at(lab, sha, timeout=90)
            run = await finished_check_run(lab, sha, timeout=60)
        rows = await push_jobs(lab, sha)
    assert [(row.attempt, row.device_id, row.state) for row in first] == [
        (1, "board-a", "retried"),
        (2, None, "queued"),
    ]
    assert [(row.attempt, row.device_id, row.state) for row in rows] == [
        (1, "board-a", "retried"),
        (2, "board-b", "succeeded"),
    ]
    assert finished.conclusion is not None
    assert finished.conclusion.value == "success"
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    summary = run["output"]["summary"]
    named = [line for line in summary.splitlines() if line.startswith("- `smoke`: failed on")]
    expected = "- `smoke`: failed on board-a, suspect: 9 of 11 failed this week; passed on board-b"
    assert named == [expected], summary
