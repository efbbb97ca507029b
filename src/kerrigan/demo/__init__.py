"""``kerrigan demo``: the whole path from a push to check runs, on this machine, with nothing to set up.

It makes a SQLite database in a temporary folder, imports the example lab, starts a GitHub stand-in on
loopback holding a repository with example manifests, starts Kerrigan against both, sends a signed push
delivery, waits for the check runs and prints them as GitHub would show them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import aiohttp
from aiohttp import web

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.testing.github import GitHubStandIn, signed_headers
from kerrigan.testing.processes import free_port

REPOSITORY = "octo/firmware"
INSTALLATION = 1
SHA = "3f2a9c1e" * 5


def _data(name: str) -> str:
    return (resources.files("kerrigan.demo") / name).read_text(encoding="utf-8")


def _workflows() -> dict[str, str]:
    folder = resources.files("kerrigan.demo") / "workflows"
    return {
        f".kerrigan/workflows/{entry.name}": entry.read_text(encoding="utf-8")
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".yml")
    }


async def _prepare_database(url: str) -> Database:
    database = Database.connect(url)
    await upgrade(database.engine)
    result = parse_inventory(_data("lab.yml"), "lab.yml")
    assert result.inventory is not None  # the shipped lab is valid; tests keep it so
    async with database.sessions() as session, session.begin():
        await apply_diff(
            session,
            result.inventory,
            diff_inventories(Inventory(), result.inventory),
            Change("demo", database.clock()),
        )
    return database


def _push() -> dict[str, Any]:
    return {
        "ref": "refs/heads/main",
        "before": "0" * 40,
        "after": SHA,
        "deleted": False,
        "repository": {"id": 7, "name": "firmware", "full_name": REPOSITORY, "owner": {"login": "octo"}},
        "installation": {"id": INSTALLATION},
        "sender": {"login": "octocat", "type": "User"},
        "head_commit": {"id": SHA, "message": "Bring up the UART smoke test"},
    }


def show_check_run(run: dict[str, Any], out: TextIO) -> None:
    """One check run, roughly as GitHub's checks tab shows it."""
    mark = {"success": "✓", "failure": "✗"}.get(str(run.get("conclusion")), "●")
    state = run["status"] if run["status"] != "completed" else f"completed, {run['conclusion']}"
    output = run["output"]
    out.write(f"\n{mark} {run['name']}  ({state})\n  {output['title']}\n  Details: {run['details_url']}\n\n")
    for line in str(output["summary"]).splitlines():
        out.write(f"    {line}\n")
    for annotation in output.get("annotations", []):
        out.write(
            f"  {annotation['annotation_level']}: {annotation['path']}:{annotation['start_line']}: "
            f"{annotation['message']}\n"
        )
    if run.get("actions"):
        out.write(f"  [{'] ['.join(action['label'] for action in run['actions'])}]\n")


async def run_demo(out: TextIO = sys.stdout, *, keep_running: bool = False) -> int:
    """Run the demo; returns the exit status."""
    with tempfile.TemporaryDirectory(prefix="kerrigan-demo-") as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'kerrigan.db'}"
        database = await _prepare_database(url)
        await database.close()
        async with GitHubStandIn() as github:
            github.add_installation(INSTALLATION, "octo")
            github.add_repository(REPOSITORY, INSTALLATION)
            github.add_commit(REPOSITORY, SHA, _workflows())
            port = free_port()
            secret = secrets.token_hex(16)
            settings = Settings(
                database_url=url,
                host="127.0.0.1",
                port=port,
                public_url=f"http://127.0.0.1:{port}",
                github_api_url=github.url,
                github_app_id=github.app_id,
                github_private_key=github.private_key,
                webhook_secret=secret,
                admins=frozenset({"octocat"}),
            )
            runner = web.AppRunner(create_app(settings), access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", port).start()
            try:
                out.write(
                    f"Kerrigan is running at http://127.0.0.1:{port}, "
                    f"with a GitHub stand-in at {github.url}.\n"
                    f"Pushing {SHA[:12]} to {REPOSITORY}@main, which holds {len(_workflows())} workflows...\n"
                )
                body = json.dumps(_push()).encode()
                async with (
                    aiohttp.ClientSession() as http,
                    http.post(
                        f"http://127.0.0.1:{port}/webhooks/github",
                        data=body,
                        headers=signed_headers(secret, "push", body),
                    ) as response,
                ):
                    out.write(f"The webhook was answered {response.status} {response.reason}.\n")
                await _settle(url)
                runs = sorted(github.check_runs.values(), key=lambda run: str(run["name"]))
                out.write(f"GitHub now shows {len(runs)} check runs on {SHA[:12]}:\n")
                for run in runs:
                    show_check_run(run, out)
                if keep_running:
                    out.write(f"\nThe API is at http://127.0.0.1:{port}/api/v1/ (Ctrl-C to stop).\n")
                    await asyncio.Event().wait()
            finally:
                await runner.cleanup()
    return 0


async def _settle(url: str, timeout: float = 30.0) -> None:
    database = Database.connect(url)
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            async with database.sessions() as session:
                if await pending_count(session) == 0:
                    return
            await asyncio.sleep(0.05)
        raise TimeoutError("the delivery was not processed in time")
    finally:
        await database.close()
