"""The runner protocol's registration and heartbeats, over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.leases import Grant, expired_leases, grant_leases, take_queued_jobs
from kerrigan.store.runners import (
    create_runner_token,
    host_report,
    mark_silent_hosts_offline,
    revoke_runner_token,
)
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock

REGISTRATION = {
    "protocol": [1, 2],
    "capabilities": ["gate_jobs", "teleport"],
    "resources": {"free_disk_bytes": 900, "vcpus": 16, "max_weight": 28},
    "devices": {"modalix-bluebox": "present"},
}


@pytest.fixture
async def runner(db: Database, aiohttp_client: Callable[..., Any]) -> tuple[TestClient, dict[str, str]]:  # type: ignore[type-arg]
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    return client, {"Authorization": f"Bearer {token}"}


async def test_registration_takes_the_highest_common_version_and_shared_capabilities(
    runner: tuple[TestClient, dict[str, str]],  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    response = await client.post("/api/runner/v1/register", json=REGISTRATION, headers=auth)
    body = await response.json()
    assert response.status == 200
    assert (body["protocol"], body["capabilities"]) == (1, ["gate_jobs"])
    assert body["lease_ttl_s"] == 60


async def test_no_common_version_is_a_409_saying_what_each_side_speaks(
    runner: tuple[TestClient, dict[str, str]],  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    response = await client.post(
        "/api/runner/v1/register", json={**REGISTRATION, "protocol": [7]}, headers=auth
    )
    body = await response.json()
    assert (response.status, body["error"]["code"]) == (409, "no_common_version")
    assert "[7]" in body["error"]["message"]


async def test_resource_values_land_on_the_right_resource_whatever_their_order(
    runner: tuple[TestClient, dict[str, str]],
    db: Database,  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    await client.post("/api/runner/v1/register", json=REGISTRATION, headers=auth)
    async with db.sessions() as session:
        report = await host_report(session, "lab-a-01")
    assert report is not None
    assert dict(report.resources) == {"vcpus": 16, "max_weight": 28, "free_disk_bytes": 900}
    assert report.online


async def test_an_unknown_resource_name_is_logged_and_skipped_and_the_rest_applied(
    runner: tuple[TestClient, dict[str, str]],
    caplog: pytest.LogCaptureFixture,  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    await client.post("/api/runner/v1/register", json=REGISTRATION, headers=auth)
    with caplog.at_level(logging.WARNING):
        response = await client.post(
            "/api/runner/v1/heartbeat",
            json={"resources": {"quantum_bits": 5, "vcpus": 12}, "devices": {"modalix-bluebox": "present"}},
            headers=auth,
        )
    body = await response.json()
    assert response.status == 200
    assert body["skipped"] == [{"name": "quantum_bits", "reason": "no such resource in this catalog"}]
    assert body["resources"] == {"vcpus": 12, "max_weight": 28, "free_disk_bytes": 900}
    assert "quantum_bits" in caplog.text


async def test_a_heartbeat_changes_the_values_it_names_and_keeps_the_others(
    runner: tuple[TestClient, dict[str, str]],
    db: Database,  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    await client.post("/api/runner/v1/register", json=REGISTRATION, headers=auth)
    await client.post("/api/runner/v1/heartbeat", json={"resources": {"free_disk_bytes": 5}}, headers=auth)
    async with db.sessions() as session:
        report = await host_report(session, "lab-a-01")
    assert report is not None
    assert dict(report.resources) == {"vcpus": 16, "max_weight": 28, "free_disk_bytes": 5}
    assert dict(report.device_states) == {"modalix-bluebox": "present"}


async def test_a_heartbeat_before_registration_is_refused(
    runner: tuple[TestClient, dict[str, str]],  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    response = await client.post("/api/runner/v1/heartbeat", json={}, headers=auth)
    assert (response.status, (await response.json())["error"]["code"]) == (409, "not_registered")


@pytest.mark.parametrize("header", [None, "Bearer nope", "Basic abc"])
async def test_a_runner_without_its_token_is_refused(
    runner: tuple[TestClient, dict[str, str]],
    header: str | None,  # type: ignore[type-arg]
) -> None:
    client, _ = runner
    response = await client.post(
        "/api/runner/v1/register", json=REGISTRATION, headers={"Authorization": header} if header else {}
    )
    assert response.status == 401


async def test_a_replaced_or_revoked_token_is_refused_at_once(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    # `kerrigan runners rotate` and `revoke` act on the database from another process: the server asks
    # the database on every call, so the old token's next call is refused.
    async with db.sessions() as session, session.begin():
        old = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))

    async def register(token: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        answer = await client.post("/api/runner/v1/register", json=REGISTRATION, headers=headers)
        return answer.status, await answer.json()

    assert (await register(old))[0] == 200
    async with db.sessions() as session, session.begin():
        new = await create_runner_token(session, "lab-a-01", db.clock())
    status, body = await register(old)
    assert status == 401
    assert "revoked, replaced or never made" in body["error"]["message"]
    assert (await register(new))[0] == 200
    async with db.sessions() as session, session.begin():
        assert await revoke_runner_token(session, "lab-a-01", Change("olga", db.clock()))
    assert (await register(new))[0] == 401
    async with db.sessions() as session:
        report = await host_report(session, "lab-a-01")
    assert report is not None
    assert (report.online, report.token) == (False, False)


async def test_a_tokens_last_use_is_written_at_most_once_a_minute(
    db: Database, aiohttp_client: Callable[..., Any], clock: FakeClock
) -> None:
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    headers = {"Authorization": f"Bearer {token}"}

    async def used_at() -> Any:
        async with db.sessions() as session:
            report = await host_report(session, "lab-a-01")
        assert report is not None
        return report.token_used_at

    assert await used_at() is None  # made, never used
    first = clock()
    assert (await client.post("/api/runner/v1/register", json=REGISTRATION, headers=headers)).status == 200
    assert await used_at() == first
    clock.advance(30)
    assert (await client.post("/api/runner/v1/heartbeat", json={}, headers=headers)).status == 200
    assert await used_at() == first  # within the minute: not written again
    clock.advance(31)
    assert (await client.post("/api/runner/v1/heartbeat", json={}, headers=headers)).status == 200
    assert await used_at() == clock()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"resources": [1]}, "resources"),
        ({"devices": {"d": "gone"}}, "devices"),
        ({"protocol": "1"}, "protocol"),
    ],
)
async def test_malformed_registrations_name_the_field(
    runner: tuple[TestClient, dict[str, str]],
    body: dict[str, Any],
    field: str,  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    response = await client.post("/api/runner/v1/register", json={**REGISTRATION, **body}, headers=auth)
    assert (response.status, (await response.json())["error"]["field"]) == (400, field)


async def test_heartbeats_renew_the_hosts_leases_and_silence_expires_them(
    runner: tuple[TestClient, dict[str, str]],
    db: Database,
    clock: FakeClock,  # type: ignore[type-arg]
) -> None:
    client, auth = runner
    await client.post("/api/runner/v1/register", json=REGISTRATION, headers=auth)
    new = builders.session("22222222-2222-2222-2222-222222222222")
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())
        [queued] = await take_queued_jobs(session)
        await grant_leases(
            session,
            [Grant(queued.pk, "modalix-bluebox", "lab-a-01", queued.session_id)],
            db.clock(),
            timedelta(seconds=60),
        )
    clock.advance(50)
    response = await client.post("/api/runner/v1/heartbeat", json={}, headers=auth)
    assert (await response.json())["leases_renewed"] == 1
    clock.advance(50)
    async with db.sessions() as session, session.begin():
        assert await expired_leases(session, db.clock()) == []
        assert await mark_silent_hosts_offline(session, db.clock(), timedelta(seconds=60)) == []
    clock.advance(61)
    async with db.sessions() as session, session.begin():
        assert await expired_leases(session, db.clock()) == [("modalix-bluebox", queued.pk)]
        assert await mark_silent_hosts_offline(session, db.clock(), timedelta(seconds=60)) == ["lab-a-01"]
