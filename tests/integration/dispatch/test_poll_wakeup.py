"""A runner's waiting long poll is answered as soon as a dispatch round in the server leases a job to its
host, not at the poll's next look at the database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import kerrigan.dispatch.protocol.polls as protocol_module
from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.dispatch.dispatcher import Dispatcher, listen_for_leases
from kerrigan.store.cancel import cancel_session
from kerrigan.store.database import Database
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.web.state import DATABASE

SESSION = "33333333-3333-3333-3333-333333333333"
ON_BLUEBOX = {
    "tasks": [
        {"id": "smoke", "requested": {"labels": {"kerrigan.target_id": ["modalix-bluebox"]}, "tags": []}}
    ]
}


async def test_a_waiting_poll_gets_its_offer_when_the_dispatcher_leases_not_at_its_next_look(
    lab_db: Database, aiohttp_client: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The poll's own look at the database is put off for an hour: only the lease's wake-up can answer it.
    db = lab_db
    monkeypatch.setattr(protocol_module, "POLL_INTERVAL_S", 3600.0)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    auth = {"Authorization": f"Bearer {token}"}
    registered = await client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=auth)
    assert registered.status == 200

    async def poll() -> dict[str, Any]:
        response = await client.get("/api/runner/v1/poll?wait=20", headers=auth)
        body: dict[str, Any] = await response.json()
        return body

    waiting = asyncio.create_task(poll())
    await asyncio.sleep(0.2)  # the poll has looked once and found nothing
    assert not waiting.done()
    server_database = client.app[DATABASE]
    async with server_database.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, resolution=ON_BLUEBOX), db.clock())
    await Dispatcher(server_database).dispatch_once()
    answer = await asyncio.wait_for(waiting, 15)  # a guard against hanging, not a timing assertion
    assert [offer["device"] for offer in answer["offers"]] == ["modalix-bluebox"]


async def test_lease_listeners_hear_only_their_own_databases_rounds(lab_db: Database) -> None:
    db = lab_db
    other = Database.connect(db.engine.url.render_as_string(hide_password=False))
    heard: list[frozenset[str]] = []
    elsewhere: list[frozenset[str]] = []
    stop = listen_for_leases(db, heard.append)
    listen_for_leases(other, elsewhere.append)
    try:
        async with db.sessions() as session, session.begin():
            await create_session(session, builders.session(SESSION, resolution=ON_BLUEBOX), db.clock())
        granted = await Dispatcher(db).dispatch_once()
        assert [grant.host for grant in granted.granted] == ["lab-a-01"]
        assert (heard, elsewhere) == ([frozenset({"lab-a-01"})], [])
        stop()
        await Dispatcher(db).dispatch_once()  # nothing more to lease; and nobody listens any more
        assert heard == [frozenset({"lab-a-01"})]
    finally:
        await other.close()


async def test_a_waiting_poll_hears_of_a_cancel_made_in_this_process_at_once(
    lab_db: Database, aiohttp_client: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As above: the poll's own look is an hour away, so only the cancel's wake-up can answer it.
    db = lab_db
    monkeypatch.setattr(protocol_module, "POLL_INTERVAL_S", 3600.0)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    auth = {"Authorization": f"Bearer {token}"}
    assert (await client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=auth)).status == 200
    server_database = client.app[DATABASE]
    async with server_database.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, resolution=ON_BLUEBOX), db.clock())
    await Dispatcher(server_database).dispatch_once()  # or the server's own round, if it came first:
    offered = await (await client.get("/api/runner/v1/poll?wait=10", headers=auth)).json()  # wakes on it
    [job] = [offer["id"] for offer in offered["offers"]]
    for step in ("accept", "start"):
        assert (await client.post(f"/api/runner/v1/jobs/{job}/{step}", headers=auth)).status == 200

    async def poll() -> dict[str, Any]:
        response = await client.get("/api/runner/v1/poll?wait=20", headers=auth)
        body: dict[str, Any] = await response.json()
        return body

    waiting = asyncio.create_task(poll())
    await asyncio.sleep(0.2)  # the poll has looked once and found nothing
    assert not waiting.done()
    async with server_database.sessions() as session, session.begin():
        assert await cancel_session(session, SESSION, db.clock(), by="octocat", reason="cancelled by octocat")
    answer = await asyncio.wait_for(waiting, 15)  # a guard against hanging, not a timing assertion
    assert answer["cancel"] == [job]


async def test_a_stopping_server_answers_its_waiting_polls_instead_of_holding_its_shutdown(
    lab_db: Database, aiohttp_client: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = lab_db
    monkeypatch.setattr(protocol_module, "POLL_INTERVAL_S", 3600.0)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    auth = {"Authorization": f"Bearer {token}"}
    assert (await client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=auth)).status == 200
    waiting = asyncio.create_task(client.get("/api/runner/v1/poll?wait=20", headers=auth))
    await asyncio.sleep(0.2)
    assert not waiting.done()

    await client.app.shutdown()  # what aiohttp runs on SIGTERM, before it waits for the handlers
    response = await asyncio.wait_for(waiting, 5)  # a guard against hanging, not a timing assertion
    assert response.status == 200
    assert await response.json() == {"offers": [], "cancel": [], "withdraw": []}
