"""A feature of the runner protocol is used only when both sides announced it at registration (seed 003's
``gate_jobs``; also ``withdraw`` and ``log_pages``), so runners and servers can be upgraded one at a time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.database import Database
from kerrigan.store.models import SessionRow
from kerrigan.store.runners import create_runner_token
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab, queue

Client = TestClient  # type: ignore[type-arg]
SESSION = "abababab-abab-abab-abab-abababababab"


async def connect(
    db: Database, aiohttp_client: Callable[..., Any], capabilities: list[str]
) -> tuple[Client, dict[str, str]]:
    await lab(db)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    headers = {"Authorization": f"Bearer {token}"}
    body = {"protocol": [1], "capabilities": capabilities}
    agreed = await (await client.post("/api/runner/v1/register", json=body, headers=headers)).json()
    assert agreed["capabilities"] == sorted(capabilities)
    return client, headers


async def gate_offer(db: Database, client: Client, headers: dict[str, str]) -> dict[str, Any]:
    await queue(db, SESSION, {"smoke": SOM_UART}, max_devkits=1)
    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.priority = "gate"
    await Dispatcher(db).dispatch_once()
    polled = await (await client.get("/api/runner/v1/poll?wait=5", headers=headers)).json()
    [offer] = polled["offers"]
    return dict(offer)


@pytest.mark.parametrize(("capabilities", "marked"), [([], False), (["gate_jobs"], True)])
async def test_gate_mark_is_honored_only_after_capability_negotiation(
    db: Database, aiohttp_client: Callable[..., Any], capabilities: list[str], marked: bool
) -> None:
    client, headers = await connect(db, aiohttp_client, capabilities)
    offer = await gate_offer(db, client, headers)
    assert ("gate" in offer) is marked
    if marked:
        assert offer["gate"] is True


async def test_withdraw_requests_go_only_to_runners_that_announced_withdraw(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    client, headers = await connect(db, aiohttp_client, ["gate_jobs"])
    offer = await gate_offer(db, client, headers)
    await client.post(f"/api/runner/v1/jobs/{offer['id']}/accept", headers=headers)
    await client.post("/api/runner/v1/heartbeat", json={"waiting": {offer["id"]: 10**9}}, headers=headers)
    polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
    assert polled["withdraw"] == []  # the runner could not answer it: never asked


async def test_truncated_output_needs_log_pages(db: Database, aiohttp_client: Callable[..., Any]) -> None:
    client, headers = await connect(db, aiohttp_client, [])
    offer = await gate_offer(db, client, headers)
    await client.post(f"/api/runner/v1/jobs/{offer['id']}/start", headers=headers)
    chunk = {"seq": 2, "offset": 10, "data": "x", "truncated_before_seq": 2}
    response = await client.post(f"/api/runner/v1/jobs/{offer['id']}/output", json=chunk, headers=headers)
    body = await response.json()
    assert (response.status, body["error"]["code"]) == (400, "not_negotiated")
