"""``kerrigan runners list|revoke|rotate`` as an operator runs them, on the lab's database, and what a
running agent does when its token is revoked: real processes, the server on loopback."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.inventory import Inventory
from kerrigan.store.audit import list_audit
from kerrigan.store.database import Database
from kerrigan.store.runners import create_runner_token, host_report, record_report
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import lab, store_inventory

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
HOST = "lab-a-01"


def _environ(database_url: str) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    environ["KERRIGAN_DATABASE_URL"] = database_url
    return environ


def kerrigan(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``kerrigan ARGS`` on the database, as a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=_environ(database_url),
        timeout=60,
    )


@sqlite_only
async def test_list_shows_each_host_its_state_heartbeat_and_token_in_columns(
    db: Database, database_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    await store_inventory(db, Inventory(), lab(), agents_spoke=False)
    async with db.sessions() as session, session.begin():
        await create_runner_token(session, HOST, db.clock(), actor="olga")
    clock.advance(90)
    async with db.sessions() as session, session.begin():
        await record_report(session, HOST, db.clock(), resources={}, device_states={})
    done = kerrigan(database_url, tmp_path, "runners", "list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["HOST", "STATE", "LAST HEARTBEAT", "TOKEN MADE", "TOKEN USED"]
    rows = {re.split(r"\s{2,}", line)[0]: re.split(r"\s{2,}", line.rstrip()) for line in lines[1:]}
    assert rows[HOST] == [HOST, "online", "2026-11-29 12:01 UTC", "2026-11-29 12:00 UTC", "never"]
    others = [row for host, row in rows.items() if host != HOST]
    assert others
    assert all(row[2:] == ["never", "none"] for row in others)  # no token yet
    assert rows["lab-b-02"][1] == "offline"  # as the inventory says: no runner speaks for it
    # Every column starts where its header does.
    starts = [lines[0].index(title) for title in ("STATE", "LAST HEARTBEAT", "TOKEN MADE")]
    assert all(line[start - 2 : start] == "  " for line in lines[1:] for start in starts)


@sqlite_only
async def test_rotate_prints_a_new_token_and_revoke_leaves_none_both_audited(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    await store_inventory(db, Inventory(), lab())
    async with db.sessions() as session, session.begin():
        first = await create_runner_token(session, HOST, db.clock())
    rotated = kerrigan(database_url, tmp_path, "runners", "rotate", HOST, "--actor", "olga")
    assert rotated.returncode == 0, rotated.stderr
    token = rotated.stdout.strip()
    assert token.startswith("kgr_")
    assert token != first
    assert f"the previous token of {HOST} no longer works" in rotated.stderr
    revoked = kerrigan(database_url, tmp_path, "runners", "revoke", HOST, "--actor", "olga")
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"revoked the token of {HOST}: ")
    async with db.sessions() as session:
        report = await host_report(session, HOST)
        audit = await list_audit(session)
    assert report is not None
    assert not report.token
    tokens = [(e.actor, e.action) for e in reversed(audit) if e.field == "token"]
    assert tokens == [("kerrigan", "add"), ("olga", "change"), ("olga", "remove")]
    assert not [e for e in audit if token in str(e.before) + str(e.after)]  # never the token itself


@sqlite_only
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("revoke", "nowhere-01"), "there is no runner host nowhere-01"),
        (("rotate", "nowhere-01"), "there is no runner host nowhere-01"),
        (("revoke", "Bad Host"), "'Bad Host' is not a runner host id"),
        (("revoke", "lab-b-01"), "runner host lab-b-01 has no token to revoke"),
    ],
)
async def test_a_mistake_is_one_line_exit_status_2(
    db: Database, database_url: str, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    await store_inventory(db, Inventory(), lab())
    done = kerrigan(database_url, tmp_path, "runners", *args, "--actor", "olga")
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
    async with db.sessions() as session:
        assert [e for e in await list_audit(session) if e.actor == "olga"] == []


@sqlite_only
async def test_a_running_agent_whose_token_is_revoked_stops_saying_so_in_one_line(
    db: Database, database_url: str, tmp_path: Path, aiohttp_client: Callable[..., Any]
) -> None:
    await store_inventory(db, Inventory(), lab())
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, HOST, db.clock())
    client: TestClient[Any, Any] = await aiohttp_client(create_app(Settings(database_url=database_url)))
    environ = _environ(database_url) | {"KERRIGAN_RUNNER_TOKEN": token}
    agent = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kerrigan.cli",
        "runner",
        "--server",
        str(client.make_url("")).rstrip("/"),
        "--host-id",
        HOST,
        "--work-dir",
        str(tmp_path / "agent"),
        "--isolation",
        "off",
        "--systemd-scope",
        "never",
        "--free-space-floor-bytes",
        "0",
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:

        async def online() -> bool:
            async with db.sessions() as session:
                report = await host_report(session, HOST)
            return report is not None and report.online

        await wait_until(online, timeout=30, what="the agent to register")
        revoked = await asyncio.to_thread(kerrigan, database_url, tmp_path, "runners", "revoke", HOST)
        assert revoked.returncode == 0, revoked.stderr
        _, stderr = await asyncio.wait_for(agent.communicate(), timeout=60)
    finally:
        if agent.returncode is None:
            agent.kill()
            await agent.wait()
    assert agent.returncode == 2
    said = [line for line in stderr.decode().splitlines() if "refused this host's token" in line]
    assert said == [
        "kerrigan runner: the server refused this host's token: 401 unauthenticated: this runner token was "
        "revoked, replaced or never made: `kerrigan runners rotate HOST` on the server makes a new one"
    ]
