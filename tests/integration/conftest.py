"""Fixtures shared by the integration tests: the GitHub stand-in and a database holding the lab."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import jwt
import pytest

from kerrigan.core.inventory import Inventory
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn, generate_app_key
from tests.integration.github.conftest import (
    FORK_SHA,
    INSTALLATION,
    MERGE_SHA,
    REPO,
    SHA,
    SMOKE_SHA,
    lab,
    manifest_files,
    store_inventory,
)


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
