"""The REST API as a client sees it: the whole application on a fresh database, over real HTTP on loopback.

Every test gets a small lab, stored through the store's own functions before the server starts:

- ``pool-a`` ("Pool A"), owned by olga: labels ``sdk=2.2.0``, ``form_factor=som``, tag ``som-devkits``,
  firmware ``ga`` / ``2.2.0``; devices ``dev-a1`` (labels ``uart=enabled`` and ``sdk=2.2.1``, which overrides
  the pool's, tag ``uart-debug``) and ``dev-a2`` (no labels or tags of its own);
- ``pool-b`` ("Pool B"), owned by bob: labels ``sdk=2.1.1``, ``form_factor=som``, tag ``legacy``; device
  ``dev-b1``.

and an API token for each role: alice (System Admin), olga (owner of pool-a), bob (owner of pool-b) and
rita (signed in, owns nothing). The GitHub App is the stand-in's: olga, bob and rita read ``octo/firmware``
there, so they see its sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from multidict import CIMultiDictProxy

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.inventory import Device, Firmware, Pool
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import create_device, create_pool, load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.tokens import create_token
from kerrigan.testing.agents_spoke import hear_hosts
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from kerrigan.web.state import DATABASE
from tests.integration.github.conftest import REPO

ADMIN = "alice"
OWNER_A = "olga"
OWNER_B = "bob"
READER = "rita"
ANONYMOUS = None
LOGINS = (ADMIN, OWNER_A, OWNER_B, READER)

POOL_A = Pool(
    id="pool-a",
    name="Pool A",
    owners=(OWNER_A,),
    firmware=Firmware("ga", "2.2.0"),
    labels={"sdk": "2.2.0", "form_factor": "som"},
    tags=frozenset({"som-devkits"}),
)
POOL_B = Pool(
    id="pool-b",
    name="Pool B",
    owners=(OWNER_B,),
    labels={"sdk": "2.1.1", "form_factor": "som"},
    tags=frozenset({"legacy"}),
)
DEV_A1 = Device(
    "dev-a1",
    "pool-a",
    "modalix",
    "devkit",
    "linux",
    "lab-a-01",
    labels={"uart": "enabled", "sdk": "2.2.1"},
    tags=frozenset({"uart-debug"}),
)
DEV_A2 = Device("dev-a2", "pool-a", "modalix", "devkit", "linux", "lab-a-02")
DEV_B1 = Device("dev-b1", "pool-b", "davinci", "devkit", "linux", "lab-b-01")


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: its status, headers and body (parsed JSON, or the text when it is not JSON)."""

    status: int
    headers: CIMultiDictProxy[str]
    body: Any


class Api:
    """A client of ``/api/v1`` that signs each request with the token of the login it is told to act as."""

    def __init__(self, client: TestClient[Any, Any], tokens: Mapping[str, str], db: Database) -> None:
        self.client = client
        self.tokens = tokens
        self.db = db

    async def call(
        self,
        method: str,
        path: str,
        *,
        who: str | None = ADMIN,
        json: Any = None,
        data: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """``method`` on ``/api/v1{path}`` as ``who`` (``None``: no token), with ``json`` or raw ``data``
        as the body if given."""
        sent = dict(headers or {})
        if who is not None:
            sent.setdefault("Authorization", f"Bearer {self.tokens[who]}")
        options: dict[str, Any] = {"headers": sent}
        if json is not None:
            options["json"] = json
        elif data is not None:
            options["data"] = data
        async with self.client.request(method, f"/api/v1{path}", **options) as response:
            text = await response.text()
            body: Any = text
            if response.content_type == "application/json":
                body = await response.json()
            return Reply(response.status, response.headers, body)

    async def get(self, path: str, *, who: str | None = ADMIN) -> Reply:
        """A read that must succeed; its reply."""
        reply = await self.call("GET", path, who=who)
        assert reply.status == 200, reply.body
        return reply

    async def snapshot(self) -> tuple[object, ...]:
        """Everything stored about the inventory, the key registry and the audit log, read from the store.

        A refused write must leave all of it as it was (every stored change also writes the audit log).
        """
        async with self.db.sessions() as session:
            return (
                await load_inventory(session),
                await label_keys(session),
                await list_audit(session, limit=1000),
            )


async def seed_lab(db: Database) -> dict[str, str]:
    """Store the lab above and a token for each login; the tokens by login."""
    change = Change(ADMIN, db.clock())
    async with db.sessions() as session, session.begin():
        for pool in (POOL_A, POOL_B):
            await create_pool(session, pool, change)
        for device in (DEV_A1, DEV_A2, DEV_B1):
            await create_device(session, device, change)
        tokens = {login: await create_token(session, login, change.at) for login in LOGINS}
    await hear_hosts(db)  # its runner hosts' agents have spoken: the tests play their part
    return tokens


@pytest.fixture
async def api(
    aiohttp_client: Any, database_url: str, db: Database, clock: FakeClock, github: GitHubStandIn
) -> Api:
    """The server on the lab above, alice its only System Admin, stamping changes with ``clock``, its
    GitHub App the stand-in's (installed on octo), where olga, bob and rita read ``octo/firmware`` (it is
    private), the repository of the sessions these tests store.

    ``db`` empties the database first. The lab is stored through the server's own ``Database``, whose
    engine is then warm for the requests that follow.
    """
    for login in (OWNER_A, OWNER_B, READER):
        github.set_permission(REPO, login, "read")
    settings = Settings(
        database_url=database_url,
        admins=frozenset({ADMIN}),
        github_api_url=github.url,
        github_app_id=github.app_id,
        github_private_key=github.private_key,
    )
    client = await aiohttp_client(create_app(settings, clock=clock))
    database = client.app[DATABASE]
    return Api(client, await seed_lab(database), database)
