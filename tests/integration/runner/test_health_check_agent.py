"""A device's health check end to end: asked for over the API, run by a real runner agent, setting health.

The check fails (``run: "false"``): the device goes bad and leaves its pool's eligible set. Its check is
changed to one that passes (``run: "true"``) and asked for again: the bad device runs it, goes good and is
eligible again. No check run is sent for either, and no token is minted (there is no repository). A check
whose command is not found (exit 127) ends ``check_broken``: the device keeps its health (issue 28).
"""

from __future__ import annotations

import dataclasses

from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import LabelRequirement, Requirements
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.inventory import get_device, load_inventory, save_device
from kerrigan.store.models import JobRow
from kerrigan.store.tokens import create_token
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory, start_both

DEVICE = "modalix-bluebox"
POOL = Requirements({"kerrigan.pool_id": LabelRequirement("kerrigan.pool_id", ("sdk-2-2-som",))})


async def set_check(harness: Harness, run: str) -> None:
    async with harness.database.sessions() as session, session.begin():
        stored = await get_device(session, DEVICE)
        changed = dataclasses.replace(stored.device, health_check=HealthCheck(run, timeout_s=60))
        await save_device(session, changed, Change("octocat", harness.database.clock()))


async def eligible(harness: Harness) -> list[str]:
    async with harness.database.sessions() as session:
        inventory = await load_inventory(session)
    return [device.id for device in resolve(POOL, inventory).eligible]


async def ask(harness: Harness, token: str, device_id: str = DEVICE) -> tuple[int, dict[str, object]]:
    response = await harness.client.post(
        f"/api/v1/devices/{device_id}/health-check", headers={"Authorization": f"Bearer {token}"}
    )
    return response.status, await response.json()


async def wait_for_health(harness: Harness, health: str, job: object) -> None:
    async def reached() -> bool:
        async with harness.database.sessions() as session:
            found = (await get_device(session, DEVICE)).device.health
        return (found.health.value, found.job) == (health, job)

    await harness.wait_until(reached, timeout=30)


async def test_a_failing_check_makes_the_device_bad_and_a_passing_one_brings_it_back(
    harness: Harness, agents: AgentFactory
) -> None:
    async with harness.database.sessions() as session, session.begin():
        token = await create_token(session, "octocat", harness.database.clock())  # owns sdk-2-2-som
    assert (await ask(harness, token))[0] == 409  # no health check yet
    await set_check(harness, "false")
    assert DEVICE in await eligible(harness)
    await start_both(harness, agents)

    status, body = await ask(harness, token)
    assert (status, body["device"], body["queued"]) == (202, DEVICE, True)
    await wait_for_health(harness, "bad", body["job"])
    async with harness.database.sessions() as session:
        health = (await get_device(session, DEVICE)).device.health
    assert health.reason == "health check failed"
    assert DEVICE not in await eligible(harness)

    await set_check(harness, "true")
    status, again = await ask(harness, token)
    assert (status, again["queued"]) == (202, True)
    assert again["job"] != body["job"]
    await wait_for_health(harness, "good", again["job"])
    assert DEVICE in await eligible(harness)
    assert harness.github.check_runs == {}  # a health check has no check run
    assert harness.requests("POST", "/access_tokens") == []  # nor a repository to mint a token for


async def test_a_check_whose_command_is_not_found_is_check_broken_and_the_device_keeps_its_health(
    harness: Harness, agents: AgentFactory
) -> None:
    async with harness.database.sessions() as session, session.begin():
        token = await create_token(session, "octocat", harness.database.clock())
    await set_check(harness, "/opt/lab/health/not-deployed.sh")  # /bin/sh -c exits 127
    await start_both(harness, agents)
    status, body = await ask(harness, token)
    assert status == 202

    async def ended() -> bool:
        async with harness.database.sessions() as session:
            job = await session.get(JobRow, body["job"])
        return job is not None and job.finished_at is not None

    await harness.wait_until(ended, timeout=30)
    async with harness.database.sessions() as session:
        job = await session.get(JobRow, body["job"])
        health = (await get_device(session, DEVICE)).device.health
        entries = await list_audit(session, pool_id="sdk-2-2-som")
    assert job is not None
    assert (job.state, job.exit_status, job.reason) == ("failed", 127, "check_broken")
    assert health.health.value == "unknown"  # not bad: the check, not the board, is broken
    assert DEVICE in await eligible(harness)
    assert [entry.after for entry in entries if entry.field == "health_check_state"] == [
        "check_broken: /opt/lab/health/not-deployed.sh fails, exit 127 on modalix-bluebox "
        "(command not found); the devices keep their health"
    ]
