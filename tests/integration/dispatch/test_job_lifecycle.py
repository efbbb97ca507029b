"""A job's life over the runner protocol: offered, accepted, started, output, finished — or refused."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.manifest import PowerChoice
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.leases import Grant, grant_leases, leased_devices, take_queued_jobs
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders

Client = TestClient  # type: ignore[type-arg]
REGISTRATION = {"protocol": [1], "capabilities": [], "resources": {"vcpus": 8}, "devices": {}}


async def offer_one(db: Database, host: str = "lab-a-01", power: PowerChoice = PowerChoice.CYCLE) -> int:
    """A queued job (its task's ``power`` as given), leased to modalix-bluebox on ``host``; its id."""
    new = builders.session("33333333-3333-3333-3333-333333333333")
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())
        [queued] = await take_queued_jobs(session)
        row = await session.get(JobRow, queued.pk)
        assert row is not None
        row.command = "./scripts/smoke.sh"
        row.power = power
        await grant_leases(
            session,
            [Grant(queued.pk, "modalix-bluebox", host, queued.session_id)],
            db.clock(),
            timedelta(seconds=60),
        )
    return queued.pk


@pytest.fixture
async def hosts(db: Database, aiohttp_client: Callable[..., Any]) -> tuple[Client, dict[str, dict[str, str]]]:
    auth = {}
    async with db.sessions() as session, session.begin():
        for host in ("lab-a-01", "lab-b-01"):
            auth[host] = {"Authorization": f"Bearer {await create_runner_token(session, host, db.clock())}"}
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    for headers in auth.values():
        await client.post("/api/runner/v1/register", json=REGISTRATION, headers=headers)
    return client, auth


async def call(
    client: Client, path: str, headers: dict[str, str], body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    response = await client.post(f"/api/runner/v1{path}", json=body or {}, headers=headers)
    return response.status, await response.json()


async def test_a_job_runs_its_course_and_repeated_calls_are_answers_not_errors(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    polled = await (await client.get("/api/runner/v1/poll?wait=0", headers=auth["lab-a-01"])).json()
    assert [(o["id"], o["device"], o["command"], o["power"]) for o in polled["offers"]] == [
        (str(job), "modalix-bluebox", "./scripts/smoke.sh", "cycle")
    ]
    assert await call(client, f"/jobs/{job}/accept", auth["lab-a-01"]) == (
        200,
        {"job": str(job), "state": "accepted", "changed": True, "github": None},
    )
    assert (await call(client, f"/jobs/{job}/accept", auth["lab-a-01"]))[1]["changed"] is False
    assert (await call(client, f"/jobs/{job}/start", auth["lab-a-01"]))[1]["state"] == "running"
    assert await call(
        client, f"/jobs/{job}/output", auth["lab-a-01"], {"seq": 0, "offset": 0, "data": "boot\n"}
    ) == (200, {"next_seq": 1})
    assert await call(
        client, f"/jobs/{job}/output", auth["lab-a-01"], {"seq": 0, "offset": 0, "data": "boot\n"}
    ) == (200, {"next_seq": 1})  # a repeat is acknowledged again
    gap = await call(client, f"/jobs/{job}/output", auth["lab-a-01"], {"seq": 2, "offset": 99, "data": "x"})
    assert (gap[0], gap[1]["next_seq"]) == (409, 1)
    finished = await call(
        client, f"/jobs/{job}/finish", auth["lab-a-01"], {"exit_status": 0, "accounting": {"cpu_s": 1.5}}
    )
    assert finished[1]["state"] == "succeeded"
    assert (await call(client, f"/jobs/{job}/finish", auth["lab-a-01"], {"exit_status": 1}))[1] == {
        "job": str(job),
        "state": "succeeded",
        "changed": False,
    }
    async with db.sessions() as session:
        assert await leased_devices(session) == set()
        assert await jobs.output(session, job) == [(0, "boot\n")]


async def test_the_offer_says_when_the_task_keeps_its_boards_power(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    job = await offer_one(db, power=PowerChoice.KEEP)
    polled = await (await client.get("/api/runner/v1/poll?wait=0", headers=auth["lab-a-01"])).json()
    assert [(o["id"], o["power"]) for o in polled["offers"]] == [(str(job), "keep")]


async def test_another_host_cannot_touch_a_job_offered_elsewhere(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    status, body = await call(client, f"/jobs/{job}/accept", auth["lab-b-01"])
    assert (status, body["error"]["code"]) == (404, "not_found")
    polled = await (await client.get("/api/runner/v1/poll", headers=auth["lab-b-01"])).json()
    assert polled["offers"] == []


@pytest.mark.parametrize(
    ("refusal", "state"),
    [
        ({"reason": "runner_full", "detail": "claims 9 vCPUs; max_weight 8"}, "queued"),
        ({"reason": "runner_disk_full", "free_bytes": 10, "floor_bytes": 100}, "queued"),
        ({"reason": "invalid_claim", "detail": "claims 0 vCPUs"}, "refused_before_start"),
    ],
)
async def test_a_refusal_frees_the_device_and_capacity_refusals_requeue_the_job(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database, refusal: dict[str, Any], state: str
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    assert (await call(client, f"/jobs/{job}/refuse", auth["lab-a-01"], refusal))[1]["state"] == state
    async with db.sessions() as session:
        assert await leased_devices(session) == set()
        row = await session.get(JobRow, job)
        assert row is not None
        assert row.reason == refusal["reason"]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("refuse", {"reason": "tired"}, "reason"),
        ("refuse", {"reason": "runner_disk_full"}, "free_bytes"),
        ("output", {"seq": "0", "offset": 0, "data": ""}, "seq"),
        ("finish", {"exit_status": "0"}, "exit_status"),
        ("finish", {"exit_status": 0, "accounting": [1]}, "accounting"),
    ],
)
async def test_malformed_calls_name_the_field(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database, path: str, body: dict[str, Any], field: str
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    status, answer = await call(client, f"/jobs/{job}/{path}", auth["lab-a-01"], body)
    assert (status, answer["error"]["field"]) == (400, field)
