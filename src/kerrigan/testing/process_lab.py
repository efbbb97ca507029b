"""A lab of real processes for the end-to-end tests: a SQLite database holding an inventory, the GitHub
stand-in and ``kerrigan serve`` (:mod:`kerrigan.testing.processes`), ``kerrigan runner`` agents started per
runner host as an operator starts them, and the few ways a test drives the lab and reads what it did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
from sqlalchemy import select

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.sessions import Session
from kerrigan.github.client import app_jwt
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.github import push_payload, signed_headers
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.processes import Served, serve_with_github

REPOSITORY: Final = "octo/firmware"
WEBHOOK_SECRET: Final = "e2e-secret"  # noqa: S105 -- the tests' own throwaway secret
STOP_GRACE_S: Final = 10.0


@dataclass(frozen=True)
class ProcessLab:
    """A running lab. ``folder`` holds its database, the repository's files, each agent's work dir
    (``folder/<host>``) and log (``folder/<host>.log``); ``env`` is what a ``kerrigan`` command needs to
    reach the lab's database (and whatever else the server was given)."""

    served: Served
    database: Database
    folder: Path
    tokens: Mapping[str, str]
    env: Mapping[str, str]

    @property
    def base(self) -> str:
        """The server's URL."""
        return self.served.base

    @property
    def github_url(self) -> str:
        """The stand-in's URL."""
        return self.served.github_url


async def store_lab(database: Database, inventory: str) -> dict[str, str]:
    """Migrate ``database`` and store the lab ``inventory`` (an inventory file's text) describes; a new token
    for each of its runner hosts."""
    await upgrade(database.engine)
    parsed = parse_inventory(inventory, "inventory.yml").inventory
    if parsed is None:
        raise ValueError("the lab's inventory does not parse")
    async with database.sessions() as session, session.begin():
        change = Change("e2e", database.clock())
        await apply_diff(session, parsed, diff_inventories(Inventory(), parsed), change)
        return {
            host.id: await create_runner_token(session, host.id, database.clock()) for host in parsed.hosts
        }


def write_files(folder: Path, files: Mapping[str, str]) -> Path:
    """``files`` (path in the folder: text) written below ``folder``; the folder."""
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    return folder


@contextlib.asynccontextmanager
async def process_lab(
    folder: Path,
    *,
    inventory: str,
    files: Mapping[str, str],
    environment: Mapping[str, str] | None = None,
    github_arguments: Sequence[str] = (),
) -> AsyncIterator[ProcessLab]:
    """The lab ``inventory`` describes, in a SQLite file of ``folder``, served by ``kerrigan serve`` (given
    ``environment`` too) with the stand-in holding ``files`` at every commit of :data:`REPOSITORY`
    (``github_arguments``: more of the stand-in's options). No agent runs: :func:`runner_agent` starts one."""
    url = f"sqlite+aiosqlite:///{folder / 'kerrigan.db'}"
    database = Database.connect(url)
    try:
        tokens = await store_lab(database, inventory)
        env = {"KERRIGAN_DATABASE_URL": url, **(environment or {})}
        async with serve_with_github(
            folder,
            database_url=url,
            repository=REPOSITORY,
            workflows=None,
            files=write_files(folder / "repository", files),
            webhook_secret=WEBHOOK_SECRET,
            environment=env,
            github_arguments=github_arguments,
        ) as served:
            yield ProcessLab(served, database, folder, tokens, env)
    finally:
        await database.close()


@contextlib.asynccontextmanager
async def runner_agent(
    lab: ProcessLab, host: str, *options: str, graceful: bool = False
) -> AsyncIterator[asyncio.subprocess.Process]:
    """``kerrigan runner`` for ``host`` (more of its ``options`` after the lab's), on a range of job users of
    its own (another agent on this machine may hold the default one). On the way out it is killed, leaving
    what it ran as a crashed agent leaves it; ``graceful``: sent SIGTERM first, so it stops its jobs, and
    killed only after :data:`STOP_GRACE_S`."""
    with (lab.folder / f"{host}.log").open("ab") as log:  # an agent started again adds to its log
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-m", "kerrigan.cli", "runner"),
            *("--server", lab.base, "--host-id", host, "--work-dir", str(lab.folder / host)),
            *("--free-space-floor-bytes", "0", "--systemd-scope", "never"),
            *("--job-users", str(spare_job_users())),
            *options,
            env={**os.environ, "KERRIGAN_RUNNER_TOKEN": lab.tokens[host]},
            stdout=log,
            stderr=log,
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                if graceful:
                    process.terminate()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(process.wait(), STOP_GRACE_S)
                if process.returncode is None:
                    process.kill()
                    await process.wait()


async def deliver(lab: ProcessLab, event: str, payload: Mapping[str, Any]) -> None:
    """A webhook delivery of ``event``, signed as GitHub signs it; the server must take it (202)."""
    body = json.dumps(payload).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{lab.base}/webhooks/github", data=body, headers=signed_headers(WEBHOOK_SECRET, event, body)
        ) as answer,
    ):
        if answer.status != 202:
            raise AssertionError(f"the {event} delivery was answered {answer.status}: {await answer.text()}")


async def push(lab: ProcessLab, sha: str) -> None:
    """A push of ``sha`` to the repository's main branch."""
    await deliver(lab, "push", push_payload(REPOSITORY, sha))


async def session_at(lab: ProcessLab, sha: str, timeout: float, done: bool = True) -> Session:
    """The session of the push of ``sha`` once it has a conclusion (``done=False``: once it is stored)."""
    deadline = time.monotonic() + timeout
    while True:
        async with lab.database.sessions() as db:
            found = await find_sessions(db, REPOSITORY, head_sha=sha)
        if found and (not done or found[0].conclusion is not None):
            return found[0]
        if time.monotonic() > deadline:
            raise AssertionError(f"no {'finished ' if done else ''}session at {sha[:7]} after {timeout} s")
        await asyncio.sleep(0.1)


async def jobs_of(lab: ProcessLab) -> list[JobRow]:
    """Every job of the lab, oldest first."""
    async with lab.database.sessions() as db:
        return list((await db.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def check_runs(lab: ProcessLab, sha: str) -> list[dict[str, Any]]:
    """The check runs the stand-in holds at ``sha``, asked through GitHub's API as the App."""
    served = lab.served
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    jwt = app_jwt(served.app_id, served.private_key, time.time())
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(
            f"{served.github_url}/app/installations/1/access_tokens",
            headers={"Authorization": f"Bearer {jwt}"},
        ) as minted:
            if minted.status != 201:
                raise AssertionError(f"no installation token: {minted.status} {await minted.text()}")
            token = (await minted.json())["token"]
        async with http.get(
            f"{served.github_url}/repos/{REPOSITORY}/commits/{sha}/check-runs",
            headers={"Authorization": f"Bearer {token}"},
        ) as listed:
            if listed.status != 200:
                raise AssertionError(f"no check runs: {listed.status} {await listed.text()}")
            found: list[dict[str, Any]] = (await listed.json())["check_runs"]
            return found


async def finished_check_run(lab: ProcessLab, sha: str, timeout: float = 90) -> dict[str, Any]:
    """The stand-in's check run at ``sha`` once it is completed, whole (every annotation), as its
    ``/_check-runs`` shows it."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while True:
            async with http.get(f"{lab.github_url}/_check-runs") as response:
                runs = [run for run in await response.json() if run["head_sha"] == sha]
            if runs and runs[0]["status"] == "completed":
                found: dict[str, Any] = runs[0]
                return found
            if time.monotonic() >= deadline:
                raise AssertionError(f"no completed check run after {timeout} s: {runs}")
            await asyncio.sleep(0.2)
