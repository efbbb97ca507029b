"""A check run's *Cancel* action, clicked at the GitHub stand-in while a real agent runs ``sleep 300``: the
writer's click stops the jobs, frees the devices and completes the check run ``cancelled``; anyone else's
click changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.store.database import Database
from kerrigan.store.leases import leased_devices
from kerrigan.store.models import SessionRow
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import (
    OTHER_SHA,
    Harness,
    StartApp,
    check_run_name,
    settings_for,
    webhook,
)
from tests.integration.runner.agents import (
    AgentFactory,
    completed,
    job_rows,
    smoke_commit,
    start_both,
)

SLEEP = "#!/bin/sh\necho started\nsleep 300\n"
ADMIN = "mona"


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    """The pair on the lab inventory, with mona a System Admin."""
    client = await start_app(settings_for(lab_db, github, admins=frozenset({ADMIN})))
    return Harness(client, github, lab_db)


def cancel_click(run: dict[str, Any], login: str, identifier: str = "cancel") -> dict[str, Any]:
    """``check_run-rerequested.json`` as the *Cancel* action's delivery for ``run``, clicked by ``login``."""
    payload = webhook("check_run-rerequested") | {
        "action": "requested_action",
        "requested_action": {"identifier": identifier},
    }
    payload["check_run"].update(
        id=run["id"], name=check_run_name("hil-smoke"), head_sha=OTHER_SHA, external_id=run["external_id"]
    )
    payload["sender"]["login"] = login
    return payload


async def running(harness: Harness, agents: AgentFactory) -> dict[str, Any]:
    """hil-smoke pushed, both its jobs running ``sleep 300`` on the agents; its check run."""
    await start_both(harness, agents, kill_grace_s=1.0)
    [run] = await harness.push_commit(smoke_commit(smoke=SLEEP, boot=SLEEP))

    async def both_running() -> bool:
        return [row.state for row in await job_rows(harness)] == ["running", "running"]

    await harness.wait_until(both_running, timeout=30)
    return run


async def click(harness: Harness, payload: dict[str, Any]) -> None:
    assert await harness.deliver("check_run", payload) == 202
    await harness.settle()
    [*_, delivery] = await harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)


async def test_a_writers_cancel_stops_the_jobs_frees_the_devices_and_the_check_run_says_who(
    harness: Harness, agents: AgentFactory
) -> None:
    run = await running(harness, agents)
    harness.github.set_permission("octo/firmware", "hubot", "write")

    await click(harness, cancel_click(run, "hubot"))

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "cancelled"
    assert "cancelled by hubot" in (final["output"]["title"] + final["output"]["summary"]).lower()
    assert [row.state for row in await job_rows(harness)] == ["cancelled", "cancelled"]
    async with harness.database.sessions() as db:
        assert await leased_devices(db) == set()
        row = await db.scalar(select(SessionRow))
    assert row is not None
    assert (row.cancelled_by, row.cancel_reason) == ("hubot", "cancelled by hubot")


async def test_a_click_by_someone_without_write_access_changes_nothing(
    harness: Harness, agents: AgentFactory
) -> None:
    run = await running(harness, agents)
    harness.github.set_permission("octo/firmware", "defunkt", "read")

    await click(harness, cancel_click(run, "defunkt"))

    assert [row.state for row in await job_rows(harness)] == ["running", "running"]
    assert all(row.cancel_requested_at is None for row in await job_rows(harness))
    async with harness.database.sessions() as db:
        row = await db.scalar(select(SessionRow))
        assert len(await leased_devices(db)) == 2
    assert row is not None
    assert (row.state, row.cancelled_by, row.cancel_reason) == ("in_progress", None, None)
    assert harness.github.check_runs[run["id"]]["status"] == "in_progress"
    # The permission was asked of GitHub.
    assert harness.requests("GET", "/collaborators/defunkt/permission")


async def test_a_system_admin_may_cancel_without_write_access(harness: Harness, agents: AgentFactory) -> None:
    run = await running(harness, agents)
    harness.github.set_permission("octo/firmware", ADMIN, "read")

    await click(harness, cancel_click(run, ADMIN))

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "cancelled"
    assert not harness.requests("GET", f"/collaborators/{ADMIN}/permission")
