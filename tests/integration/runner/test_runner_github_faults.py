"""The runner agent when GitHub misbehaves: nothing passing fails a job, and every job's token is revoked.

The server, the agents and the GitHub stand-in run on loopback in one event loop (as in
``test_runner_agent.py``); the stand-in's injected faults stand for GitHub's bad moments. Backoff steps are
kept short and injected ``Retry-After`` values small, so the tests wait on what happens, never on a clock.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

import kerrigan
from kerrigan.runner.github_requests import RetryBudget, revoke_token
from kerrigan.store.jobs import request_cancel
from tests.integration.github.conftest import OTHER_SHA, REPO, Harness
from tests.integration.runner.agents import (
    AgentFactory,
    big_claim_commit,
    completed,
    job_rows,
    smoke_commit,
    start_both,
)

QUICK: dict[str, Any] = {"github_backoff_s": 0.01}  # short backoff steps after GitHub's errors
SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
GITHUB_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "User-Agent": f"kerrigan-runner/{kerrigan.__version__}",
}


def tarball_tokens(harness: Harness) -> set[str]:
    """The tokens the agents fetched the commit with."""
    return {r.headers["Authorization"].split()[1] for r in harness.requests("GET", f"/tarball/{OTHER_SHA}")}


def revoked_tokens(harness: Harness) -> list[str]:
    """The tokens the agents asked GitHub to revoke, in order."""
    return [r.headers["Authorization"].split()[1] for r in harness.requests("DELETE", "/installation/token")]


async def all_revoked(harness: Harness, count: int) -> None:
    async def done() -> bool:
        return len([r for r in harness.requests("DELETE", "/installation/token") if r.status == 204]) >= count

    await harness.wait_until(done)


async def refused_by_github(harness: Harness, token: str) -> bool:
    """Whether GitHub refuses the token now (401), rather than redirecting to the tarball."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{harness.github.url}/repos/{REPO}/tarball/{OTHER_SHA}",
            headers={"Authorization": f"token {token}"},
            allow_redirects=False,
        ) as response,
    ):
        return response.status == 401


async def test_a_download_meeting_a_502_a_dropped_connection_and_a_secondary_limit_still_runs_the_job(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    faults = harness.github.faults
    injected = [
        faults.inject("GET", "/tarball/", status=502),
        faults.inject("GET", "/tarball/", drop=True),
        faults.inject("GET", "/tarball/", status=403, headers={"Retry-After": "1"}, message=SECONDARY),
    ]
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(big_claim_commit(1))  # one job: one download meets all three

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert [fault.hits for fault in injected] == [1, 1, 1]
    [row] = await job_rows(harness)
    assert (row.state, row.exit_status) == ("succeeded", 0)


async def test_a_download_github_answers_404_fails_the_job_at_once(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    harness.github.faults.inject("GET", "/tarball/", status=404, times=None)
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(big_claim_commit(1))

    await completed(harness, run)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    assert f"/tarball/{OTHER_SHA}: 404: " in final["output"]["summary"]
    assert len(harness.requests("GET", f"/tarball/{OTHER_SHA}")) == 1  # GitHub's final word: asked once
    # Failed before it started, the job's token is revoked all the same.
    await all_revoked(harness, 1)
    [token] = tarball_tokens(harness)
    assert revoked_tokens(harness) == [token]


async def test_every_jobs_token_is_revoked_when_it_ends_and_github_refuses_it_afterwards(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "success"
    await all_revoked(harness, 2)
    used = tarball_tokens(harness)
    assert len(used) == 2  # a token per acceptance
    assert sorted(revoked_tokens(harness)) == sorted(used)
    for token in used:
        assert await refused_by_github(harness, token)


async def test_every_request_to_github_names_the_api_version_and_the_runner(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(smoke_commit())

    await completed(harness, run)
    await all_revoked(harness, 2)
    sent = [
        *harness.requests("GET", f"/tarball/{OTHER_SHA}"),
        *(r for r in harness.github.requests if "codeload" in r.path),
        *harness.requests("DELETE", "/installation/token"),
    ]
    assert len(sent) == 6  # per job: the tarball, its redirected download, the revocation
    for request in sent:
        assert {name: request.headers.get(name) for name in GITHUB_HEADERS} == GITHUB_HEADERS


async def test_a_cancelled_jobs_token_is_revoked(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    await start_both(harness, agents, kill_grace_s=0.5, **QUICK)
    hang = "#!/bin/sh\necho started\nsleep 300\n"
    [run] = await harness.push_commit(smoke_commit(smoke=hang, boot=hang))

    async def both_running() -> bool:
        return [row.state for row in await job_rows(harness)] == ["running", "running"]

    await harness.wait_until(both_running, timeout=30)
    assert revoked_tokens(harness) == []  # running jobs keep theirs
    [session] = await harness.sessions()
    async with harness.database.sessions() as db, db.begin():
        await request_cancel(db, session.id, harness.database.clock())

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "cancelled"
    await all_revoked(harness, 2)
    assert sorted(revoked_tokens(harness)) == sorted(tarball_tokens(harness))


async def test_a_revocation_meeting_a_server_error_is_sent_again(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    fault = harness.github.faults.inject("DELETE", "/installation/token$", status=502)
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(big_claim_commit(1))

    await completed(harness, run)
    await all_revoked(harness, 1)
    assert fault.hits == 1
    [token] = tarball_tokens(harness)
    assert revoked_tokens(harness) == [token, token]
    assert await refused_by_github(harness, token)


async def test_a_slow_revocation_does_not_hold_up_the_jobs_end(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    # GitHub takes its time over each revocation: the job's end reaches the server (and the check run)
    # while the revocation still waits for its answer.
    harness.github.faults.inject("DELETE", "/installation/token$", delay_s=5, times=None)
    await start_both(harness, agents, **QUICK)
    [run] = await harness.push_commit(big_claim_commit(1))

    await completed(harness, run)
    assert harness.github.check_runs[run["id"]]["conclusion"] == "success"
    answered = [r for r in harness.requests("DELETE", "/installation/token") if r.status == 204]
    assert answered == []
    await all_revoked(harness, 1)


@pytest.mark.parametrize(
    ("status", "done"),
    [pytest.param(401, True, id="already-gone"), pytest.param(422, False, id="final-answer")],
)
async def test_revoking_a_token_github_no_longer_knows_is_done_and_a_final_answer_is_not_sent_again(
    harness: Harness, status: int, done: bool
) -> None:
    harness.github.faults.inject("DELETE", "/installation/token$", status=status)
    async with aiohttp.ClientSession() as http:
        revoked = await revoke_token(http, harness.github.url, "ghs_whatever", RetryBudget(5, base_s=0.01))
    assert revoked is done
    assert len(harness.requests("DELETE", "/installation/token")) == 1
