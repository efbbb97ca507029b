"""A real agent whose job floods its output: the server keeps ``KERRIGAN_OUTPUT_MAX_BYTES`` of it, tells the
agent, and the agent stops sending and keeps the whole log on its host; the check run says it was cut."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import select

from kerrigan.app import PROTOCOL, create_app
from kerrigan.core.disk import DiskPolicy
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.runner.reporting import OUTPUT_CUT_MARK
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.job_users import spare_job_users
from tests.integration.github.conftest import Harness, manifest_files, settings_for

CAP = 256 * 1024
PRINTED = 3_000_000  # twelve times the cap


async def capped_harness(db: Database, github: GitHubStandIn, aiohttp_client: Callable[..., Any]) -> Harness:
    app = create_app(settings_for(db, github, output_max_bytes=CAP), clock=db.clock)
    assert app[PROTOCOL].output_max_bytes == CAP  # KERRIGAN_OUTPUT_MAX_BYTES reaches the protocol
    return Harness(await aiohttp_client(app), github, db)


async def test_a_flooding_job_is_cut_at_the_cap_and_the_agent_stops_sending_and_keeps_its_log(
    lab_db: Database, github: GitHubStandIn, aiohttp_client: Callable[..., Any], tmp_path: Path
) -> None:
    harness = await capped_harness(lab_db, github, aiohttp_client)
    files = manifest_files("hil-smoke.yml") | {
        "scripts/smoke.sh": f"#!/bin/sh\nyes | head -c {PRINTED}\n",
        "scripts/boot.sh": "#!/bin/sh\necho booted\n",
    }
    async with aiohttp.ClientSession() as http:
        agents = []
        for host in ("lab-a-01", "lab-a-02"):
            async with lab_db.sessions() as session, session.begin():
                token = await create_runner_token(session, host, lab_db.clock())
            settings = AgentSettings(
                server_url=str(harness.client.make_url("")),
                token=token,
                host_id=host,
                work_dir=tmp_path / host,
                disk=DiskPolicy(0),
                heartbeat_s=0.2,
                systemd_scope="never",
                job_users=spare_job_users(),  # each agent its own
            )
            agent = Agent(settings, http)
            agents.append((agent, asyncio.create_task(agent.run())))
        try:
            [run] = await harness.push_commit(files)

            async def completed() -> bool:
                return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

            await harness.wait_until(completed, timeout=60)
        finally:
            for _, task in agents:
                task.cancel()
            for _, task in agents:
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async with lab_db.sessions() as session:
        rows = {row.task_id: row for row in (await session.scalars(select(JobRow))).all()}
        flood = rows["smoke-som"]
        chunks = await jobs.output(session, flood.pk)
        quiet = await jobs.output(session, rows["boot-som"].pk)
    assert (flood.state, rows["boot-som"].state) == ("succeeded", "succeeded")
    assert sum(len(data.encode()) for _, data in chunks) == CAP
    assert quiet == [(0, "booted\n")]
    # The agent sent nothing past the page that crossed the cap (a page is at most 64 KiB).
    assert CAP < flood.log_bytes <= CAP + 64 * 1024
    # It kept the whole log, and the mark that the server cut it.
    [folder] = [
        agent.records.folder(str(flood.pk))
        for agent, _ in agents
        if agent.records.folder(str(flood.pk)).exists()
    ]
    assert (folder / "output.log").stat().st_size >= PRINTED  # with any note the agent adds
    assert (folder / OUTPUT_CUT_MARK).exists()
    summary = harness.github.check_runs[run["id"]]["output"]["summary"]
    assert "output cut at 256 KiB (KERRIGAN_OUTPUT_MAX_BYTES)" in summary
