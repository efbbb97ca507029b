"""What reading a commit's manifests costs: one listing when none changed, and GitHub's headers throughout."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from kerrigan.testing.github import GitHubStandIn, RecordedRequest
from tests.integration.github.conftest import (
    MANIFESTS,
    OTHER_SHA,
    REPO,
    SHA,
    SMOKE_SHA,
    Harness,
    check_run_name,
    manifest_files,
    push_payload,
)
from tests.integration.github.direct_repository import Direct, direct_to

FIVE = ("hil-smoke.yml", "legacy.yml", "select-device.yml", "select-pool.yml", "waiting.yml")
NEXT_SHA = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"
LISTING = "/contents/.kerrigan/workflows"
USER_AGENT = re.compile(r"kerrigan/\d+\.\d+\.\d+ \(GitHub App \d+\)")


@pytest.fixture
async def direct(github: GitHubStandIn) -> AsyncIterator[Direct]:
    async with direct_to(github) as found:
        yield found


def contents_reads(github: GitHubStandIn, since: int = 0) -> list[RecordedRequest]:
    return [r for r in github.requests[since:] if r.method == "GET" and "/contents/" in r.path]


def new_stand_in(github: GitHubStandIn) -> None:
    if not hasattr(github, "faults"):
        pytest.skip("the stand-in does not send blob SHAs and ETags yet (being rebuilt)")


async def test_a_push_of_unchanged_manifests_costs_one_listing(direct: Direct) -> None:
    new_stand_in(direct.github)
    direct.github.add_commit(REPO, OTHER_SHA, manifest_files(*FIVE))
    direct.github.add_commit(REPO, NEXT_SHA, manifest_files(*FIVE))
    first = await direct.repo.manifests(OTHER_SHA)
    assert len(contents_reads(direct.github)) == 6  # the listing and five files
    before = len(direct.github.requests)
    second = await direct.repo.manifests(NEXT_SHA)
    assert [r.path for r in contents_reads(direct.github, before)] == [f"/repos/{REPO}{LISTING}"]
    assert second == first


async def test_a_changed_manifest_is_the_only_file_read_again(direct: Direct) -> None:
    new_stand_in(direct.github)
    direct.github.add_commit(REPO, OTHER_SHA, manifest_files(*FIVE))
    changed = manifest_files(*FIVE)
    changed[".kerrigan/workflows/legacy.yml"] += "# touched\n"
    direct.github.add_commit(REPO, NEXT_SHA, changed)
    await direct.repo.manifests(OTHER_SHA)
    before = len(direct.github.requests)
    files = await direct.repo.manifests(NEXT_SHA)
    assert [r.path.rsplit("/", 1)[-1] for r in contents_reads(direct.github, before)] == [
        "workflows",
        "legacy.yml",
    ]
    [legacy] = [file for file in files if file.path.endswith("legacy.yml")]
    assert legacy.text.endswith("# touched\n")


async def test_the_same_commit_read_again_is_answered_not_modified(direct: Direct) -> None:
    new_stand_in(direct.github)
    first = await direct.repo.manifests(SHA)
    before = len(direct.github.requests)
    again = await direct.repo.manifests(SHA)
    assert [r.status for r in contents_reads(direct.github, before)] == [304]
    assert again == first


async def test_a_manifest_that_cannot_be_read_becomes_a_file_with_an_error_and_is_read_next_time(
    direct: Direct,
) -> None:
    path = ".kerrigan/workflows/hil-smoke.yml"
    direct.github.fail_next("GET", re.escape(path) + "$", 403)
    [broken] = await direct.repo.manifests(SMOKE_SHA)
    assert (broken.path, broken.text, broken.error) == (path, "", "GitHub would not give the file (403)")
    [read] = await direct.repo.manifests(SMOKE_SHA)
    assert (read.text, read.error) == ((MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8"), None)


async def test_a_file_over_one_megabyte_is_never_asked_for(direct: Direct) -> None:
    """GitHub leaves such a file's content out; it is over the limit of a manifest anyway."""
    path = ".kerrigan/workflows/hil-smoke.yml"
    text = "".join(f"# {'lab notes ' * 12}{n}\n" for n in range(9000))
    assert len(text) > 1024 * 1024
    direct.github.add_commit(REPO, OTHER_SHA, {path: text})
    [file] = await direct.repo.manifests(OTHER_SHA)
    assert (file.text, file.error) == (
        "",
        f"the file is 1.1 MiB ({len(text):,} bytes); a manifest is at most 256 KiB, so it was not read",
    )
    assert [r for r in contents_reads(direct.github) if r.path.endswith(path)] == []


async def test_every_request_of_a_push_carries_githubs_headers(harness: Harness) -> None:
    await harness.deliver("push", push_payload(SHA))
    await harness.settle()
    assert harness.check_run_names()  # the push reached GitHub: listing, files, tokens, check runs
    assert {r.method for r in harness.github.requests} >= {"GET", "POST"}
    for request in harness.github.requests:
        headers = {name.lower(): value for name, value in request.headers.items()}  # names are any case
        where = (request.method, request.path)
        assert headers["accept"] in ("application/vnd.github+json", "application/vnd.github.raw+json"), where
        assert headers["x-github-api-version"] == "2022-11-28", where
        assert USER_AGENT.fullmatch(headers["user-agent"]), where
    assert check_run_name("hil-smoke") in harness.check_run_names()
