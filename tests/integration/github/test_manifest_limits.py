"""How many manifests a commit may hold and how large each may be; and reading them keeps the server
answering: manifests are parsed and resolved off the event loop, for a push, a fork's pull request and its
approval alike."""

from __future__ import annotations

import pytest

from kerrigan.core.manifest import MAX_MANIFEST_BYTES, MAX_MANIFESTS
from kerrigan.github import sessions
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import (
    FORK_SHA,
    MAINTAINER,
    OTHER_SHA,
    REPO,
    Harness,
    check_run_name,
    comment,
    push_payload,
    webhook,
)
from tests.integration.github.direct_repository import direct_to
from tests.integration.held_calls import HeldCalls

FOLDER = ".kerrigan/workflows"
BIG = f"{FOLDER}/big.yml"
SMALL = f"{FOLDER}/small.yml"


def manifest(name: str, tasks: int = 1) -> str:
    return (
        f"name: {name}\non: {{push: {{branches: [main]}}, pull_request: {{branches: [main]}}}}\ntasks:\n"
        + "".join(
            f"  - id: t{n}\n    run: ./scripts/smoke.sh {n}\n    env: {{CASE: '{n}'}}\n"
            "    requirements: {labels: {form_factor: som}, tags: [uart-debug]}\n"
            for n in range(tasks)
        )
    )


def padded(name: str, size: int) -> str:
    """A valid manifest, and a comment making it ``size`` bytes."""
    text = manifest(name)
    return text + "#" * (size - len(text) - 1) + "\n"


def contents_paths(github: GitHubStandIn) -> list[str]:
    return [r.path for r in github.requests if r.method == "GET" and "/contents/" in r.path]


async def test_a_manifest_over_the_size_limit_is_not_read_and_its_check_run_names_it(
    bare_harness: Harness,
) -> None:
    runs = await bare_harness.push_commit(
        {BIG: padded("big", MAX_MANIFEST_BYTES + 1), SMALL: manifest("small")}
    )
    by_name = {run["name"]: run for run in runs}
    assert sorted(by_name) == [check_run_name(BIG), check_run_name("small")]
    big = by_name[check_run_name(BIG)]
    assert (big["status"], big["conclusion"]) == ("completed", "failure")
    message = "the file is 256.0 KiB (262,145 bytes); a manifest is at most 256 KiB, so it was not read"
    assert f"- line 1: {message}" in big["output"]["summary"]
    assert [(a["path"], a["start_line"], a["message"]) for a in big["output"]["annotations"]] == [
        (BIG, 1, message)
    ]
    assert not [path for path in contents_paths(bare_harness.github) if path.endswith("big.yml")]


async def test_a_manifest_at_the_size_limit_runs(bare_harness: Harness) -> None:
    [run] = await bare_harness.push_commit({BIG: padded("big", MAX_MANIFEST_BYTES)})
    assert run["name"] == check_run_name("big")
    assert "Manifest has" not in run["output"]["title"]


async def test_more_manifests_than_the_limit_are_one_error_of_the_folder_and_none_is_read(
    bare_harness: Harness,
) -> None:
    count = MAX_MANIFESTS + 1
    files = {f"{FOLDER}/w{n:02}.yml": manifest(f"w{n:02}") for n in range(count)}
    [run] = await bare_harness.push_commit(files)
    assert (run["name"], run["conclusion"]) == (check_run_name(FOLDER), "failure")
    assert (
        f"{FOLDER} holds {count} manifests (.yml and .yaml files); Kerrigan reads at most {MAX_MANIFESTS} a "
        "commit, so it read none of them"
    ) in run["output"]["summary"]
    assert contents_paths(bare_harness.github) == [f"/repos/{REPO}/contents/{FOLDER}"]  # the listing alone
    [session] = await bare_harness.sessions()
    assert session.jobs == ()


async def test_as_many_manifests_as_the_limit_all_run(bare_harness: Harness) -> None:
    files = {f"{FOLDER}/w{n:02}.yml": manifest(f"w{n:02}") for n in range(MAX_MANIFESTS)}
    runs = await bare_harness.push_commit(files)
    assert sorted(run["name"] for run in runs) == [check_run_name(f"w{n:02}") for n in range(MAX_MANIFESTS)]


async def test_a_size_the_listing_gives_decides_before_the_file_is_asked_for(github: GitHubStandIn) -> None:
    github.add_commit(REPO, OTHER_SHA, {BIG: padded("big", 3 * 1024 * 1024), SMALL: manifest("small")})
    async with direct_to(github) as direct:
        big, small = await direct.repo.manifests(OTHER_SHA)
    assert (big.path, big.text, big.error) == (
        BIG,
        "",
        "the file is 3 MiB (3,145,728 bytes); a manifest is at most 256 KiB, so it was not read",
    )
    assert (small.path, small.error) == (SMALL, None)
    assert [path.rsplit("/", 1)[-1] for path in contents_paths(github)] == ["workflows", "small.yml"]


async def test_a_push_parses_and_resolves_off_the_event_loop_which_answers_meanwhile(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing = HeldCalls(sessions.parse_manifest)
    resolving = HeldCalls(sessions.explain)
    monkeypatch.setattr(sessions, "parse_manifest", parsing)
    monkeypatch.setattr(sessions, "explain", resolving)
    harness.github.add_commit(REPO, OTHER_SHA, {BIG: manifest("big", tasks=200)})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    for held in (parsing, resolving):
        await held.entered()
        assert not held.on_the_loop
        async with harness.client.get("/readyz") as ready:  # answered while the call is held
            assert ready.status == 200
        held.release()
    await harness.settle()
    assert harness.check_run_names() == [check_run_name("big")]
    assert parsing.threads
    assert resolving.threads
    assert not parsing.on_the_loop
    assert not resolving.on_the_loop


async def test_a_forks_manifests_are_parsed_off_the_loop_and_resolved_only_once_approved(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing = HeldCalls(sessions.parse_manifest)
    resolving = HeldCalls(sessions.explain)
    monkeypatch.setattr(sessions, "parse_manifest", parsing)
    monkeypatch.setattr(sessions, "explain", resolving)
    parsing.release()
    resolving.release()
    harness.github.add_pull(REPO, 8, head_sha=FORK_SHA, head_ref="fix-uart-timeout", fork="mona/firmware")
    await harness.deliver("pull_request", webhook("pull_request-fork"))
    await harness.settle()
    assert parsing.threads
    assert resolving.threads == []  # waiting for approval: parsed for the check runs' names, not resolved
    waiting = await harness.sessions()
    assert waiting
    assert all(session.awaiting_approval and session.resolution.to_document() == {} for session in waiting)

    harness.github.set_permission(REPO, MAINTAINER, "write")
    assert await harness.deliver("issue_comment", comment("/kerrigan approve", number=8)) == 202
    await harness.settle()
    assert resolving.threads  # the approval resolved them
    assert not parsing.on_the_loop
    assert not resolving.on_the_loop
    assert not any(session.awaiting_approval for session in await harness.sessions())
