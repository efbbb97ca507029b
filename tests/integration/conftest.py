"""Fixtures shared by the integration tests: the GitHub stand-in and a database holding the lab."""

from __future__ import annotations

from collections.abc import AsyncIterator

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
