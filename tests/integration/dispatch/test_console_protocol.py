"""``POST /jobs/{id}/console`` over the runner protocol: a log of its own beside the output, from the accept
(power-on and boot come before the command) to the end; capped, masked, and another host's job is a 404."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import pytest
from aiohttp.test_utils import TestClient
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.lifecycle import FailureClass
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.installations import add_repositories, upsert_installation
from kerrigan.store.models import JobConsoleRow, JobLogRow, JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.secrets import Keyring, find_repository, set_secret
from tests.integration.dispatch.test_job_lifecycle import REGISTRATION, call, offer_one

Client = TestClient  # type: ignore[type-arg]
KEY: Final = Fernet.generate_key().decode()
VALUE: Final = "vpn-key-5f2b9c1e7d"


@pytest.fixture
async def hosts(db: Database, aiohttp_client: Callable[..., Any]) -> tuple[Client, dict[str, dict[str, str]]]:
    auth = {}
    async with db.sessions() as session, session.begin():
        for host in ("lab-a-01", "lab-b-01"):
            auth[host] = {"Authorization": f"Bearer {await create_runner_token(session, host, db.clock())}"}
    settings = Settings(
        database_url=db.engine.url.render_as_string(hide_password=False),
        output_max_bytes=1024,
        secrets_keys=(KEY,),
    )
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    for headers in auth.values():
        await client.post("/api/runner/v1/register", json=REGISTRATION, headers=headers)
    return client, auth


async def stored(db: Database, rows: type[JobConsoleRow] | type[JobLogRow], job: int) -> list[str]:
    async with db.sessions() as session:
        return list(
            (await session.scalars(select(rows.data).where(rows.job_pk == job).order_by(rows.seq))).all()
        )


async def test_the_console_is_sent_from_the_accept_numbered_apart_from_the_output(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    mine, other = auth["lab-a-01"], auth["lab-b-01"]
    assert (await call(client, f"/jobs/{job}/accept", mine))[1]["state"] == "accepted"
    # Before the command starts: the board powers on and boots.
    assert await call(
        client, f"/jobs/{job}/console", mine, {"seq": 0, "offset": 0, "data": "U-Boot\r\n"}
    ) == (
        200,
        {"next_seq": 1},
    )
    assert await call(
        client, f"/jobs/{job}/console", mine, {"seq": 0, "offset": 0, "data": "U-Boot\r\n"}
    ) == (
        200,
        {"next_seq": 1},
    )  # a repeat is acknowledged again
    gap = await call(client, f"/jobs/{job}/console", mine, {"seq": 5, "offset": 99, "data": "x"})
    assert (gap[0], gap[1]["error"]["code"], gap[1]["next_seq"]) == (409, "gap", 1)
    status, body = await call(client, f"/jobs/{job}/console", other, {"seq": 1, "offset": 8, "data": "x"})
    assert (status, body["error"]["code"]) == (404, "not_found")
    assert (await call(client, f"/jobs/{job}/start", mine))[1]["state"] == "running"
    assert await call(client, f"/jobs/{job}/output", mine, {"seq": 0, "offset": 0, "data": "test\n"}) == (
        200,
        {"next_seq": 1},
    )
    assert await call(client, f"/jobs/{job}/console", mine, {"seq": 1, "offset": 8, "data": "login: "}) == (
        200,
        {"next_seq": 2},
    )
    status, body = await call(
        client, f"/jobs/{job}/console", mine, {"seq": 2, "offset": 15, "data": "y" * 2000}
    )
    assert (status, body) == (200, {"next_seq": 3, "output_cut": True})  # KERRIGAN_OUTPUT_MAX_BYTES, 1 KiB
    assert await stored(db, JobLogRow, job) == ["test\n"]
    assert await stored(db, JobConsoleRow, job) == [
        "\n[console cut at 1 KiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n",  # seq -1: shown last
        "U-Boot\r\n",
        "login: ",
        "y" * (1024 - 15),
    ]


async def test_a_board_that_does_not_boot_ends_its_job_boot_failed_an_infrastructure_failure(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    job = await offer_one(db)
    await call(client, f"/jobs/{job}/accept", auth["lab-a-01"])
    await call(
        client, f"/jobs/{job}/console", auth["lab-a-01"], {"seq": 0, "offset": 0, "data": "Kernel panic\n"}
    )
    finished = await call(
        client, f"/jobs/{job}/finish", auth["lab-a-01"], {"exit_status": -1, "outcome": "boot_failed"}
    )
    assert finished[1]["state"] in ("failed", "retried")
    async with db.sessions() as session:
        row = await session.get(JobRow, job)
        assert row is not None
        assert (row.reason, row.failure_class) == ("boot_failed", FailureClass.INFRASTRUCTURE)


async def test_the_jobs_secrets_are_never_stored_from_its_console(
    hosts: tuple[Client, dict[str, dict[str, str]]], db: Database
) -> None:
    client, auth = hosts
    async with db.sessions() as session, session.begin():
        installation = await upsert_installation(session, 77, "octo", db.clock())
        await add_repositories(session, installation, [(4242, "octo/firmware")])
        repository = await find_repository(session, "octo/firmware")
        await set_secret(
            session, Keyring((KEY,)), repository, "LAB_VPN_KEY", VALUE, change=Change("olga", db.clock())
        )
    job = await offer_one(db)
    async with db.sessions() as session, session.begin():
        row = await session.get(JobRow, job)
        assert row is not None
        row.secrets = ["LAB_VPN_KEY"]
    accepted = await call(client, f"/jobs/{job}/accept", auth["lab-a-01"])
    assert accepted[1]["secrets"] == {"LAB_VPN_KEY": VALUE}
    line = f"vpn up with {VALUE}\r\n"  # an agent that missed it: the server hides it again
    assert await call(
        client, f"/jobs/{job}/console", auth["lab-a-01"], {"seq": 0, "offset": 0, "data": line}
    ) == (
        200,
        {"next_seq": 1},
    )
    next_offset = len(line.encode())
    assert (
        await call(
            client,
            f"/jobs/{job}/console",
            auth["lab-a-01"],
            {"seq": 1, "offset": next_offset, "data": "ok\r\n"},
        )
    )[0] == 200
    assert await stored(db, JobConsoleRow, job) == ["vpn up with ***\r\n", "ok\r\n"]
