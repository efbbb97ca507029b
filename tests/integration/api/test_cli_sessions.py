"""``kerrigan sessions list|show|cancel`` as a person runs them: the real command in a subprocess, against the
real application served on loopback (and, for cancel's answers, an HTTP server speaking the documented
contract of ``POST /api/v1/sessions/{id}/cancel``)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from aiohttp import web

from kerrigan.core.lifecycle import SessionState
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.processes import free_port
from tests.integration.api.conftest import READER, Api
from tests.integration.api.history_rows import Run, add_session
from tests.integration.test_cli_explain import ROOT


async def kerrigan(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The command in a subprocess, in a thread, so the server on this loop keeps answering it."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KERRIGAN_")}
    environment.update(env or {})
    return await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "kerrigan.cli", "sessions", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
        env=environment,
    )


def _lab(api: Api) -> dict[str, str]:
    url = str(api.client.server.make_url("/")).rstrip("/")
    return {"KERRIGAN_URL": url, "KERRIGAN_TOKEN": api.tokens[READER]}


async def _history(api: Api, clock: FakeClock) -> tuple[str, str]:
    async with api.db.sessions() as session, session.begin():
        old, _ = await add_session(session, clock() - timedelta(hours=2), branch="main", sha="a" * 40)
        new, _ = await add_session(
            session,
            clock() - timedelta(hours=1),
            branch="feature/uart",
            conclusion="failure",
            sha="b" * 40,
            runs=(
                Run(state="retried", exit_status=75, failure_class="infrastructure"),
                Run(device="dev-a2", host="lab-a-02", attempt=2, state="failed", exit_status=1),
            ),
        )
    return old, new


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_list_prints_newest_first_and_filters(api: Api, clock: FakeClock) -> None:
    old, new = await _history(api, clock)
    done = await kerrigan("list", env=_lab(api))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "CREATED",
        "REPOSITORY",
        "BRANCH",
        "WORKFLOW",
        "COMMIT",
        "STATE",
        "DEVICES",
    ]
    assert [line.split()[0] for line in lines[1:]] == [new, old]
    assert "completed (failure)" in lines[1]
    assert "dev-a1,dev-a2" in lines[1]
    assert "bbbbbbb" in lines[1]
    done = await kerrigan("list", "--branch", "main", "--device", "dev-a1", "--json", env=_lab(api))
    assert done.returncode == 0, done.stderr
    assert [item["id"] for item in json.loads(done.stdout)["items"]] == [old]
    paged = await kerrigan("list", "--limit", "1", env=_lab(api))
    assert len(paged.stdout.splitlines()) == 2
    assert "more: add --cursor " in paged.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_show_prints_the_session_with_each_attempt(api: Api, clock: FakeClock) -> None:
    _, new = await _history(api, clock)
    lab = _lab(api)
    done = await kerrigan("show", new, "--url", lab["KERRIGAN_URL"], "--token", lab["KERRIGAN_TOKEN"])
    assert done.returncode == 0, done.stderr
    assert f"session:     {new}" in done.stdout
    assert "state:       completed (failure)" in done.stdout
    jobs = done.stdout.split("\n\n", 1)[1].splitlines()
    assert jobs[0].split()[:4] == ["JOB", "TASK", "ATTEMPT", "STATE"]
    assert "retried" in jobs[1]
    assert "infrastructure" in jobs[1]
    assert "75" in jobs[1]
    assert "(retry of" in jobs[2]
    assert "dev-a2" in jobs[2]
    as_json = await kerrigan("show", new, "--json", env=lab)
    assert [job["attempt"] for job in json.loads(as_json.stdout)["jobs"]] == [1, 2]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_refusals_are_one_line_and_exit_1(api: Api, clock: FakeClock) -> None:
    lab = _lab(api)
    missing = await kerrigan("show", "no-such-session", env=lab)
    assert missing.returncode == 1
    assert missing.stderr == "kerrigan sessions: no session 'no-such-session' (HTTP 404)\n"
    bad = await kerrigan("list", "--since", "yesterday", env=lab)
    assert bad.returncode == 1
    assert "since" in bad.stderr
    assert "(HTTP 400)" in bad.stderr
    unsigned = await kerrigan("list", env={"KERRIGAN_URL": lab["KERRIGAN_URL"]})
    assert unsigned.returncode == 1
    assert "(HTTP 401)" in unsigned.stderr
    for done in (missing, bad, unsigned):
        assert "Traceback" not in done.stderr


async def test_a_lab_that_cannot_be_reached_is_one_line_and_exit_2() -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    for args in (("list",), ("show", "x"), ("cancel", "x")):
        done = await kerrigan(*args, "--url", nobody)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"kerrigan sessions: cannot reach {nobody}: ")
        assert len(done.stderr.splitlines()) == 1
    no_url = await kerrigan("list")
    assert no_url.returncode == 2
    assert "KERRIGAN_URL" in no_url.stderr


@pytest.fixture
async def cancel_contract(aiohttp_server: Callable[..., Any]) -> str:
    """A server answering cancel as the OpenAPI document says: ``running`` is cancelled, ``ended`` is a 409
    ``session_ended``; a GET of a session answers its state."""
    sessions = {"running": ("in_progress", None), "ended": ("completed", "success")}

    async def cancel(request: web.Request) -> web.Response:
        session_id = request.match_info["id"]
        if request.headers.get("Authorization") != "Bearer writer-token":
            return web.json_response(
                {"error": {"code": "forbidden", "message": "rita may not cancel"}}, status=403
            )
        if session_id == "ended":
            message = "session ended is completed (success): nothing to cancel"
            return web.json_response({"error": {"code": "session_ended", "message": message}}, status=409)
        sessions[session_id] = ("completed", "cancelled")
        return web.json_response(
            {"session": session_id, "state": "completed", "conclusion": "cancelled", "changed": True}
        )

    async def read(request: web.Request) -> web.Response:
        state, conclusion = sessions[request.match_info["id"]]
        return web.json_response({"id": request.match_info["id"], "state": state, "conclusion": conclusion})

    app = web.Application()
    app.router.add_post("/api/v1/sessions/{id}/cancel", cancel)
    app.router.add_get("/api/v1/sessions/{id}", read)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def test_cancel_prints_the_state_and_an_ended_session_exits_1(cancel_contract: str) -> None:
    lab = {"KERRIGAN_URL": cancel_contract, "KERRIGAN_TOKEN": "writer-token"}
    done = await kerrigan("cancel", "running", env=lab)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "session running: completed (cancelled)\n"
    ended = await kerrigan("cancel", "ended", env=lab)
    assert ended.returncode == 1
    assert ended.stdout == "session ended has ended: completed (success)\n"
    assert ended.stderr == "kerrigan sessions: session ended is completed (success): nothing to cancel\n"
    refused = await kerrigan("cancel", "running", env={**lab, "KERRIGAN_TOKEN": "reader-token"})
    assert refused.returncode == 1
    assert refused.stderr == "kerrigan sessions: rita may not cancel (HTTP 403)\n"


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_cancel_against_the_live_app(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        ended, _ = await add_session(session, clock())
        queued, _ = await add_session(
            session,
            clock(),
            state=SessionState.QUEUED,
            conclusion=None,
            runs=(Run(device=None, state="queued"),),
        )
    lab = {**_lab(api), "KERRIGAN_TOKEN": api.tokens["alice"]}
    done = await kerrigan("cancel", ended, env=lab)
    assert done.returncode == 1, done.stderr
    assert done.stdout == f"session {ended} has ended: completed (success)\n"
    assert done.stderr == f"kerrigan sessions: session {ended} has ended: completed success\n"
    cancelled = await kerrigan("cancel", queued, env=lab)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"session {queued}: completed (cancelled)\n"


async def test_the_short_id_kerrigan_prints_is_taken_back(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        queued, _ = await add_session(
            session,
            clock(),
            state=SessionState.QUEUED,
            conclusion=None,
            runs=(Run(device=None, state="queued"),),
            session_id="eba46059-0000-4000-8000-000000000001",
        )
    lab = {**_lab(api), "KERRIGAN_TOKEN": api.tokens["alice"]}
    shown = await kerrigan("show", "eba46059", env=lab)
    assert shown.returncode == 0, shown.stderr
    assert queued in shown.stdout
    cancelled = await kerrigan("cancel", "EBA46059", env=lab)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout == f"session {queued}: completed (cancelled)\n"
