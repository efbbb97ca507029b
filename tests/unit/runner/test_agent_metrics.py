"""The agent's ``GET /metrics``: figures read from its live state at each scrape, served over real HTTP on
loopback beside its run, and an address it cannot listen on refused naming the flag."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families

from kerrigan.core.host_capacity import HostLimits
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.isolation.probe import HostFacts
from kerrigan.runner.metrics import MetricsAddressError, MetricsServer, agent_registry
from kerrigan.runner.records import JobRecord
from kerrigan.testing.waiting import wait_until
from tests.unit.runner.metrics_scrape import scrape
from tests.unit.runner.sysfs import write_sysfs

NOWHERE = "http://127.0.0.1:9"  # nothing listens on the discard port: registering waits, and goes on waiting


def settings(tmp_path: Path, **overrides: Any) -> AgentSettings:
    """An agent of four two-thread cores (the first kept for the agent: six allocatable CPUs)."""
    return AgentSettings(
        NOWHERE,
        "kgr_x",
        "lab-a-01",
        tmp_path / "work",
        sysfs_root=write_sysfs(tmp_path / "cpu", [[0, 4], [1, 5], [2, 6], [3, 7]], online="0-7"),
        isolation="off",
        systemd_scope="never",
        **overrides,
    )


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def served(http: aiohttp.ClientSession, tmp_path: Path) -> AsyncIterator[tuple[Agent, int]]:
    """An agent (not running) whose registry is served on a free port."""
    agent = Agent(settings(tmp_path, limits=HostLimits(max_weight=6)), http, facts=HostFacts(root=False))
    agent._lay_out_work_dir()
    server = MetricsServer(agent_registry(agent))
    port = await server.start("127.0.0.1", 0)
    try:
        yield agent, port
    finally:
        await server.stop()


def record(job_id: str, state: str, vcpus: int) -> JobRecord:
    return JobRecord(job_id, {"id": job_id, "claim": {"vcpus": vcpus}}, state=state)


async def test_a_scrape_reads_jobs_by_state_and_counts_only_claims_of_jobs_starting_or_running(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    for job_id, state, vcpus in [
        ("1", "accepted", 1),
        ("2", "waiting", 2),
        ("3", "waiting", 2),
        ("4", "starting", 1),
        ("5", "running", 3),
        ("6", "ended", 4),
    ]:
        agent.jobs[job_id] = record(job_id, state, vcpus)

    found = await scrape(http, port)

    held = {state: found.value("kerrigan_runner_jobs", state=state) for state in ("accepted", "waiting")}
    assert held == {"accepted": 1, "waiting": 2}
    assert found.value("kerrigan_runner_jobs", state="starting") == 1
    assert found.value("kerrigan_runner_jobs", state="running") == 1
    assert ("kerrigan_runner_jobs", (("state", "ended"),)) not in found.samples  # history, not held
    assert found.value("kerrigan_runner_vcpus_claimed") == 4  # the starting and running claims
    assert found.value("kerrigan_runner_vcpus_max") == 6
    assert found.value("kerrigan_runner_vcpus_allocatable") == 6


async def test_each_scrape_shows_the_state_of_that_moment(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    agent.jobs["7"] = record("7", "running", 2)
    before = await scrape(http, port)
    agent.jobs["7"].state = "ended"
    agent.refusals["runner_full"] = 3

    after = await scrape(http, port)

    assert before.value("kerrigan_runner_vcpus_claimed") == 2
    assert before.value("kerrigan_runner_jobs", state="running") == 1
    assert before.value("kerrigan_runner_admission_refusals_total", reason="runner_full") == 0
    assert after.value("kerrigan_runner_vcpus_claimed") == 0
    assert after.value("kerrigan_runner_jobs", state="running") == 0
    assert after.value("kerrigan_runner_admission_refusals_total", reason="runner_full") == 3


async def test_refusal_reasons_are_exposed_at_zero_before_the_first_and_others_as_they_come(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    first = await scrape(http, port)
    agent.refusals["some_future_reason"] = 1

    later = await scrape(http, port)

    for reason in ("invalid_claim", "runner_disk_full", "runner_full"):
        assert first.value("kerrigan_runner_admission_refusals_total", reason=reason) == 0
    assert later.value("kerrigan_runner_admission_refusals_total", reason="some_future_reason") == 1


async def test_free_disk_is_the_work_dirs_filesystem_as_statvfs_gives_it(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    stats = os.statvfs(agent.settings.work_dir)

    free = (await scrape(http, port)).value("kerrigan_runner_disk_free_bytes")

    # Other processes write to the same filesystem meanwhile: the same figure to within 64 MiB.
    assert abs(free - stats.f_bavail * stats.f_frsize) < 64 << 20
    assert free > 0


async def test_a_work_dir_that_cannot_be_read_leaves_out_free_disk_and_the_scrape_still_answers(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    agent.settings.work_dir.rename(agent.settings.work_dir.with_name("moved"))

    found = await scrape(http, port)

    assert "kerrigan_runner_disk_free_bytes" not in found.names()
    assert found.value("kerrigan_runner_vcpus_allocatable") == 6


async def test_two_agents_in_one_process_keep_their_own_figures(
    http: aiohttp.ClientSession, served: tuple[Agent, int], tmp_path: Path
) -> None:
    agent, port = served
    other = Agent(
        settings(tmp_path / "other", limits=HostLimits(max_weight=3)), http, facts=HostFacts(root=False)
    )
    other._lay_out_work_dir()
    server = MetricsServer(agent_registry(other))
    other_port = await server.start("127.0.0.1", 0)
    try:
        agent.jobs["1"] = record("1", "running", 5)
        mine, theirs = await scrape(http, port), await scrape(http, other_port)
    finally:
        await server.stop()

    assert (mine.value("kerrigan_runner_vcpus_max"), theirs.value("kerrigan_runner_vcpus_max")) == (6, 3)
    assert (mine.value("kerrigan_runner_vcpus_claimed"), theirs.value("kerrigan_runner_vcpus_claimed")) == (
        5,
        0,
    )


async def test_the_agent_serves_metrics_while_it_runs_and_stops_serving_when_it_stops(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # The server is never reached: metrics are up while the agent waits for it, which is when they matter.
    agent = Agent(settings(tmp_path, metrics_port=0), http, facts=HostFacts(root=False))
    task = asyncio.create_task(agent.run())

    async def serving() -> bool:
        return agent.metrics_port is not None

    await wait_until(serving, timeout=5)
    port = agent.metrics_port
    found = await scrape(http, port)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

    assert found.value("kerrigan_runner_vcpus_allocatable") == 6
    assert agent.metrics_port is None
    with pytest.raises(aiohttp.ClientConnectionError):
        await scrape(http, port)


async def test_a_metrics_port_in_use_stops_the_start_naming_the_flag(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        agent = Agent(settings(tmp_path, metrics_port=port), http, facts=HostFacts(root=False))

        with pytest.raises(MetricsAddressError) as refused:
            await asyncio.wait_for(agent.run(), timeout=5)

    assert (
        str(refused.value)
        == f"--metrics-port {port}: 127.0.0.1:{port} is already in use (another agent or exporter?)"
    )
    assert agent.metrics_port is None


async def test_a_metrics_host_that_is_not_this_hosts_stops_the_start_naming_the_flag(
    http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # 192.0.2.1 is TEST-NET-1 (RFC 5737): no interface here has it.
    agent = Agent(
        settings(tmp_path, metrics_host="192.0.2.1", metrics_port=0), http, facts=HostFacts(root=False)
    )

    with pytest.raises(
        MetricsAddressError, match=r"^--metrics-host 192\.0\.2\.1: cannot listen on 192\.0\.2\.1:0: "
    ):
        await asyncio.wait_for(agent.run(), timeout=5)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"metrics_port": -1}, "metrics_port must be 0-65535, not -1"),
        ({"metrics_port": 65536}, "metrics_port must be 0-65535, not 65536"),
        ({"metrics_host": " "}, "metrics_host must name an address to listen on, not an empty string"),
    ],
)
def test_a_metrics_address_out_of_range_is_refused_naming_the_field(
    tmp_path: Path, overrides: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        settings(tmp_path, **overrides)


async def test_a_scraper_asking_for_openmetrics_gets_it(
    http: aiohttp.ClientSession, served: tuple[Agent, int]
) -> None:
    agent, port = served
    agent.refusals["runner_disk_full"] = 2
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"  # as Prometheus
    async with http.get(f"http://127.0.0.1:{port}/metrics", headers={"Accept": accept}) as response:
        content_type, text = response.headers["Content-Type"], await response.text()

    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    [refusals] = [f for f in openmetrics_families(text) if f.name == "kerrigan_runner_admission_refusals"]
    assert {s.labels["reason"]: s.value for s in refusals.samples}["runner_disk_full"] == 2
