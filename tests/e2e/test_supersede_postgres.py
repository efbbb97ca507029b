"""Pushes superseding each other on two replicas and PostgreSQL: no deadlock, no delivery processed twice.

Two ``kerrigan serve`` processes on one PostgreSQL database (each starts its own delivery worker, the
default there), the GitHub stand-in and two runner agents; the repository's manifest keeps the default
concurrency, so each push to ``main`` cancels the older commits' sessions that have not started. Forty
pushes go to the two replicas in turn, ten a second, while the dispatcher leases the newest commits' jobs
and the runners start them. PostgreSQL counts the deadlocks it broke in the database
(``pg_stat_database.deadlocks``): there must be none, every delivery must be processed on its first claim,
and each push must make one session, one check run and one job per task. Skipped without
``KERRIGAN_TEST_POSTGRES_URL``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import aiohttp
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.engine import make_url

from kerrigan.store.database import Database, create_engine
from kerrigan.store.models import DeliveryRow, JobRow, SessionRow
from kerrigan.testing.process_lab import (
    REPOSITORY,
    WEBHOOK_SECRET,
    ProcessLab,
    push,
    runner_agent,
    store_lab,
    write_files,
)
from kerrigan.testing.processes import APP_ID, free_port, serve_with_github, wait_ready
from tests.conftest import POSTGRES_ENV
from tests.e2e.conftest import INVENTORY

PUSHES: Final = 40
RATE: Final = 10.0
MANIFEST: Final = """
name: bench
on: {push: {branches: [main]}}
scheduling: {max_devkits: 2, labels: {sdk: "2.2.0"}}
tasks:
  - {id: build, run: "sleep 0.3", vcpus: 1}
  - {id: test, run: "sleep 0.3", vcpus: 1}
"""


async def _admin(server: str, statement: str) -> list[tuple[object, ...]]:
    engine = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            result = await connection.execute(text(statement))
            return [tuple(row) for row in result.all()] if result.returns_rows else []
    finally:
        await engine.dispose()


@pytest.fixture
async def postgres_database() -> AsyncIterator[tuple[str, str]]:
    """A fresh database of its own on the test server (its URL and name), dropped at the end."""
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set: the PostgreSQL end-to-end test is skipped")
    name = f"kerrigan_e2e_{uuid.uuid4().hex[:12]}"
    await _admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False), name
    finally:
        await _admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.asynccontextmanager
async def second_replica(lab: ProcessLab, url: str) -> AsyncIterator[str]:
    """Another ``kerrigan serve`` on the same database and stand-in; its address."""
    port = free_port()
    env = {
        **os.environ,
        "KERRIGAN_DATABASE_URL": url,
        "KERRIGAN_PORT": str(port),
        "KERRIGAN_GITHUB_API_URL": lab.github_url,
        "KERRIGAN_GITHUB_PRIVATE_KEY": lab.served.private_key,
        "KERRIGAN_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "KERRIGAN_GITHUB_APP_ID": APP_ID,
    }
    with (lab.folder / "serve-2.log").open("wb") as log:
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kerrigan.cli", "serve", env=env, stdout=log, stderr=log
        )
    try:
        base = f"http://127.0.0.1:{port}"
        await wait_ready(base)
        yield base
    finally:
        if server.returncode is None:
            server.terminate()
            await server.wait()


async def _settled(database: Database, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        async with database.sessions() as db:
            pending = await db.scalar(select(func.count()).where(DeliveryRow.processed_at.is_(None)))
            sessions = await db.scalar(select(func.count()).select_from(SessionRow))
            open_ = await db.scalar(
                select(func.count()).where(
                    (SessionRow.state != "completed") | (SessionRow.shown_version < SessionRow.version)
                )
            )
        if not pending and sessions == PUSHES and not open_:
            return
        assert time.monotonic() < deadline, f"{pending} deliveries pending, {open_} sessions open"
        await asyncio.sleep(0.25)


async def test_pushes_superseding_each_other_on_two_replicas_deadlock_nothing_and_run_once(
    tmp_path: Path, postgres_database: tuple[str, str]
) -> None:
    url, name = postgres_database
    database = Database.connect(url)
    try:
        tokens = await store_lab(database, INVENTORY)
        env = {"KERRIGAN_DATABASE_URL": url}
        shas = [f"{n:040x}" for n in range(1, PUSHES + 1)]
        async with serve_with_github(
            tmp_path,
            database_url=url,
            repository=REPOSITORY,
            workflows=None,
            files=write_files(tmp_path / "repository", {".kerrigan/workflows/bench.yml": MANIFEST}),
            webhook_secret=WEBHOOK_SECRET,
            environment=env,
        ) as served:
            lab = ProcessLab(served, database, tmp_path, tokens, env)
            async with (
                second_replica(lab, url) as other,
                runner_agent(lab, "rig-01"),
                runner_agent(lab, "rig-02"),
            ):
                replicas = [lab, dataclasses.replace(lab, served=dataclasses.replace(served, base=other))]
                began = time.monotonic()
                for n, sha in enumerate(shas):
                    await asyncio.sleep(max(0.0, began + n / RATE - time.monotonic()))
                    await push(replicas[n % 2], sha)
                await _settled(database, timeout=120)
                async with aiohttp.ClientSession() as http, http.get(f"{lab.github_url}/_check-runs") as got:
                    check_runs = await got.json()
        # Every server has stopped: their connections' statistics are in.
        [(deadlocks,)] = await _admin(url, f"SELECT deadlocks FROM pg_stat_database WHERE datname = '{name}'")
        async with database.sessions() as db:
            deliveries = (await db.execute(select(DeliveryRow.attempts, DeliveryRow.error))).all()
            sessions = (
                await db.execute(select(SessionRow.delivery_id, SessionRow.head_sha, SessionRow.conclusion))
            ).all()
            jobs = (await db.execute(select(JobRow.session_pk, JobRow.task_id, JobRow.attempt))).all()
    finally:
        await database.close()
    assert deadlocks == 0
    assert [row for row in deliveries if row.attempts != 1 or row.error is not None] == []
    assert len(sessions) == PUSHES
    assert len({row.delivery_id for row in sessions}) == PUSHES  # a session per push, none made twice
    assert [key for key, n in Counter(tuple(row) for row in jobs).items() if n > 1] == []
    made = Counter(run["head_sha"] for run in check_runs)
    assert [sha for sha in shas if made[sha] != 1] == []
    # The newest commit runs; each older one was superseded, or ran, if it started first.
    conclusions = {row.head_sha: row.conclusion for row in sessions}
    assert conclusions.pop(shas[-1]) == "success"
    assert set(conclusions.values()) <= {"success", "cancelled"}
