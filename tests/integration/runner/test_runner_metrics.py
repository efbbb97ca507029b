"""A real agent against the real server and the GitHub stand-in, on loopback, scraped over HTTP: its
``/metrics`` follow a job from its offer to its end, and count the offers it refuses."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kerrigan.app import create_app
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.host_capacity import HostLimits
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.store.database import Database
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness, settings_for
from tests.unit.runner.metrics_scrape import Scrape, scrape

HOST = "lab-a-01"  # modalix-bluebox's host


def held_job_commit(release: Path) -> dict[str, str]:
    """One task of one vCPU on modalix-bluebox whose command runs until ``release`` exists."""
    manifest = (
        "name: held\n"
        "on: {push: {branches: [main]}}\n"
        "scheduling:\n"
        "  labels: {kerrigan.target_id: modalix-bluebox}\n"
        "tasks:\n"
        "  - id: hold\n"
        "    run: ./scripts/hold.sh\n"
        "    vcpus: 1\n"
    )
    script = f"#!/bin/sh\nwhile [ ! -e '{release}' ]; do sleep 0.05; done\necho released\n"
    return {".kerrigan/workflows/held.yml": manifest, "scripts/hold.sh": script}


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, aiohttp_client: Callable[..., Any]) -> Harness:
    """Kerrigan and the stand-in, on the lab's inventory."""
    app = create_app(settings_for(lab_db, github), clock=lab_db.clock)
    return Harness(await aiohttp_client(app), github, lab_db)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def start_agent(
    harness: Harness, http: aiohttp.ClientSession, tmp_path: Path
) -> AsyncIterator[Callable[..., Agent]]:
    """Start lab-a-01's agent, serving its metrics on a free port (stopped at the end of the test)."""
    tasks: list[asyncio.Task[None]] = []

    def start(**overrides: Any) -> Agent:
        agent = Agent(
            AgentSettings(
                server_url=str(harness.client.make_url("")),
                token=token,
                host_id=HOST,
                work_dir=tmp_path / HOST,
                disk=overrides.pop("disk", DiskPolicy(0)),
                heartbeat_s=0.2,
                kill_grace_s=2.0,
                systemd_scope="never",
                isolation="off",  # the job reads the test's release file where the test wrote it
                metrics_port=0,
                **overrides,
            ),
            http,
        )
        tasks.append(asyncio.create_task(agent.run()))
        return agent

    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, HOST, harness.database.clock())
    yield start
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def scrape_until(
    http: aiohttp.ClientSession, agent: Agent, holds: Callable[[Scrape], bool], timeout: float = 8
) -> Scrape:
    """Scrape the agent until a scrape shows what ``holds`` looks for; that scrape."""

    async def found() -> Scrape | None:
        if agent.metrics_port is None:
            return None
        figures = await scrape(http, agent.metrics_port)
        return figures if holds(figures) else None

    return await wait_until(found, timeout=timeout, interval=0.05, what="the figures looked for")


async def test_a_job_shows_running_with_its_claim_then_nothing_is_held_or_claimed_once_it_ended(
    harness: Harness, start_agent: Callable[..., Agent], http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    agent = start_agent(limits=HostLimits(max_weight=6))
    idle = await scrape_until(http, agent, lambda s: True)
    release = tmp_path / "release"
    [run] = await harness.push_commit(held_job_commit(release))

    running = await scrape_until(http, agent, lambda s: s.value("kerrigan_runner_jobs", state="running") == 1)
    release.touch()
    await wait_until(lambda: harness.github.check_runs[run["id"]]["status"] == "completed", timeout=8)
    ended = await scrape_until(http, agent, lambda s: s.value("kerrigan_runner_jobs", state="running") == 0)

    assert idle.value("kerrigan_runner_vcpus_claimed") == 0
    assert running.value("kerrigan_runner_vcpus_claimed") == 1
    assert running.value("kerrigan_runner_vcpus_max") == 6
    assert running.value("kerrigan_runner_vcpus_allocatable") == agent.allocator.limit
    assert running.value("kerrigan_runner_disk_free_bytes") > 0
    assert harness.github.check_runs[run["id"]]["conclusion"] == "success"
    assert ended.value("kerrigan_runner_vcpus_claimed") == 0  # the claim is given back
    for state in ("accepted", "waiting", "starting", "running"):
        assert ended.value("kerrigan_runner_jobs", state=state) == 0
    assert ended.value("kerrigan_runner_admission_refusals_total", reason="runner_full") == 0


async def test_an_offer_refused_for_disk_space_counts_under_its_reason(
    harness: Harness, start_agent: Callable[..., Agent], http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    agent = start_agent(disk=DiskPolicy(floor_bytes=1 << 60))  # more than any disk: every offer is refused
    await scrape_until(http, agent, lambda s: True)
    await harness.push_commit(held_job_commit(tmp_path / "release"))

    refused = await scrape_until(
        http,
        agent,
        lambda s: s.value("kerrigan_runner_admission_refusals_total", reason="runner_disk_full") >= 1,
    )

    assert refused.value("kerrigan_runner_admission_refusals_total", reason="runner_full") == 0
    assert refused.value("kerrigan_runner_jobs", state="accepted") == 0  # refused before anything is held
    assert refused.value("kerrigan_runner_vcpus_claimed") == 0
