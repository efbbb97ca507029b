"""``kerrigan serve`` as an operator runs it: its own process, a worker process, a GitHub stand-in process."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.github import push_payload, signed_headers
from kerrigan.testing.processes import serve_with_github

ROOT = Path(__file__).resolve().parents[2]
SECRET = "e2e-secret"
REPO = "octo/firmware"


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[str, Database]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'kerrigan.db'}"
    database = Database.connect(url)
    await upgrade(database.engine)
    lab = parse_inventory(
        (ROOT / "fixtures/inventory/lab.yml").read_text(encoding="utf-8"), "lab.yml"
    ).inventory
    assert lab is not None
    async with database.sessions() as session, session.begin():
        await apply_diff(session, lab, diff_inventories(Inventory(), lab), Change("e2e", database.clock()))
    try:
        async with serve_with_github(
            tmp_path,
            database_url=url,
            repository=REPO,
            workflows=ROOT / "src/kerrigan/demo/workflows",
            webhook_secret=SECRET,
            environment={"KERRIGAN_WORKERS": "1"},  # a worker process, as on PostgreSQL
        ) as server:
            yield server.base, database
    finally:
        await database.close()


async def test_serve_answers_at_once_and_its_worker_process_posts_the_check_runs(
    served: tuple[str, Database],
) -> None:
    base, database = served
    sha = "b" * 40
    body = json.dumps(push_payload(REPO, sha)).encode()
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as health:
            assert health.status == 200
        async with http.post(
            f"{base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body)
        ) as response:
            assert response.status == 202
    for _ in range(300):
        async with database.sessions() as session:
            sessions = await find_sessions(session, REPO, head_sha=sha)
        if len(sessions) == 6 and all(s.check_run_id for s in sessions):
            break
        await asyncio.sleep(0.1)
    workflows = ["hil-pipeline", "hil-smoke", "legacy", "org-class", "typo", "waiting"]
    assert sorted(s.workflow for s in sessions) == workflows
    assert all(s.check_run_id for s in sessions)
    failed = {s.workflow for s in sessions if s.conclusion is not None}
    # hil-pipeline names the secret LAB_VPN_KEY, which this lab (unlike the demo's) never set: it fails at
    # once, on that line, as org-class (no device can match) and typo (a manifest error) do.
    assert failed == {"hil-pipeline", "org-class", "typo"}
