"""Talking to GitHub: installation tokens, retries, and reading manifests at a commit."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.integration.github.conftest import (
    MANIFESTS,
    OTHER_SHA,
    REPO,
    SMOKE_SHA,
    Harness,
    check_run_name,
    manifest_files,
    push_payload,
)

TOKENS = "/access_tokens"


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


@pytest.mark.parametrize(
    ("status", "headers"),
    [
        pytest.param(502, {"Retry-After": "0"}, id="502"),
        pytest.param(503, {}, id="503-backoff"),
        pytest.param(429, {"Retry-After": "0"}, id="429"),
        pytest.param(403, {"Retry-After": "0"}, id="403-secondary-rate-limit"),
    ],
)
async def test_server_errors_and_rate_limits_are_retried_until_the_request_succeeds(
    bare_harness: Harness, status: int, headers: dict[str, str]
) -> None:
    bare_harness.github.fail_next("POST", r"/check-runs$", status, headers=headers)
    await bare_harness.deliver("push", push_payload(SMOKE_SHA))
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.attempts, delivery.error) == (1, None)
    assert [r.status for r in bare_harness.requests("POST", "/check-runs")] == [status, 201]
    assert bare_harness.check_run_names() == [check_run_name("hil-smoke")]


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


async def test_manifest_over_one_megabyte_is_read_through_the_raw_media_type(harness: Harness) -> None:
    smoke = (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")
    padding = "".join(f"# {'lab notes ' * 12}{n}\n" for n in range(9000))
    assert len(padding) > 1024 * 1024
    path = ".kerrigan/workflows/hil-smoke.yml"
    harness.github.add_commit(REPO, OTHER_SHA, {path: padding + smoke})
    await harness.deliver("push", push_payload(OTHER_SHA))
    await harness.settle()
    [run] = harness.github.check_runs.values()
    assert (run["name"], run["status"]) == (check_run_name("hil-smoke"), "queued")
    raw = [r for r in harness.requests("GET", path) if "raw" in r.headers.get("Accept", "")]
    assert [r.status for r in raw] == [200]


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
