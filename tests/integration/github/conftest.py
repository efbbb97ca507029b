"""Kerrigan and a GitHub stand-in, both on loopback: deliveries in, check runs out, over real HTTP.

The repository ``octo/firmware`` (installation 1) holds the example manifests of ``fixtures/manifests``
(all but ``invalid.yml``) at commit :data:`SHA`; the inventory is ``fixtures/inventory/lab.yml``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient

from kerrigan.app import WORKER, create_app
from kerrigan.config import Settings
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.testing.github import GitHubStandIn, signed_headers

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "fixtures" / "manifests"
SECRET = "webhook-secret"
REPO = "octo/firmware"
INSTALLATION = 1
SHA = "a" * 40


def lab() -> Inventory:
    result = parse_inventory((ROOT / "fixtures" / "inventory" / "lab.yml").read_text(encoding="utf-8"), "lab.yml")
    assert result.inventory is not None
    return result.inventory


def manifest_files(*names: str) -> dict[str, str]:
    """Manifests from fixtures/manifests as they would sit in a repository."""
    chosen = names or tuple(p.name for p in sorted(MANIFESTS.glob("*.yml")) if p.name != "invalid.yml")
    return {f".kerrigan/workflows/{name}": (MANIFESTS / name).read_text(encoding="utf-8") for name in chosen}


@dataclass
class Harness:
    """The running pair and a way to send deliveries and wait for them."""

    client: TestClient  # type: ignore[type-arg]
    github: GitHubStandIn
    database: Database

    async def deliver(self, event: str, payload: dict[str, Any], delivery_id: str | None = None) -> int:
        body = json.dumps(payload).encode()
        response = await self.client.post("/webhooks/github", data=body,
                                          headers=signed_headers(SECRET, event, body, delivery_id))
        return response.status

    async def settle(self, timeout: float = 10.0) -> None:
        """Wait until every stored delivery has been processed."""
        worker = self.client.app[WORKER]
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            async with self.database.sessions() as session:
                if await pending_count(session) == 0:
                    return
            worker.wake()
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError("deliveries still pending after the timeout")
            await asyncio.sleep(0.02)


def push_payload(sha: str = SHA, ref: str = "refs/heads/main", **extra: Any) -> dict[str, Any]:
    return {
        "ref": ref, "after": sha, "before": "0" * 40, "deleted": False,
        "repository": {"id": 1, "full_name": REPO, "name": "firmware", "owner": {"login": "octo"}},
        "installation": {"id": INSTALLATION}, "sender": {"login": "octocat", "type": "User"}, **extra,
    }


@pytest.fixture
async def github() -> AsyncIterator[GitHubStandIn]:
    async with GitHubStandIn() as stand_in:
        stand_in.add_installation(INSTALLATION, "octo")
        stand_in.add_repository(REPO, INSTALLATION)
        stand_in.add_commit(REPO, SHA, manifest_files())
        yield stand_in


@pytest.fixture
async def harness(
    db: Database, github: GitHubStandIn, aiohttp_client: Callable[..., Any]
) -> AsyncIterator[Harness]:
    async with db.sessions() as session, session.begin():
        inventory = lab()
        await apply_diff(session, inventory, diff_inventories(Inventory(), inventory), Change("test", db.clock()))
    settings = Settings(
        database_url=str(db.engine.url.render_as_string(hide_password=False)),
        github_api_url=github.url,
        github_app_id=github.app_id,
        github_private_key=github.private_key,
        webhook_secret=SECRET,
        public_url="http://kerrigan.test",
    )
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    yield Harness(client, github, db)
