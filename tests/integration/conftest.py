"""Fixtures shared by the integration tests: the GitHub stand-in, a database holding the lab, Kerrigan and the
stand-in on loopback (the harness, tests/integration/github/conftest.py) and real runner agents against it
(tests/integration/runner/agents.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.inventory import Inventory
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn, generate_app_key
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.qemu_board import QemuBoard, build_initramfs, find_kernel, qemu_board_problem
from tests.integration.github.conftest import (
    FORK_SHA,
    INSTALLATION,
    MERGE_SHA,
    REPO,
    SHA,
    SMOKE_SHA,
    Harness,
    StartApp,
    lab,
    manifest_files,
    settings_for,
    store_inventory,
)
from tests.integration.runner.agents import AgentFactory


@pytest.fixture(scope="session")
def app_key() -> tuple[str, str]:
    """One RSA key pair for every stand-in of the run (generating one per test is slow)."""
    return generate_app_key()


@pytest.fixture
async def github(app_key: tuple[str, str]) -> AsyncIterator[GitHubStandIn]:
    private, public = app_key
    async with GitHubStandIn(public_key=public, private_key=private) as stand_in:
        stand_in.add_installation(INSTALLATION, "octo")
        stand_in.add_repository(REPO, INSTALLATION)
        stand_in.add_commit(REPO, SHA, manifest_files())
        stand_in.add_commit(REPO, SMOKE_SHA, manifest_files("hil-smoke.yml"))
        stand_in.add_commit(REPO, FORK_SHA, manifest_files())
        stand_in.add_commit(REPO, MERGE_SHA, manifest_files())
        yield stand_in


@pytest.fixture
async def lab_db(db: Database) -> Database:
    """The database with the lab inventory stored."""
    await store_inventory(db, Inventory(), lab())
    return db


@pytest.fixture
def start_app(db: Database, aiohttp_client: Callable[..., Any]) -> StartApp:
    """Start a Kerrigan with the given settings on the test's database (closed at the end of the test)."""

    async def start(settings: Settings) -> TestClient:  # type: ignore[type-arg]
        client: TestClient = await aiohttp_client(create_app(settings, clock=db.clock))  # type: ignore[type-arg]
        return client

    return start


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    """The pair, with the lab inventory stored."""
    client = await start_app(settings_for(lab_db, github))
    return Harness(client, github, lab_db)


@pytest.fixture
async def bare_harness(db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    """The pair on an empty inventory (quicker to set up), for tests where what the lab holds does not matter:
    every task is then unschedulable."""
    client = await start_app(settings_for(db, github))
    return Harness(client, github, db)


@pytest.fixture
async def agents(harness: Harness, tmp_path: Path) -> AsyncIterator[AgentFactory]:
    """Start an agent for a runner host (stopped at the end of the test)."""
    tasks: list[asyncio.Task[None]] = []
    async with aiohttp.ClientSession() as http:
        made: list[Agent] = []

        def start(host: str, token: str, **overrides: Any) -> Agent:
            settings = AgentSettings(
                server_url=str(harness.client.make_url("")),
                token=token,
                host_id=host,
                work_dir=tmp_path / host,
                disk=overrides.pop("disk", DiskPolicy(0)),
                heartbeat_s=0.2,
                kill_grace_s=overrides.pop("kill_grace_s", 2.0),
                systemd_scope="never",
                job_users=overrides.pop("job_users", None) or spare_job_users(),  # each agent its own
                **overrides,
            )
            agent = Agent(settings, http)
            made.append(agent)
            tasks.append(asyncio.create_task(agent.run()))
            return agent

        yield start
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


# -- The QEMU board (kerrigan.testing.qemu_board): its initramfs built once a session --------------------


@pytest.fixture(scope="session")
def qemu_initramfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The QEMU board's busybox initramfs, built once for the session; the test is skipped, naming what is
    missing, on a host without QEMU, a kernel or a static busybox (.ci/install-qemu-board installs them)."""
    problem = qemu_board_problem()
    if problem is not None:
        pytest.skip(f"no QEMU board: {problem}")
    return build_initramfs(tmp_path_factory.mktemp("qemu-board") / "initramfs.cpio")


@pytest.fixture
async def qemu_board(qemu_initramfs: Path) -> AsyncIterator[QemuBoard]:
    """A QEMU board, off, its console served (killed at the end of the test)."""
    kernel = find_kernel()
    assert kernel is not None  # qemu_initramfs skipped the test otherwise
    async with QemuBoard(kernel, qemu_initramfs) as board:
        yield board


# -- For the stand-in's own tests (tests/integration/github/test_standin*.py) --------------------------------
# A client session speaking as GitHub's clients do; an installation token minted through the real endpoint.

STANDIN_API_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": "standin-tests",
}


def standin_app_jwt(github: GitHubStandIn) -> str:
    """A JWT of the stand-in's App, valid now."""
    now = int(time.time())
    assert github.private_key is not None
    return jwt.encode({"iat": now - 60, "exp": now + 540, "iss": github.app_id}, github.private_key, "RS256")


def token_auth(token: str) -> dict[str, str]:
    """The Authorization header of an installation token."""
    return {"Authorization": f"token {token}"}


async def mint_token(http: aiohttp.ClientSession, github: GitHubStandIn, **body: Any) -> str:
    """An installation token from ``POST /app/installations/{id}/access_tokens`` with this body."""
    async with http.post(
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        json=body,
        headers={"Authorization": f"Bearer {standin_app_jwt(github)}"},
    ) as response:
        assert response.status == 201, await response.text()
        token: str = (await response.json())["token"]
        return token


@pytest.fixture
async def api_session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session sending GitHub's recommended headers."""
    async with aiohttp.ClientSession(headers=STANDIN_API_HEADERS) as session:
        yield session


@pytest.fixture
async def installation_token(api_session: aiohttp.ClientSession, github: GitHubStandIn) -> str:
    """A token of the ``github`` fixture's installation."""
    return await mint_token(api_session, github)
