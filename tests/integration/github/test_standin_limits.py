"""The stand-in's rate limits (primary and secondary, as GitHub enforces them) and conditional requests."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from multidict import CIMultiDictProxy

from kerrigan.testing.clock import FakeTime
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.github.limits import PRIMARY, SECONDARY_CONCURRENCY, SECONDARY_CONTENT
from tests.integration.conftest import mint_token, token_auth
from tests.integration.github.conftest import INSTALLATION, REPO, SHA, manifest_files

LISTING = f"/repos/{REPO}/contents/.kerrigan/workflows"
SMOKE_FILE = f"{LISTING}/hil-smoke.yml"


@pytest.fixture
def clock(github: GitHubStandIn) -> FakeTime:
    """The ``github`` fixture enforcing its limits on a clock the test moves."""
    moved = FakeTime(1_800_000_000.0)
    github.limits.enabled = True
    github.limits.clock = moved
    return moved


async def get(
    http: aiohttp.ClientSession, github: GitHubStandIn, token: str, path: str, **headers: str
) -> tuple[int, CIMultiDictProxy[str], bytes]:
    async with http.get(
        f"{github.url}{path}", params={"ref": SHA}, headers=token_auth(token) | headers
    ) as answer:
        return answer.status, answer.headers, await answer.read()


async def comment(
    http: aiohttp.ClientSession, github: GitHubStandIn, token: str
) -> tuple[int, dict[str, Any]]:
    async with http.post(
        f"{github.url}/repos/{REPO}/issues/7/comments", json={"body": "hi"}, headers=token_auth(token)
    ) as answer:
        return answer.status, {"headers": answer.headers, "body": await answer.json()}


# -- the primary limit -----------------------------------------------------------------------------


def test_limits_are_off_unless_asked() -> None:
    assert not GitHubStandIn(public_key="unused").limits.enabled
    assert GitHubStandIn(public_key="unused", enforce_limits=True).limits.enabled


async def test_without_limits_answers_carry_no_rate_limit_headers(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    status, headers, _ = await get(api_session, github, installation_token, LISTING)
    assert status == 200
    assert "x-ratelimit-remaining" not in {name.lower() for name in headers}


async def test_every_answer_to_an_installation_token_announces_the_primary_limit(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    await get(api_session, github, installation_token, LISTING)
    _, headers, _ = await get(api_session, github, installation_token, SMOKE_FILE)
    assert {name.lower(): headers[name] for name in headers if name.lower().startswith("x-ratelimit")} == {
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "4998",
        "x-ratelimit-used": "2",
        "x-ratelimit-reset": str(int(clock.now + 3600)),
        "x-ratelimit-resource": "core",
    }


async def test_a_spent_primary_limit_is_refused_until_the_window_resets(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    github.limits.primary_limit = 2
    statuses = [(await get(api_session, github, installation_token, LISTING))[0] for _ in range(3)]
    status, headers, body = await get(api_session, github, installation_token, LISTING)
    assert statuses == [200, 200, 403]
    assert status == 403
    assert b"API rate limit exceeded" in body
    assert (headers["x-ratelimit-remaining"], headers["x-ratelimit-reset"]) == (
        "0",
        str(int(clock.now + 3600)),
    )
    assert [limited.kind for limited in github.limited] == [PRIMARY, PRIMARY]
    clock.now += 3600
    assert (await get(api_session, github, installation_token, LISTING))[0] == 200


async def test_the_primary_limit_is_per_installation(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    github.add_installation(2, "mona")
    github.add_repository("mona/firmware", 2)
    github.add_commit("mona/firmware", SHA, manifest_files())
    github.tokens["ghs_mona"] = (2, github.tokens[installation_token][1])
    github.limits.primary_limit = 1
    await get(api_session, github, installation_token, LISTING)
    assert (await get(api_session, github, "ghs_mona", "/repos/mona/firmware/contents/.kerrigan"))[0] == 200


async def test_asking_what_is_left_costs_nothing_and_says_it(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    await get(api_session, github, installation_token, LISTING)
    for _ in range(2):
        async with api_session.get(
            f"{github.url}/rate_limit", headers=token_auth(installation_token)
        ) as answer:
            body = await answer.json()
    assert body["resources"]["core"] == {
        "limit": 5000,
        "remaining": 4999,
        "used": 1,
        "reset": int(clock.now + 3600),
    }
    assert body["rate"] == body["resources"]["core"]


# -- secondary limits ------------------------------------------------------------------------------


async def test_more_than_80_content_creating_requests_a_minute_are_refused_with_retry_after(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    statuses = [(await comment(api_session, github, installation_token))[0] for _ in range(80)]
    status, answer = await comment(api_session, github, installation_token)
    assert statuses == [201] * 80
    assert status == 403
    assert answer["body"]["message"].startswith("You have exceeded a secondary rate limit")
    assert answer["headers"]["Retry-After"] == "60"
    assert [limited.kind for limited in github.limited] == [SECONDARY_CONTENT]
    assert len(github.comments) == 80
    assert (await get(api_session, github, installation_token, LISTING))[0] == 200  # reading is still allowed
    clock.now += 60
    assert (await comment(api_session, github, installation_token))[0] == 201


async def test_minting_and_revoking_tokens_are_not_content_creating(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    github.limits.content_per_minute = 1
    for _ in range(3):
        token = await mint_token(api_session, github)
        async with api_session.delete(f"{github.url}/installation/token", headers=token_auth(token)) as gone:
            assert gone.status == 204
    assert github.limited == []
    assert (await comment(api_session, github, installation_token))[0] == 201
    assert (await comment(api_session, github, installation_token))[0] == 403  # the one a minute is spent


async def test_a_secondary_limit_may_come_without_retry_after(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    github.limits.content_per_minute = 1
    github.limits.secondary_retry_after = None
    await comment(api_session, github, installation_token)
    status, answer = await comment(api_session, github, installation_token)
    assert status == 403
    assert "Retry-After" not in answer["headers"]


async def test_more_concurrent_requests_than_allowed_are_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    github.limits.concurrent_limit = 2
    held = github.faults.inject("GET", "/contents/", delay_s=2.0, times=2)
    slow = [asyncio.create_task(get(api_session, github, installation_token, LISTING)) for _ in range(2)]
    while github.limits.in_flight(INSTALLATION) < 2:
        await asyncio.sleep(0.01)
    status, _, body = await get(api_session, github, installation_token, LISTING)
    assert status == 403
    assert b"secondary rate limit" in body
    assert [answer[0] for answer in await asyncio.gather(*slow)] == [200, 200]
    assert held.hits == 2
    assert [limited.kind for limited in github.limited] == [SECONDARY_CONCURRENCY]


# -- conditional requests and git's ids ------------------------------------------------------------


async def test_a_get_naming_the_current_etag_is_answered_304_without_costing_a_request(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    status, headers, _ = await get(api_session, github, installation_token, LISTING)
    assert (status, headers["ETag"].startswith('W/"')) == (200, True)
    again, again_headers, body = await get(
        api_session, github, installation_token, LISTING, **{"If-None-Match": headers["ETag"]}
    )
    assert (again, body) == (304, b"")
    assert again_headers["ETag"] == headers["ETag"]
    assert again_headers["x-ratelimit-used"] == "1"


async def test_a_stale_etag_gets_the_whole_answer(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    _, headers, _ = await get(api_session, github, installation_token, SMOKE_FILE)
    github.add_commit(REPO, SHA, {".kerrigan/workflows/hil-smoke.yml": "changed: true\n"})
    status, changed, body = await get(
        api_session, github, installation_token, SMOKE_FILE, **{"If-None-Match": headers["ETag"]}
    )
    assert status == 200
    assert changed["ETag"] != headers["ETag"]
    assert body


async def test_a_raw_file_answers_conditional_requests_too(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    raw = {"Accept": "application/vnd.github.raw+json"}
    _, headers, _ = await get(api_session, github, installation_token, SMOKE_FILE, **raw)
    status, _, _ = await get(
        api_session, github, installation_token, SMOKE_FILE, **raw, **{"If-None-Match": headers["ETag"]}
    )
    assert status == 304


def git(folder: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=folder, check=True, capture_output=True, text=True).stdout


async def test_listings_and_files_carry_the_shas_git_gives_the_blobs_and_trees(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, tmp_path: Path
) -> None:
    files = {
        "README.md": "# firmware\n",
        "scripts/run.sh": "#!/bin/sh\necho hi\n",
        "scripts/lib/x.c": "int x;\n",
    }
    github.add_commit(REPO, SHA, files)
    for path, text in files.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text, encoding="utf-8")
    (tmp_path / "scripts/run.sh").chmod(0o755)
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    tree = git(tmp_path, "write-tree").strip()
    expected = {line.split("\t")[1]: line.split()[2] for line in git(tmp_path, "ls-tree", tree).splitlines()}
    async with api_session.get(
        f"{github.url}/repos/{REPO}/contents/", params={"ref": SHA}, headers=token_auth(installation_token)
    ) as answer:
        listing = await answer.json()
    assert {entry["name"]: entry["sha"] for entry in listing} == expected
    async with api_session.get(
        f"{github.url}/repos/{REPO}/contents/README.md",
        params={"ref": SHA},
        headers=token_auth(installation_token),
    ) as answer:
        assert (await answer.json())["sha"] == expected["README.md"]
    assert expected["README.md"] == hashlib.sha1(b"blob 11\0# firmware\n").hexdigest()


async def test_a_soak_on_compressed_time_shortens_the_limits_windows(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, clock: FakeTime
) -> None:
    # soak_lab_week runs GitHub's hour and minute on lab time: 600 times faster, a lab minute is 0.1 s.
    github.limits.content_per_minute, github.limits.content_window_s = 1, 0.1
    assert (await comment(api_session, github, installation_token))[0] == 201
    assert (await comment(api_session, github, installation_token))[0] == 403
    clock.now += 0.1
    assert (await comment(api_session, github, installation_token))[0] == 201
    github.limits.window_s = 6.0  # a lab hour: the next window resets 6 s from its start
    clock.now += 3600
    _, headers, _ = await get(api_session, github, installation_token, LISTING)
    assert headers["x-ratelimit-reset"] == str(int(clock.now + 6))
    assert [limited.kind for limited in github.limited] == [SECONDARY_CONTENT]
