"""Kerrigan and a GitHub stand-in, both on loopback: deliveries in, check runs out, over real HTTP.

The repository ``octo/firmware`` (installation 1) holds the example manifests of ``fixtures/manifests``
(all but ``invalid.yml``) at commit :data:`SHA`, the head commit of ``fixtures/webhooks/push.json``, and
at the head commits of the fork pull request and the merge group of ``fixtures/webhooks``, which are
written for this repository and installation; :data:`SMOKE_SHA` holds ``hil-smoke.yml`` alone. The
inventory is ``fixtures/inventory/lab.yml``. The fixtures that start the pair (``start_app``, ``harness``,
``bare_harness``) are tests/integration/conftest.py's, so that the runner agent's tests share them.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select

from kerrigan.app import RECONCILER, WORKER
from kerrigan.config import Settings
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.sessions import Session
from kerrigan.store.audit import Change
from kerrigan.store.check_runs import behind_count
from kerrigan.store.database import Database
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import DeliveryRow, SessionRow
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.agents_spoke import hear_hosts
from kerrigan.testing.github import GitHubStandIn, RecordedRequest, signed_headers
from kerrigan.testing.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "fixtures" / "manifests"
WEBHOOKS = ROOT / "fixtures" / "webhooks"
SHARED_PAYLOADS = ROOT.parent / "shared" / "github-payloads"
SECRET = "webhook-secret"
PUBLIC_URL = "http://kerrigan.test"
REPO = "octo/firmware"
INSTALLATION = 1
SHA = "c7e2a9d1f04b3e6a8d5c2b1f9e07a4d3c6b8e512"  # push.json's head commit
FORK_SHA = "e41d7c2b9a0f3e5d6c8b7a9f1e2d3c4b5a6f7e80"  # pull_request-fork.json's head commit
MERGE_SHA = "0d9a3f7c2e5b8a1d4c6e9f2b3a5c7d8e1f4a6b90"  # merge_group-checks_requested.json's head commit
SMOKE_SHA = "5d41c2a7e9b03f6d8c1a2b4e6f8091a3c5e7d9b2"  # a commit with hil-smoke.yml alone, for quick tests
SETTLE_S = 30.0  # generous: a loaded CI machine is slow, and a hang fails saying where it hangs
OTHER_SHA = "3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d"  # free for a test's own files
# The example manifests a push to main starts, and those a pull request against main starts.
PUSH_WORKFLOWS = ("hil-smoke", "legacy", "select-device", "select-pool", "task-refinement", "typo", "waiting")
PULL_REQUEST_WORKFLOWS = ("hil-smoke", "org-class")


def lab() -> Inventory:
    text = (ROOT / "fixtures" / "inventory" / "lab.yml").read_text(encoding="utf-8")
    result = parse_inventory(text, "lab.yml")
    assert result.inventory is not None
    return result.inventory


def manifest_files(*names: str) -> dict[str, str]:
    """Manifests from fixtures/manifests as they would sit in a repository."""
    chosen = names or tuple(p.name for p in sorted(MANIFESTS.glob("*.yml")) if p.name != "invalid.yml")
    return {f".kerrigan/workflows/{name}": (MANIFESTS / name).read_text(encoding="utf-8") for name in chosen}


def webhook(name: str) -> dict[str, Any]:
    """A fresh copy of ``fixtures/webhooks/<name>.json``."""
    payload: dict[str, Any] = json.loads((WEBHOOKS / f"{name}.json").read_text(encoding="utf-8"))
    return payload


def check_run_name(workflow: str) -> str:
    return f"kerrigan / {workflow}"


@dataclass(frozen=True)
class StoredDelivery:
    """A row of ``webhook_deliveries``, as far as the tests care."""

    delivery_id: str
    event: str
    action: str | None
    processed: bool
    attempts: int
    error: str | None


@dataclass
class Harness:
    """The running pair and a way to send deliveries, wait for them and look at what they did."""

    client: TestClient  # type: ignore[type-arg]
    github: GitHubStandIn
    database: Database

    async def deliver(self, event: str, payload: dict[str, Any], delivery_id: str | None = None) -> int:
        """Post ``payload`` signed as GitHub would; the answer's status."""
        body = json.dumps(payload).encode()
        response = await self.client.post(
            "/webhooks/github", data=body, headers=signed_headers(SECRET, event, body, delivery_id)
        )
        return response.status

    async def settle(self, timeout: float = SETTLE_S) -> None:
        """Wait until every stored delivery has been processed and GitHub shows every session's check run
        as the store has it; on timeout, fail saying what is still pending and what every task awaits."""
        worker = self.client.app[WORKER]
        reconciler = self.client.app[RECONCILER]
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            async with self.database.sessions() as session:
                if await pending_count(session) == 0 and await behind_count(session) == 0:
                    return
            worker.wake()
            reconciler.wake()
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"not settled within {timeout:g} s (the database clock reads {self.database.clock()})\n"
                    + await unsettled(self.database)
                    + "\n"
                    + awaited_by_tasks()
                )
            await asyncio.sleep(0.02)

    async def wait_until(self, condition: Callable[[], Awaitable[bool]], timeout: float = SETTLE_S) -> None:
        """Wait until ``condition()`` holds."""
        await wait_until(condition, timeout=timeout)

    async def deliveries(self) -> list[StoredDelivery]:
        return await stored_deliveries(self.database)

    async def sessions(self, **filters: Any) -> list[Session]:
        """The sessions of ``octo/firmware``, oldest first, narrowed as ``find_sessions`` narrows them."""
        async with self.database.sessions() as session:
            return await find_sessions(session, REPO, **filters)

    def requests(self, method: str, path_end: str) -> list[RecordedRequest]:
        """What the stand-in received with this method on paths ending in ``path_end``."""
        return [r for r in self.github.requests if r.method == method and r.path.endswith(path_end)]

    async def push_commit(self, files: dict[str, str], sha: str = OTHER_SHA) -> list[dict[str, Any]]:
        """Push a commit holding ``files`` to main; the check runs that exist once it is processed."""
        self.github.add_commit(REPO, sha, files)
        assert await self.deliver("push", push_payload(sha)) == 202
        await self.settle()
        return list(self.github.check_runs.values())

    def check_run_names(self) -> list[str]:
        return sorted(run["name"] for run in self.github.check_runs.values())


async def unsettled(database: Database) -> str:
    """The deliveries not yet processed and the check runs GitHub shows behind, one line each."""
    async with database.sessions() as session:
        deliveries = (
            await session.scalars(select(DeliveryRow).where(DeliveryRow.processed_at.is_(None)))
        ).all()
        behind = (
            await session.scalars(select(SessionRow).where(SessionRow.shown_version < SessionRow.version))
        ).all()
    lines = [
        f"delivery {row.delivery_id} ({row.event}): attempts {row.attempts}, claimed until "
        f"{row.claimed_until}, next attempt {row.next_attempt_at}, error {row.error!r}"
        for row in deliveries
    ]
    lines += [
        f"check run of {row.workflow} ({row.id}): version {row.version}, shown {row.shown_version}, due "
        f"{row.sync_due_at}, claimed until {row.sync_claimed_until}, attempts {row.sync_attempts}, create "
        f"sent {row.create_sent_version}, error {row.check_run_error!r}"
        for row in behind
    ]
    return "\n".join(lines) or "(nothing pending)"


def awaited_by_tasks() -> str:
    """Where each running task of Kerrigan waits: the chain of coroutines it awaits through, in Kerrigan's
    code (``Task.get_stack`` gives one frame of a suspended task, so the chain is walked by hand)."""
    lines = []
    for task in asyncio.all_tasks():
        frames = []
        awaited: Any = task.get_coro()
        while awaited is not None:
            frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
            if frame is not None and "kerrigan" in frame.f_code.co_filename:
                frames.append(
                    f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno} {frame.f_code.co_name}"
                )
            awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        if frames:
            lines.append(f"task {task.get_name()}: " + " > ".join(frames))
    return "\n".join(sorted(lines))


async def stored_deliveries(database: Database) -> list[StoredDelivery]:
    async with database.sessions() as session:
        rows = (await session.scalars(select(DeliveryRow).order_by(DeliveryRow.pk))).all()
        return [
            StoredDelivery(
                row.delivery_id, row.event, row.action, row.processed_at is not None, row.attempts, row.error
            )
            for row in rows
        ]


async def store_inventory(
    database: Database, before: Inventory, after: Inventory, *, agents_spoke: bool = True
) -> None:
    """Change the stored inventory from ``before`` to ``after`` through the store's own diff; with
    ``agents_spoke``, the agents of its online hosts have spoken (the tests play the runners' part)."""
    async with database.sessions() as session, session.begin():
        await apply_diff(session, after, diff_inventories(before, after), Change("test", database.clock()))
    if agents_spoke:
        await hear_hosts(database)


def settings_for(db: Database, github: GitHubStandIn, **overrides: Any) -> Settings:
    """The settings of a Kerrigan that talks to ``github`` and stores in ``db``."""
    values: dict[str, Any] = {
        "database_url": db.engine.url.render_as_string(hide_password=False),
        "github_api_url": github.url,
        "github_app_id": github.app_id,
        "github_private_key": github.private_key,
        "webhook_secret": SECRET,
        "public_url": PUBLIC_URL,
    }
    return Settings(**(values | overrides))


StartApp = Callable[[Settings], Awaitable[TestClient]]  # type: ignore[type-arg]


def push_payload(sha: str = SHA, ref: str = "refs/heads/main", **extra: Any) -> dict[str, Any]:
    """``fixtures/webhooks/push.json`` for another commit or ref."""
    payload = webhook("push")
    payload.update({"ref": ref, "after": sha, **extra})
    if payload["head_commit"] is not None:
        payload["head_commit"]["id"] = sha
    return payload


MAINTAINER = "octocat"
CONTRIBUTOR = "mona"


def comment(body: str, *, number: int = 7, login: str = MAINTAINER, **changes: Any) -> dict[str, Any]:
    """``fixtures/webhooks/issue_comment-retry.json`` with another body, pull request or commenter."""
    payload = webhook("issue_comment-retry")
    payload["comment"]["body"] = body
    payload["issue"]["number"] = number
    for user in (payload["sender"], payload["comment"]["user"]):
        user["login"] = login
    return payload | changes


def runs_per_workflow(harness: Harness) -> Counter[str]:
    return Counter(run["name"].removeprefix("kerrigan / ") for run in harness.github.check_runs.values())


@pytest.fixture
async def pull(harness: Harness) -> Harness:
    """Pull request #7 from a branch of the repository: hil-smoke queued, org-class failed."""
    harness.github.add_pull(REPO, 7, head_sha=SHA, head_ref="uart-loopback")
    await harness.deliver("pull_request", webhook("pull_request-opened"))
    await harness.settle()
    assert runs_per_workflow(harness) == {"hil-smoke": 1, "org-class": 1}
    return harness
