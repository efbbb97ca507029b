"""Talking to GitHub: installation tokens, retries that never duplicate, budgets, reading manifests at a
commit, and the headers of every request (the sign-in flow's too)."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest
from gidgethub import BadRequest, GitHubBroken

from kerrigan.github.budget import Budget
from kerrigan.github.checks import CheckRunBody
from kerrigan.github.client import (
    GitHubClient,
    GitHubUnreachable,
    acting_for,
    answer_of,
    paid_for,
)
from kerrigan.github.repository import COMMENT_LIMIT
from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeTime
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import (
    INSTALLATION,
    OTHER_SHA,
    REPO,
    SMOKE_SHA,
    Harness,
    StartApp,
    check_run_name,
    manifest_files,
    push_payload,
    settings_for,
)
from tests.integration.github.direct_repository import Direct, direct_to

TOKENS = "/access_tokens"
SECONDARY = {
    "Retry-After": "0"
}  # the stand-in's injected 403 says nothing else; Retry-After makes it a limit


@pytest.mark.parametrize("lifetime", [timedelta(hours=1), timedelta(minutes=6)], ids=["1h", "6min"])
async def test_installation_token_is_reused_while_more_than_five_minutes_remain(
    bare_harness: Harness, lifetime: timedelta
) -> None:
    bare_harness.github.token_lifetime = lifetime
    await bare_harness.deliver("push", push_payload(SMOKE_SHA))
    await bare_harness.deliver("push", push_payload(SMOKE_SHA, ref="refs/heads/release/2.2"))
    await bare_harness.settle()
    assert len(bare_harness.requests("POST", TOKENS)) == 1
    assert len(bare_harness.github.check_runs) == 2  # both pushes reached GitHub


async def test_installation_token_with_less_than_five_minutes_left_is_replaced(bare_harness: Harness) -> None:
    bare_harness.github.token_lifetime = timedelta(minutes=4)
    await bare_harness.deliver("push", push_payload(SMOKE_SHA))
    await bare_harness.settle()
    await bare_harness.deliver("push", push_payload(SMOKE_SHA, ref="refs/heads/release/2.2"))
    await bare_harness.settle()
    tokens = bare_harness.requests("POST", TOKENS)
    assert len(tokens) > 1
    assert all(request.status == 201 for request in tokens)


@pytest.fixture
async def direct(github: GitHubStandIn) -> AsyncIterator[Direct]:
    async with direct_to(github) as found:
        yield found


def queued(name: str = "kerrigan / hil-smoke") -> CheckRunBody:
    output = {"title": "Queued", "summary": "waiting for a device"}
    return CheckRunBody({"name": name, "head_sha": SMOKE_SHA, "status": "queued", "output": output})


def completed() -> CheckRunBody:
    output = {"title": "Passed", "summary": "all tasks passed"}
    return CheckRunBody({"status": "completed", "conclusion": "success", "output": output})


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        pytest.param(502, {"Retry-After": "0"}, id="502"),
        pytest.param(503, {}, id="503-backoff"),
        pytest.param(429, {"Retry-After": "0"}, id="429"),
        pytest.param(403, SECONDARY, id="403-secondary-rate-limit"),
    ],
)
async def test_reads_are_retried_after_server_errors_and_limits(
    direct: Direct, status: int, headers: dict[str, str]
) -> None:
    direct.github.add_pull(REPO, 7, head_sha=SMOKE_SHA)
    direct.github.fail_next("GET", r"/pulls/7$", status, headers=headers)
    pull = await direct.repo.pull_request(7)
    assert pull["number"] == 7
    assert [r.status for r in direct.requests("GET", "/pulls/7")] == [status, 200]


@pytest.mark.parametrize("status", [502, 503])
async def test_a_check_run_update_is_retried_after_a_server_error(direct: Direct, status: int) -> None:
    check_run_id = await direct.repo.create_check_run(queued())
    direct.github.fail_next("PATCH", r"/check-runs/\d+$", status)
    await direct.repo.update_check_run(check_run_id, completed())
    assert [r.status for r in direct.requests("PATCH", f"/check-runs/{check_run_id}")] == [status, 200]
    assert direct.github.check_runs[check_run_id]["conclusion"] == "success"


async def test_a_token_mint_is_retried_after_a_server_error(direct: Direct) -> None:
    direct.github.fail_next("POST", TOKENS + "$", 502)
    await direct.repo.create_check_run(queued())
    assert [r.status for r in direct.requests("POST", TOKENS)] == [502, 201]


@pytest.mark.parametrize(
    ("status", "headers"),
    [pytest.param(429, {"Retry-After": "0"}, id="429"), pytest.param(403, SECONDARY, id="403-secondary")],
)
async def test_a_create_refused_by_a_rate_limit_is_sent_again(
    direct: Direct, status: int, headers: dict[str, str]
) -> None:
    direct.github.fail_next("POST", r"/check-runs$", status, headers=headers)
    await direct.repo.create_check_run(queued())
    assert [r.status for r in direct.requests("POST", "/check-runs")] == [status, 201]
    assert len(direct.github.check_runs) == 1


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_a_create_whose_outcome_is_unknown_is_raised_not_sent_again(
    direct: Direct, status: int
) -> None:
    direct.github.fail_next("POST", r"/check-runs$", status, headers={"Retry-After": "0"})
    with pytest.raises(GitHubBroken) as raised:
        await direct.repo.create_check_run(queued())
    answer = answer_of(raised.value)
    assert answer is not None
    assert (answer.status, answer.outcome_unknown) == (status, True)
    assert answer.message == f"injected {status}"
    assert [r.status for r in direct.requests("POST", "/check-runs")] == [status]


@pytest.mark.parametrize(
    ("call", "path"),
    [
        pytest.param(lambda repo: repo.comment(3, "queued"), "/issues/3/comments", id="comment"),
        pytest.param(lambda repo: repo.react(11, "eyes"), "/issues/comments/11/reactions", id="reaction"),
    ],
)
async def test_comments_and_reactions_are_not_sent_again_after_a_server_error(
    direct: Direct, call: Any, path: str
) -> None:
    direct.github.fail_next("POST", path + "$", 502)
    with pytest.raises(GitHubBroken):
        await call(direct.repo)
    assert [r.status for r in direct.requests("POST", path)] == [502]
    assert (direct.github.comments, direct.github.reactions) == ([], [])


async def test_a_reply_longer_than_github_allows_is_cut_to_its_limit_and_says_so(direct: Direct) -> None:
    await direct.repo.comment(3, "x" * 70_000)
    [reply] = direct.github.comments
    assert len(reply["body"]) == COMMENT_LIMIT
    assert reply["body"].endswith("x\n\n(cut: the reply was longer than GitHub allows)")


async def test_an_answer_github_will_not_change_is_raised_with_its_body(direct: Direct) -> None:
    nameless = CheckRunBody({"head_sha": SMOKE_SHA, "output": {"title": "t", "summary": "s"}})
    with pytest.raises(BadRequest) as raised:
        await direct.repo.create_check_run(nameless)
    answer = answer_of(raised.value)
    assert answer is not None
    assert (answer.status, answer.outcome_unknown, answer.message) == (422, False, "name wasn't supplied.")
    assert answer.body["message"] == "name wasn't supplied."
    assert len(direct.requests("POST", "/check-runs")) == 1


async def test_a_read_without_an_answer_is_retried_a_bounded_number_of_times() -> None:
    clock = FakeTime()
    async with aiohttp.ClientSession() as http:
        client = GitHubClient(
            http, base_url=f"http://127.0.0.1:{closed_port()}", sleeper=clock.sleep, clock=clock
        )
        with acting_for(INSTALLATION), pytest.raises(GitHubUnreachable) as raised:
            await client.getitem("/repos/octo/firmware/pulls/1", oauth_token="ghs_x")
    assert len(clock.slept) == client.max_attempts - 1
    answer = answer_of(raised.value)
    assert answer is not None
    assert (answer.status, answer.outcome_unknown) == (None, True)


async def test_a_create_without_an_answer_is_raised_at_once() -> None:
    clock = FakeTime()
    async with aiohttp.ClientSession() as http:
        client = GitHubClient(
            http, base_url=f"http://127.0.0.1:{closed_port()}", sleeper=clock.sleep, clock=clock
        )
        with acting_for(INSTALLATION), pytest.raises(GitHubUnreachable):
            await client.post("/repos/octo/firmware/check-runs", data={}, oauth_token="ghs_x")
    assert clock.slept == []


def test_exceptions_that_are_not_about_github_have_no_answer() -> None:
    assert answer_of(ValueError("nothing to do with GitHub")) is None


async def test_reads_wait_for_the_reset_once_only_the_reserve_is_left(direct: Direct) -> None:
    reset = int(direct.clock.now) + 600
    low = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "10", "X-RateLimit-Reset": str(reset)}
    direct.github.add_pull(REPO, 7, head_sha=SMOKE_SHA)
    direct.github.fail_next("GET", r"/pulls/7$", 200, headers=low)
    await direct.repo.pull_request(7)  # the answer says 10 remain
    assert direct.clock.slept == []
    await direct.repo.pull_request(7)
    assert direct.clock.slept == [pytest.approx(reset - (direct.clock.now - direct.clock.slept[0]) + 1.0)]
    assert len(direct.requests("GET", "/pulls/7")) == 2


async def test_creating_and_completing_a_check_run_use_the_reserve(direct: Direct) -> None:
    reset = int(direct.clock.now) + 600
    low = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "10", "X-RateLimit-Reset": str(reset)}
    direct.github.add_pull(REPO, 7, head_sha=SMOKE_SHA)
    direct.github.fail_next("GET", r"/pulls/7$", 200, headers=low)
    await direct.repo.pull_request(7)
    check_run_id = await direct.repo.create_check_run(queued())
    await direct.repo.update_check_run(check_run_id, completed())
    assert direct.clock.slept == []


async def test_a_progress_update_waits_once_only_the_reserve_is_left(direct: Direct) -> None:
    check_run_id = await direct.repo.create_check_run(queued())
    reset = int(direct.clock.now) + 600
    low = {"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "10", "X-RateLimit-Reset": str(reset)}
    direct.github.fail_next("PATCH", r"/check-runs/\d+$", 200, headers=low)
    await direct.repo.update_check_run(check_run_id, queued())
    assert direct.clock.slept == []
    await direct.repo.update_check_run(check_run_id, queued())
    assert len(direct.clock.slept) == 1


async def test_a_request_the_caller_paid_for_is_neither_held_back_nor_counted_again(direct: Direct) -> None:
    direct.client.budget = Budget(creating_per_minute=1)
    await direct.repo.tokens.token(INSTALLATION)
    budget = direct.repo.budget
    assert budget.wait_s(INSTALLATION, creating=True, essential=True, now=direct.clock.now) == 0.0
    budget.spend(INSTALLATION, creating=True, now=direct.clock.now)
    with paid_for():
        await direct.repo.create_check_run(queued())
    assert direct.clock.slept == []
    assert budget.wait_s(INSTALLATION, creating=True, essential=True, now=direct.clock.now) > 0.0


async def test_a_request_the_caller_paid_for_is_not_retried_and_its_limit_pauses_the_installation(
    direct: Direct,
) -> None:
    direct.github.fail_next("POST", r"/check-runs$", 429, headers={"Retry-After": "30"})
    with paid_for(), pytest.raises(BadRequest) as raised:
        await direct.repo.create_check_run(queued())
    answer = answer_of(raised.value)
    assert answer is not None
    assert (answer.status, answer.outcome_unknown) == (429, False)
    assert len(direct.requests("POST", "/check-runs")) == 1
    wait = direct.repo.budget.wait_s(INSTALLATION, creating=False, essential=True, now=direct.clock.now)
    assert wait == pytest.approx(30.0)


async def test_a_rate_limit_on_one_request_holds_back_the_next_one_of_the_installation(
    direct: Direct,
) -> None:
    direct.github.add_pull(REPO, 7, head_sha=SMOKE_SHA)
    direct.github.fail_next("POST", r"/check-runs$", 429, headers={"Retry-After": "30"})
    with paid_for(), pytest.raises(BadRequest):
        await direct.repo.create_check_run(queued())
    await direct.repo.pull_request(7)
    assert direct.clock.slept == [pytest.approx(30.0)]


def new_stand_in(github: GitHubStandIn) -> None:
    if not hasattr(github, "faults"):
        pytest.skip("the stand-in does not list a commit's check runs yet (being rebuilt)")


async def test_check_runs_for_a_ref_are_found_by_name_across_pages(direct: Direct) -> None:
    new_stand_in(direct.github)
    created = [await direct.repo.create_check_run(queued()) for _ in range(3)]
    await direct.repo.create_check_run(queued("kerrigan / other"))
    runs = await direct.repo.check_runs_for_ref(SMOKE_SHA, "kerrigan / hil-smoke")
    assert sorted(run["id"] for run in runs) == sorted(created)
    [listing, *_] = direct.requests("GET", f"/commits/{SMOKE_SHA}/check-runs")
    assert (listing.query["check_name"], listing.query["filter"]) == ("kerrigan / hil-smoke", "all")


async def test_the_sign_in_flow_sends_githubs_headers(
    db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    settings = settings_for(
        db,
        github,
        github_url=github.url,
        github_client_id=github.oauth_client_id,
        github_client_secret=github.oauth_client_secret,
    )
    github.add_member("octo", "hubot")  # the App is installed on octo: its members may sign in
    client = await start_app(settings)
    started = await client.get("/login/github", allow_redirects=False)
    query = parse_qs(urlsplit(started.headers["Location"]).query)
    form = {"client_id": github.oauth_client_id, "login": "hubot"}
    form |= {name: query[name][0] for name in ("redirect_uri", "state")}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{github.url}/login/oauth/authorize", data=form, allow_redirects=False) as authorized,
    ):
        back = urlsplit(authorized.headers["Location"])
    signed_in = await client.get(f"{back.path}?{back.query}", allow_redirects=False)
    assert signed_in.status == 302
    asked = ("/login/oauth/access_token", "/user", "/app/installations", "/orgs/octo/members/hubot")
    sent = [r for r in github.requests if r.path in asked]
    assert [(r.method, r.path) for r in sent] == [
        ("POST", "/login/oauth/access_token"),
        ("GET", "/user"),
        ("GET", "/app/installations"),  # who the App is installed on: who may sign in
        ("GET", "/orgs/octo/members/hubot"),
    ]
    headers = [{name.lower(): value for name, value in r.headers.items()} for r in sent]
    assert [h["accept"] for h in headers] == ["application/json", *["application/vnd.github+json"] * 3]
    assert {h["x-github-api-version"] for h in headers} == {"2022-11-28"}
    assert {h["user-agent"] for h in headers} == {f"kerrigan/0.1.0 (GitHub App {github.app_id})"}


async def test_repository_without_a_workflows_folder_is_a_no_op(bare_harness: Harness) -> None:
    bare_harness.github.add_commit(
        REPO, OTHER_SHA, {"README.md": "# firmware\n", "src/main.c": "int main;\n"}
    )
    await bare_harness.deliver("push", push_payload(OTHER_SHA))
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.github.check_runs == {}
    assert await bare_harness.sessions() == []


async def test_only_manifests_in_the_workflows_folder_are_read(bare_harness: Harness) -> None:
    files = manifest_files("hil-smoke.yml") | {
        ".kerrigan/workflows/notes.md": "not a manifest\n",
        ".kerrigan/inventory.yml": "hosts: []\n",
        ".github/workflows/build.yml": "name: build-firmware\n",
    }
    bare_harness.github.add_commit(REPO, OTHER_SHA, files)
    await bare_harness.deliver("push", push_payload(OTHER_SHA))
    await bare_harness.settle()
    assert bare_harness.check_run_names() == [check_run_name("hil-smoke")]
