"""``push``: workflows whose ``on.push.branches`` match the branch; tags and deletions start nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.github.conftest import (
    MANIFESTS,
    OTHER_SHA,
    PUSH_WORKFLOWS,
    REPO,
    SHA,
    Harness,
    check_run_name,
    push_payload,
    webhook,
)

TASK = "tasks:\n  - id: smoke\n    run: ./scripts/smoke.sh\n"


def _manifest(name: str, on: dict[str, Any]) -> tuple[str, str]:
    return f".kerrigan/workflows/{name}.yml", f"name: {name}\non: {json.dumps(on)}\n{TASK}"


BRANCH_FILTERS = dict(
    [
        _manifest("main-only", {"push": {"branches": ["main"]}}),
        _manifest("release", {"push": {"branches": ["release/*"]}}),
        _manifest("release-deep", {"push": {"branches": ["release/**"]}}),
        _manifest("any-branch", {"push": {}}),
        _manifest("pull-requests-only", {"pull_request": {"branches": ["main"]}}),
    ]
)


async def test_push_to_main_creates_a_check_run_per_triggered_workflow(harness: Harness) -> None:
    assert await harness.deliver("push", webhook("push")) == 202
    await harness.settle()
    # org-class runs on pull_request only.
    assert harness.check_run_names() == [check_run_name(w) for w in PUSH_WORKFLOWS]
    assert {run["head_sha"] for run in harness.github.check_runs.values()} == {SHA}


@pytest.mark.parametrize(
    ("branch", "started"),
    [
        ("main", ["any-branch", "main-only"]),
        ("release/2.2", ["any-branch", "release", "release-deep"]),
        ("release/2.2/hotfix", ["any-branch", "release-deep"]),
        ("feature/uart", ["any-branch"]),
    ],
)
async def test_push_starts_the_workflows_whose_branch_filters_match(
    bare_harness: Harness, branch: str, started: list[str]
) -> None:
    bare_harness.github.add_commit(REPO, SHA, BRANCH_FILTERS)
    await bare_harness.deliver("push", push_payload(ref=f"refs/heads/{branch}"))
    await bare_harness.settle()
    assert bare_harness.check_run_names() == [check_run_name(w) for w in started]
    assert {s.head_branch for s in await bare_harness.sessions()} == {branch}


def _branch_deletion() -> dict[str, Any]:
    payload = push_payload(ref="refs/heads/uart-loopback")
    payload.update({"after": "0" * 40, "deleted": True, "commits": [], "head_commit": None})
    return payload


@pytest.mark.parametrize(
    "payload",
    [pytest.param(webhook("push-tag"), id="tag"), pytest.param(_branch_deletion(), id="branch-deletion")],
)
async def test_tag_push_or_branch_deletion_starts_nothing(
    bare_harness: Harness, payload: dict[str, Any]
) -> None:
    assert await bare_harness.deliver("push", payload) == 202
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.github.requests == []
    assert await bare_harness.sessions() == []


async def test_a_manifest_that_is_not_utf8_fails_alone_and_the_others_still_run(harness: Harness) -> None:
    files: dict[str, str | bytes] = {
        ".kerrigan/workflows/hil-smoke.yml": (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8"),
        ".kerrigan/workflows/zz-latin1.yml": "name: caf\xe9\n".encode("latin-1"),
    }
    harness.github.add_commit(REPO, OTHER_SHA, files)
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()
    runs = {run["name"]: run for run in harness.github.check_runs.values()}
    assert runs["kerrigan / hil-smoke"]["status"] == "queued"
    broken = runs["kerrigan / .kerrigan/workflows/zz-latin1.yml"]
    assert (broken["status"], broken["conclusion"]) == ("completed", "failure")
    assert "not UTF-8" in broken["output"]["summary"]


async def test_a_token_github_refuses_is_replaced_and_the_delivery_still_succeeds(harness: Harness) -> None:
    assert await harness.deliver("push", push_payload()) == 202
    await harness.settle()
    harness.github.tokens.clear()  # GitHub revoked every token it had handed out
    harness.github.add_commit(
        REPO,
        OTHER_SHA,
        {".kerrigan/workflows/hil-smoke.yml": (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")},
    )
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()
    assert len(harness.requests("POST", "/access_tokens")) == 2
    assert [d.error for d in await harness.deliveries()] == [None, None]
    assert any(run["head_sha"] == OTHER_SHA for run in harness.github.check_runs.values())


async def test_a_broken_manifest_is_reported_once_per_commit_not_once_per_event(harness: Harness) -> None:
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/bad.yml": "name: bad\non: [push]\n"})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    run = webhook("workflow_run-completed")
    run["workflow_run"]["head_sha"] = OTHER_SHA
    assert await harness.deliver("workflow_run", run) == 202
    await harness.settle()
    assert [r["name"] for r in harness.github.check_runs.values()] == ["kerrigan / bad"]


async def test_manifest_names_with_url_characters_are_fetched_and_a_missing_file_fails_alone(
    harness: Harness,
) -> None:
    smoke = (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")
    harness.github.add_commit(
        REPO,
        OTHER_SHA,
        {".kerrigan/workflows/a#b?c%20.yml": smoke.replace("name: hil-smoke", "name: odd-name")},
    )
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()
    runs = {run["name"]: run for run in harness.github.check_runs.values()}
    assert runs["kerrigan / odd-name"]["status"] == "queued"
