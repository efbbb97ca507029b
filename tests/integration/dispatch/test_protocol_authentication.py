"""Every runner protocol call checks the host's token before it reads a byte of the body: a call without a
valid token is a 401, whatever it carries (a malformed body, one past the size limit), and changes nothing.
Over real HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.runner_fields import MAX_BODY_BYTES
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from tests.integration.dispatch.test_job_lifecycle import offer_one

Client = TestClient  # type: ignore[type-arg]
HOST = "lab-a-01"
RESERVATION = "0f0e0d0c-0b0a-4908-8706-050403020100"
# Every call of the protocol, by method and path; {job} is a job leased to the host.
CALLS = [
    ("POST", "/register"),
    ("POST", "/heartbeat"),
    ("GET", "/poll?wait=0"),
    ("POST", "/jobs/{job}/accept"),
    ("POST", "/jobs/{job}/refuse"),
    ("POST", "/jobs/{job}/start"),
    ("POST", "/jobs/{job}/output"),
    ("POST", "/jobs/{job}/console"),
    ("POST", "/jobs/{job}/finish"),
    ("POST", "/jobs/{job}/withdrawn"),
    ("POST", "/jobs/{job}/results?path=results/unit.xml&size=9"),
    ("POST", "/jobs/{job}/artifacts?path=logs/console.log&size=9"),
    ("POST", f"/reservations/{RESERVATION}/settings"),
]
WITHOUT = {
    "no token": {},
    "a token never made": {"Authorization": "Bearer kr_never_made"},
    "another scheme": {"Authorization": "Basic bGFiOmxhYg=="},
    "an empty bearer": {"Authorization": "Bearer "},
}


@pytest.fixture
async def lab(db: Database, aiohttp_client: Callable[..., Any]) -> tuple[Client, int]:
    """The server, a host with a real token (which these calls do not send), and a job leased to it."""
    async with db.sessions() as session, session.begin():
        await create_runner_token(session, HOST, db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client: Client = await aiohttp_client(create_app(settings, clock=db.clock))
    return client, await offer_one(db, HOST)


async def leased_still(db: Database, job: int) -> None:
    async with db.sessions() as session:
        row = await session.get(JobRow, job)
    assert row is not None
    assert (row.state, row.exit_status, row.started_at, row.next_seq) == ("leased", None, None, 0)


@pytest.mark.parametrize(("method", "path"), CALLS)
@pytest.mark.parametrize("headers", WITHOUT.values(), ids=WITHOUT.keys())
async def test_a_call_without_a_valid_token_and_with_a_malformed_body_is_a_401_not_a_400(
    db: Database, lab: tuple[Client, int], method: str, path: str, headers: dict[str, str]
) -> None:
    client, job = lab
    response = await client.request(
        method,
        "/api/runner/v1" + path.format(job=job),
        data=b'{"exit_status": 0, "reason": ',  # cut short: not JSON
        headers=headers | {"Content-Type": "application/json"},
    )
    assert response.status == 401, await response.text()
    assert (await response.json())["error"]["code"] == "unauthenticated"
    await leased_still(db, job)


@pytest.mark.parametrize(("method", "path"), CALLS)
async def test_a_call_without_a_token_is_a_401_before_its_body_is_found_too_large(
    db: Database, lab: tuple[Client, int], method: str, path: str
) -> None:
    client, job = lab
    response = await client.request(
        method,
        "/api/runner/v1" + path.format(job=job),
        data=io.BytesIO(b"{" + b" " * MAX_BODY_BYTES + b"}"),
        headers={"Content-Type": "application/json"},
    )
    assert response.status == 401, await response.text()
    await leased_still(db, job)


@pytest.mark.parametrize(("method", "path"), CALLS)
async def test_a_call_without_a_token_is_a_401_before_its_path_is_checked(
    db: Database, lab: tuple[Client, int], method: str, path: str
) -> None:
    # A job id out of range, a reservation id of the wrong shape: a 400 or 404 would tell a caller without
    # a token something; the 401 tells it nothing.
    client, job = lab
    bad = path.format(job="99999999999").replace(RESERVATION, "not-a-reservation")
    response = await client.request(method, "/api/runner/v1" + bad, json={})
    assert response.status == 401, await response.text()
    await leased_still(db, job)
