"""The reconciler tests' fixtures: the watched stand-in in place of the ``github`` fixture, and the rig
(:mod:`tests.integration.github.reconciler.rig`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeClock
from tests.integration.github.conftest import (
    FORK_SHA,
    INSTALLATION,
    MERGE_SHA,
    REPO,
    SHA,
    SMOKE_SHA,
    manifest_files,
)
from tests.integration.github.reconciler.rig import Rig, WatchedStandIn


@pytest.fixture
async def github(app_key: tuple[str, str]) -> AsyncIterator[WatchedStandIn]:
    """The ``github`` fixture of tests/integration/conftest.py, watched (the harness uses it too)."""
    private, public = app_key
    stand_in = WatchedStandIn(public_key=public, private_key=private)
    await stand_in.start()
    try:
        stand_in.add_installation(INSTALLATION, "octo")
        stand_in.add_repository(REPO, INSTALLATION)
        stand_in.add_commit(REPO, SHA, manifest_files())
        stand_in.add_commit(REPO, SMOKE_SHA, manifest_files("hil-smoke.yml"))
        stand_in.add_commit(REPO, FORK_SHA, manifest_files())
        stand_in.add_commit(REPO, MERGE_SHA, manifest_files())
        yield stand_in
    finally:
        await stand_in.close()


@pytest.fixture
async def rig(lab_db: Database, github: WatchedStandIn, clock: FakeClock) -> AsyncIterator[Rig]:
    async with aiohttp.ClientSession() as http:
        yield Rig(lab_db, github, clock, http)
