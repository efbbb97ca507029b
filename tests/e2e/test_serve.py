"""``kerrigan serve`` as an operator runs it: its own process, a worker process, a GitHub stand-in process."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
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
from kerrigan.testing.github import generate_app_key, signed_headers

ROOT = Path(__file__).resolve().parents[2]
SECRET = "e2e-secret"
REPO = "octo/firmware"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


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
    private_key, public_key = generate_app_key()
    (tmp_path / "app.pub").write_text(public_key, encoding="utf-8")
    github = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kerrigan.testing.github",
        "--public-key",
        str(tmp_path / "app.pub"),
        "--repository",
        REPO,
        "--workflows",
        str(ROOT / "src/kerrigan/demo/workflows"),
        stdout=asyncio.subprocess.PIPE,
    )
    assert github.stdout is not None
    github_url = (await asyncio.wait_for(github.stdout.readline(), 30)).decode().strip()
    port = free_port()
    env = {
        **os.environ,
        "KERRIGAN_DATABASE_URL": url,
        "KERRIGAN_PORT": str(port),
        "KERRIGAN_GITHUB_API_URL": github_url,
        "KERRIGAN_GITHUB_APP_ID": "4242",
        "KERRIGAN_GITHUB_PRIVATE_KEY": private_key,
        "KERRIGAN_WEBHOOK_SECRET": SECRET,
        "KERRIGAN_WORKERS": "1",  # a separate worker process, as on PostgreSQL
    }
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kerrigan.cli",
        "serve",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(300):
                try:
                    async with http.get(f"{base}/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientConnectionError:
                    pass
                await asyncio.sleep(0.1)
        yield base, database
    finally:
        for process in (server, github):
            process.terminate()
            await process.wait()
        await database.close()


async def test_serve_answers_at_once_and_its_worker_process_posts_the_check_runs(
    served: tuple[str, Database],
) -> None:
    base, database = served
    sha = "b" * 40
    payload = {
        "ref": "refs/heads/main",
        "after": sha,
        "deleted": False,
        "installation": {"id": 1},
        "repository": {"full_name": REPO},
        "sender": {"login": "octocat", "type": "User"},
    }
    body = json.dumps(payload).encode()
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
        if len(sessions) == 5 and all(s.check_run_id for s in sessions):
            break
        await asyncio.sleep(0.1)
    assert sorted(s.workflow for s in sessions) == ["hil-smoke", "legacy", "org-class", "typo", "waiting"]
    assert all(s.check_run_id for s in sessions)
    failed = {s.workflow for s in sessions if s.conclusion is not None}
    assert failed == {"org-class", "typo"}
