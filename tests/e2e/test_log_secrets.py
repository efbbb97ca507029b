"""No secret ever in a log line: a debug run of ``kerrigan serve`` (with its worker process) and a runner
agent, every line they wrote scanned.

The server runs with every secret it can hold set (the App's private key, the webhook secret, the OAuth
client secret, the session secret, the metrics token) and ``KERRIGAN_LOG_LEVEL=debug``, once writing JSON and
once text. The test drives it through everything that handles a credential: signed deliveries (a push that
runs a job on the runner, a tag push that starts nothing, an event no route takes), one with a wrong
signature, a sign-in through the GitHub stand-in's OAuth pages, an API call with a token from
``kerrigan tokens create``, ``/metrics`` with and without its token, and the runner agent, with its token,
running the job. The stand-in runs in the test's process, so that what it minted and was shown (installation
tokens, the App's JWTs, the OAuth code and user token) can be read off it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import aiohttp
import pytest
from yarl import URL

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.github import GitHubStandIn, generate_app_key, push_payload, signed_headers
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.processes import APP_ID, free_port, wait_ready

REPO = "octo/firmware"
LOGIN = "octocat"
STOP_GRACE_S = 10.0  # SIGTERM to SIGKILL
TEXT_EVENT = re.compile(
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z \[(debug|info|warning|error|critical) *\] .* \[[\w.]+\]"
)

INVENTORY = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""

MANIFEST = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 1
  labels: {sdk: "2.2.0"}
tasks:
  - id: smoke
    run: ./scripts/smoke.sh
    vcpus: 1
"""

SMOKE = """#!/bin/sh
echo "smoke on $KERRIGAN_DEVICE_ID at $GITHUB_SHA"
"""


@dataclass
class DebugRun:
    """What the processes of one run wrote, and every secret they held or were shown."""

    log_format: str
    server_lines: list[str]  # kerrigan serve and its worker process: standard error and output
    runner_lines: list[str]  # the runner agent: standard error and output
    cli_lines: list[str]  # kerrigan tokens create: standard error
    secrets: dict[str, str] = field(default_factory=dict)  # what it is -> its value
    deliveries: dict[str, str] = field(default_factory=dict)  # which delivery -> its id

    @property
    def lines(self) -> list[str]:
        return [*self.server_lines, *self.runner_lines, *self.cli_lines]

    def events(self, lines: list[str] | None = None) -> list[dict[str, Any]]:
        """The lines (the server's and the runner's), each parsed as the JSON it must be."""
        chosen = [*self.server_lines, *self.runner_lines] if lines is None else lines
        return [json.loads(line) for line in chosen]

    def events_of(self, delivery: str) -> list[dict[str, Any]]:
        """The JSON events whose ``delivery_id`` field names the delivery."""
        return [event for event in self.events() if event.get("delivery_id") == self.deliveries[delivery]]


def _secret(kind: str) -> str:
    return f"{kind}-{secrets.token_hex(20)}"


# -- the lab ---------------------------------------------------------------------------------------------


async def _lab_database(folder: Path) -> tuple[str, str]:
    """A migrated SQLite database holding the lab; its URL and the runner host's token."""
    url = f"sqlite+aiosqlite:///{folder / 'kerrigan.db'}"
    database = Database.connect(url)
    try:
        await upgrade(database.engine)
        inventory = parse_inventory(INVENTORY, "inventory.yml").inventory
        assert inventory is not None
        async with database.sessions() as session, session.begin():
            await apply_diff(
                session, inventory, diff_inventories(Inventory(), inventory), Change("e2e", database.clock())
            )
            token = await create_runner_token(session, "rig-01", database.clock())
    finally:
        await database.close()
    return url, token


def _stand_in(public_key: str, client_secret: str) -> GitHubStandIn:
    github = GitHubStandIn(APP_ID, public_key=public_key)
    github.oauth_client_secret = client_secret
    github.add_installation(1, REPO.split("/", maxsplit=1)[0])
    github.add_repository(REPO, 1)
    github.add_commit(REPO, "*", {".kerrigan/workflows/bench.yml": MANIFEST, "scripts/smoke.sh": SMOKE})
    return github


def _credentials_seen(github: GitHubStandIn) -> dict[str, str]:
    """Every credential the stand-in minted or was shown: installation tokens (a revoked one lives on in
    ``token_scopes`` and in the recorded requests), user tokens, and the App's JWTs."""
    tokens = {*github.tokens, *github.token_scopes, *github.user_tokens}
    for request in github.requests:
        scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() in ("token", "bearer") and credential.strip():
            tokens.add(credential.strip())
    return {f"credential {token[:4]}… the stand-in saw": token for token in tokens}


# -- the processes ---------------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM, and SIGKILL after :data:`STOP_GRACE_S`; a server's worker processes are stopped before it is
    killed, so that none outlives the test (a killed server cannot stop them)."""
    if process.returncode is not None:
        return
    workers = _children(process.pid)
    process.terminate()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), STOP_GRACE_S)
        return
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(_running(pid) for pid in workers) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    process.kill()
    await process.wait()


@contextlib.asynccontextmanager
async def _process(*arguments: str, env: dict[str, str], cwd: Path, log: IO[bytes]) -> AsyncIterator[Any]:
    """``python -m kerrigan.cli ARGUMENTS``, writing both its streams to ``log``; stopped on the way out."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", *arguments, env=env, cwd=cwd, stdout=log, stderr=log
    )
    try:
        yield process
    finally:
        await _stop(process)


async def _api_token(env: dict[str, str], folder: Path, log: IO[bytes]) -> str:
    """``kerrigan tokens create``'s token."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", "tokens", "create", "--login", LOGIN,
        env=env, cwd=folder, stdout=asyncio.subprocess.PIPE, stderr=log,
    )  # fmt: skip
    out, _ = await process.communicate()
    assert process.returncode == 0
    return out.decode().strip()


async def _conclusion(url: str, sha: str, timeout: float) -> str:
    """The conclusion of the session at ``sha``, once it has one."""
    database = Database.connect(url)
    deadline = time.monotonic() + timeout
    try:
        while True:
            async with database.sessions() as db:
                found = await find_sessions(db, REPO, head_sha=sha)
            if found and found[0].conclusion is not None:
                return found[0].conclusion.value
            assert time.monotonic() < deadline, f"no finished session at {sha[:7]} after {timeout} s"
            await asyncio.sleep(0.1)
    finally:
        await database.close()


# -- what the test does to the server --------------------------------------------------------------------


async def _deliver(
    http: aiohttp.ClientSession, base: str, secret: str, event: str, payload: dict[str, Any]
) -> tuple[str, int]:
    """Post a delivery signed with ``secret``: its id and the answer's status."""
    body = json.dumps(payload).encode()
    delivery_id = str(uuid.uuid4())
    headers = signed_headers(secret, event, body, delivery_id)
    async with http.post(f"{base}/webhooks/github", data=body, headers=headers) as response:
        return delivery_id, response.status


async def _deliveries(http: aiohttp.ClientSession, base: str, secret: str, sha: str) -> dict[str, str]:
    """A push that makes a job, a tag push and a star (each logged as starting nothing), and a push whose
    signature is wrong; their ids."""
    push_id, status = await _deliver(http, base, secret, "push", push_payload(REPO, sha))
    assert status == 202
    tag = push_payload(REPO, sha, ref="refs/tags/v1.0")
    tag_id, status = await _deliver(http, base, secret, "push", tag)
    assert status == 202
    star = {"action": "created", "repository": {"full_name": REPO}, "installation": {"id": 1}}
    star_id, status = await _deliver(http, base, secret, "star", star)
    assert status == 202
    forged_id, status = await _deliver(http, base, _secret("wrong"), "push", push_payload(REPO, sha))
    assert status == 401
    return {"push": push_id, "tag": tag_id, "star": star_id, "forged": forged_id}


async def _sign_in(http: aiohttp.ClientSession, base: str, github: GitHubStandIn) -> str:
    """/login/github → the stand-in's authorize form → /auth/callback, signed in: the OAuth code."""
    async with http.get(f"{base}/login/github?next=/pools", allow_redirects=False) as response:
        assert response.status == 302
        authorize = URL(response.headers["Location"])
    fields = {name: authorize.query[name] for name in ("client_id", "redirect_uri", "state")}
    async with http.post(
        f"{github.url}/login/oauth/authorize", data={**fields, "login": LOGIN}, allow_redirects=False
    ) as response:
        assert response.status == 302
        callback = response.headers["Location"]
    async with http.get(callback, allow_redirects=True) as response:
        assert response.status == 200, await response.text()
        assert LOGIN in await response.text()  # the pool page, naming who signed in
    return str(URL(callback).query["code"])


async def _calls(http: aiohttp.ClientSession, base: str, api_token: str, metrics_token: str) -> None:
    """The API with a token and with a wrong one; /metrics with its token and without."""
    for token, status in ((api_token, 200), ("kgn_" + "x" * 32, 401)):
        async with http.get(f"{base}/api/v1/pools", headers={"Authorization": f"Bearer {token}"}) as answer:
            assert answer.status == status
    async with http.get(f"{base}/metrics", headers={"Authorization": f"Bearer {metrics_token}"}) as answer:
        assert answer.status == 200
    async with http.get(f"{base}/metrics") as answer:
        assert answer.status == 401


async def _run(folder: Path, log_format: str) -> DebugRun:
    """Start the stand-in, the server and the runner, drive them, stop them: what they wrote."""
    url, runner_token = await _lab_database(folder)
    private_key, public_key = generate_app_key()
    held = {
        "webhook secret": _secret("webhook"),
        "client secret": _secret("client"),
        "session secret": _secret("session"),
        "metrics token": _secret("metrics"),
        "runner token": runner_token,
    }
    for number, line in enumerate(private_key.splitlines()):
        if line and not line.startswith("-----"):
            held[f"private key line {number}"] = line
    github = _stand_in(public_key, held["client secret"])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    logging_env = {"KERRIGAN_LOG_LEVEL": "debug", "KERRIGAN_LOG_FORMAT": log_format}
    env = {
        **os.environ,
        **logging_env,
        "KERRIGAN_DATABASE_URL": url,
        "KERRIGAN_PORT": str(port),
        "KERRIGAN_PUBLIC_URL": base,
        "KERRIGAN_GITHUB_APP_ID": APP_ID,
        "KERRIGAN_GITHUB_PRIVATE_KEY": private_key,
        "KERRIGAN_WEBHOOK_SECRET": held["webhook secret"],
        "KERRIGAN_GITHUB_CLIENT_ID": github.oauth_client_id,
        "KERRIGAN_GITHUB_CLIENT_SECRET": held["client secret"],
        "KERRIGAN_SESSION_SECRET": held["session secret"],
        "KERRIGAN_METRICS_TOKEN": held["metrics token"],
        "KERRIGAN_WORKERS": "1",  # deliveries processed in a worker process, whose lines are scanned too
    }
    runner_env = {**os.environ, **logging_env, "KERRIGAN_RUNNER_TOKEN": runner_token}
    runner_args = [
        *("--server", base, "--host-id", "rig-01", "--work-dir", str(folder / "rig-01")),
        *("--free-space-floor-bytes", "0", "--systemd-scope", "never"),
        *("--job-users", str(spare_job_users())),  # its own: another agent on this machine may hold others
    ]
    sha = secrets.token_hex(20)
    paths = {name: folder / f"{name}.log" for name in ("server", "runner", "cli")}
    with contextlib.ExitStack() as files:
        logs = {name: files.enter_context(path.open("wb")) for name, path in paths.items()}
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(github)
            env |= {"KERRIGAN_GITHUB_API_URL": github.url, "KERRIGAN_GITHUB_URL": github.url}
            await stack.enter_async_context(_process("serve", env=env, cwd=folder, log=logs["server"]))
            await wait_ready(base)
            runner = _process("runner", *runner_args, env=runner_env, cwd=folder, log=logs["runner"])
            await stack.enter_async_context(runner)
            http = await stack.enter_async_context(
                aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
            )
            deliveries = await _deliveries(http, base, held["webhook secret"], sha)
            held["OAuth code"] = await _sign_in(http, base, github)
            [cookie] = [cookie for cookie in http.cookie_jar if cookie.key == "kerrigan_session"]
            held["session cookie"] = cookie.value
            held["API token"] = await _api_token(env, folder, logs["cli"])
            await _calls(http, base, held["API token"], held["metrics token"])
            assert await _conclusion(url, sha, timeout=60) == "success"  # the runner ran the job
    minted = _credentials_seen(github)
    assert [token for token in minted.values() if token.startswith("ghs_")], "no installation token"
    assert [token for token in minted.values() if token.startswith("gho_")], "no OAuth user token"

    def lines(name: str) -> list[str]:
        return [line for line in paths[name].read_text("utf-8", "replace").splitlines() if line.strip()]

    return DebugRun(
        log_format,
        lines("server"),
        lines("runner"),
        lines("cli"),
        secrets={**held, **minted},
        deliveries=deliveries,
    )


@pytest.fixture(scope="module")
def json_run(tmp_path_factory: pytest.TempPathFactory) -> DebugRun:
    return asyncio.run(_run(tmp_path_factory.mktemp("json-run"), "json"))


@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> DebugRun:
    return asyncio.run(_run(tmp_path_factory.mktemp("text-run"), "text"))


# -- the scan ----------------------------------------------------------------------------------------


def _leaks(run: DebugRun) -> Iterator[str]:
    for line in run.lines:
        for what, value in run.secrets.items():
            if value in line:
                yield f"the {what} in: {line[:400]}"


@pytest.mark.parametrize("run_name", ["json_run", "text_run"])
def test_no_secret_is_in_any_line_of_a_debug_run(request: pytest.FixtureRequest, run_name: str) -> None:
    run: DebugRun = request.getfixturevalue(run_name)
    # At debug the server says a lot (every request, each step of the push), its debug lines among them:
    # the scan has something to read.
    assert len(run.server_lines) > 25
    assert any("debug" in line for line in run.server_lines)
    assert [line for line in run.runner_lines if "job 1" in line]
    # The settings' four, the runner's and the API token, the key's lines, the code, the cookie, what the
    # stand-in minted (installation and user tokens) and was shown (the App's JWTs).
    assert len(run.secrets) > 30
    leaks = list(_leaks(run))
    assert not leaks, "\n".join(leaks)


def test_every_line_of_the_json_run_is_one_json_event(json_run: DebugRun) -> None:
    events = json_run.events()
    for event in events:
        assert isinstance(event, dict)
        assert {"event", "level", "logger", "timestamp"} <= event.keys(), event
    assert {event["level"] for event in events} >= {"debug", "info"}
    assert {event["logger"] for event in json_run.events(json_run.runner_lines)} >= {"kerrigan.runner.agent"}


def test_every_line_of_the_text_run_is_one_event_with_its_time_level_and_logger(text_run: DebugRun) -> None:
    for line in [*text_run.server_lines, *text_run.runner_lines]:
        assert TEXT_EVENT.match(line), line


def test_a_deliverys_lines_carry_its_delivery_id_event_and_repository(
    json_run: DebugRun, text_run: DebugRun
) -> None:
    for delivery, event_name, words in (("tag", "push", "starts nothing"), ("star", "star", "ignored")):
        [line] = [event for event in json_run.events_of(delivery) if words in event["event"]]
        assert json_run.deliveries[delivery] in line["event"]
        assert (line["github_event"], line["repository"]) == (event_name, REPO)
        assert line["logger"].startswith("kerrigan.github")
        named = f"delivery_id={text_run.deliveries[delivery]}"
        assert [text_line for text_line in text_run.server_lines if named in text_line]
    # The delivery with a wrong signature was turned away at the door: nothing was done under its id.
    assert not json_run.events_of("forged")


def test_the_runner_protocols_lines_carry_the_runner_host_and_job(json_run: DebugRun) -> None:
    finished = [event for event in json_run.events() if event["event"].endswith("/jobs/1/finish 200")]
    assert [(event["runner_host"], event["job_id"]) for event in finished] == [("rig-01", "1")]


def test_the_push_that_made_the_job_has_a_line_with_its_delivery_id(json_run: DebugRun) -> None:
    assert json_run.events_of("push")


def test_the_agents_lines_about_a_job_carry_its_job_id(json_run: DebugRun) -> None:
    about_the_job = [e for e in json_run.events(json_run.runner_lines) if e["event"].startswith("job 1:")]
    assert len(about_the_job) >= 2  # started, ended
    assert all(str(event.get("job_id")) == "1" for event in about_the_job)
