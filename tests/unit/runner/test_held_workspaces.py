"""A held job's workspace (Hold board) on the agent: while the server's heartbeat answers name the job in
``held_workspaces``, disk admission never evicts its workspace, expiry never deletes it nor the job's
record, and another job of the same task gets a workspace of its own; once the hold ends (the job no
longer named) it is a workspace like any other. Until the server has answered once, nothing is evicted."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kerrigan.core.disk import DiskPolicy
from kerrigan.core.runner_protocol import HELD_WORKSPACES
from kerrigan.runner.agent import Agent
from kerrigan.runner.isolation.probe import HostFacts
from kerrigan.runner.records import JobRecord
from kerrigan.runner.workspaces import WorkspaceStore
from tests.unit.runner.test_agent_metrics import settings

DAY_S = 86_400.0
NOW = 10 * DAY_S
BOOT, SMOKE = "octo-firmware--boot", "octo-firmware--smoke"  # the workspaces of jobs 41 and 42


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def agent(tmp_path: Path) -> AsyncIterator[Agent]:
    """An agent (not running) always under its disk floor, which speaks ``held_workspaces`` with its
    server, with two jobs that ended two days ago, 41 (task boot) and 42 (task smoke), and their
    workspaces."""
    work = tmp_path / "work"
    work.mkdir()
    floor = WorkspaceStore(work).free_bytes() + (1 << 30)  # always under the floor: evict all it may
    async with aiohttp.ClientSession() as http:
        made = Agent(
            settings(tmp_path, disk=DiskPolicy(floor_bytes=floor)),
            http,
            clock=Clock(),
            facts=HostFacts(root=False),
        )
        made._lay_out_work_dir()
        made.capabilities = frozenset({HELD_WORKSPACES})
        ended = NOW - 2 * DAY_S
        for job_id, task, workspace in (("41", "boot", BOOT), ("42", "smoke", SMOKE)):
            offer = {"id": job_id, "repository": "octo/firmware", "task": task, "claim": {"vcpus": 1}}
            record = JobRecord(job_id, offer, state="ended", accepted_at=ended - 60, workspace=workspace)
            record.ended_at, record.reported = ended, True
            made.jobs[job_id] = record
            made.records.save(record)
            (made.workspaces.mark_used(workspace, ended) / "build.log").write_bytes(b"x" * 8192)
        yield made


def present(agent: Agent) -> set[str]:
    return {workspace.name for workspace in agent.workspaces.workspaces()}


async def test_nothing_is_evicted_or_expired_before_the_server_has_said_which_workspaces_holds_keep(
    agent: Agent,
) -> None:
    assert await asyncio.to_thread(agent._admit_disk, "octo-firmware--flash") is not None  # refused: full
    agent.maintain()
    assert present(agent) == {BOOT, SMOKE}
    assert set(agent.jobs) == {"41", "42"}


async def test_a_held_jobs_workspace_is_kept_and_not_reused_until_the_hold_ends(agent: Agent) -> None:
    agent.hear_holds({"jobs": {}, "held_workspaces": ["41"]})

    await asyncio.to_thread(agent._admit_disk, "octo-firmware--flash")
    assert present(agent) == {BOOT}  # under the floor every idle workspace goes, but the held one
    boot_again = {"id": "43", "repository": "octo/firmware", "task": "boot"}
    assert agent._workspace_name(boot_again) == f"{BOOT}.2"  # the next boot job does not write into it
    agent.maintain()  # a day past the job's end: its record and workspace would have expired
    assert set(agent.jobs) == {"41"}
    assert present(agent) == {BOOT}

    agent.hear_holds({"jobs": {}})  # the hold ended: the answer names no job
    assert agent._workspace_name(boot_again) == BOOT
    await asyncio.to_thread(agent._admit_disk, "octo-firmware--flash")
    assert present(agent) == set()


async def test_a_held_job_this_agent_does_not_know_keeps_nothing(agent: Agent) -> None:
    agent.hear_holds({"held_workspaces": ["41", "9999"]})
    assert agent.held_jobs == frozenset({"41", "9999"})
    assert agent.workspaces_in_use() == {BOOT}
