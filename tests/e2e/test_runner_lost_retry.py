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
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.github.client import app_jwt
from kerrigan.runner.isolation.cgroups import empty
from kerrigan.runner.records import JobRecords
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.processes import Served, serve_with_github
from tests.e2e.test_runner_processes import REPO, SECRET, jobs_of, push, session_at

LEASE_S = 4
HOSTS = ("rig-01", "rig-02")

INVENTORY = """
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

MANIFEST = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 2
  labels: {sdk: "2.2.0"}
tasks:
  - id: flash
    run: ./scripts/task.sh
    vcpus: 1
  - id: smoke
    run: ./scripts/task.sh
    vcpus: 1
"""

TASK = """#!/bin/sh
echo "on $KERRIGAN_DEVICE_ID"
case "$KERRIGAN_DEVICE_ID" in
  board-a) echo hanging; sleep 300 ;;
esac
echo "done"
"""


@dataclass
class Lab:
    base: str
    database: Database
    folder: Path
    tokens: dict[str, str]
    served: Served


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[Lab]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'kerrigan.db'}"
    database = Database.connect(url)
    await upgrade(database.engine)
    inventory = parse_inventory(INVENTORY, "inventory.yml").inventory
    assert inventory is not None
    async with database.sessions() as session, session.begin():
        await apply_diff(
            session, inventory, diff_inventories(Inventory(), inventory), Change("e2e", database.clock())
        )
        tokens = {host: await create_runner_token(session, host, database.clock()) for host in HOSTS}
    files = tmp_path / "repository"
    (files / ".kerrigan" / "workflows").mkdir(parents=True)
    (files / "scripts").mkdir()
    (files / ".kerrigan" / "workflows" / "bench.yml").write_text(MANIFEST, encoding="utf-8")
    (files / "scripts" / "task.sh").write_text(TASK, encoding="utf-8")
    try:
        async with serve_with_github(
            tmp_path,
            database_url=url,
            repository=REPO,
            workflows=None,
            files=files,
            webhook_secret=SECRET,
            environment={"KERRIGAN_RUNNER_LEASE_S": str(LEASE_S)},
        ) as server:
            yield Lab(server.base, database, tmp_path, tokens, server)
    finally:
        await database.close()


@contextlib.asynccontextmanager
async def runner(lab: Lab, host: str) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, "KERRIGAN_RUNNER_TOKEN": lab.tokens[host]}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kerrigan.cli",
        "runner",
        "--server",
        lab.base,
        "--host-id",
        host,
        "--work-dir",
        str(lab.folder / host),
        "--free-space-floor-bytes",
        "0",
        "--systemd-scope",
        "never",
        "--job-users",  # each agent its own: two run on this machine at once
        str(spare_job_users()),
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def check_runs(served: Served, sha: str) -> list[dict[str, Any]]:
    """The check runs the stand-in holds at ``sha``, asked through GitHub's API as the App."""
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    jwt = app_jwt(served.app_id, served.private_key, time.time())
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(
            f"{served.github_url}/app/installations/1/access_tokens",
            headers={"Authorization": f"Bearer {jwt}"},
        ) as minted:
            assert minted.status == 201, await minted.text()
            token = (await minted.json())["token"]
        async with http.get(
            f"{served.github_url}/repos/{REPO}/commits/{sha}/check-runs",
            headers={"Authorization": f"Bearer {token}"},
        ) as listed:
            assert listed.status == 200, await listed.text()
            found: list[dict[str, Any]] = (await listed.json())["check_runs"]
            return found


async def test_a_killed_runners_job_is_retried_on_another_device_to_a_green_check_run(lab: Lab) -> None:
    sha = "c" * 40
    async with runner(lab, "rig-01") as doomed, runner(lab, "rig-02"):
        await push(lab, sha)
        records = JobRecords(lab.folder / "rig-01")
        deadline = time.monotonic() + 60
        while not (hung := [r for r in records.load_all() if r.state == "running" and r.pid is not None]):
            assert time.monotonic() < deadline, "no job started on board-a"
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # it has printed "hanging" and sleeps
        doomed.kill()
        await doomed.wait()
        finished = await session_at(lab, sha, timeout=LEASE_S + 60)
    for record in hung:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(record.pid, signal.SIGKILL)  # the agent is gone: what it ran is ours to end
        empty(record.cgroup)
    assert finished.conclusion is not None
    assert finished.conclusion.value == "success"
    rows = await jobs_of(lab)
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
    [run] = await check_runs(lab.served, sha)
    assert (run["status"], run["conclusion"]) == ("completed", "success")
    summary = run["output"]["summary"]
    assert "runner_lost" in summary
    assert "attempt 2" in summary.lower()
