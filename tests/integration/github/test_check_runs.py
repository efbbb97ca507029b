"""Check runs as GitHub receives them: one per workflow, carrying the resolution, within GitHub's limits."""

from __future__ import annotations

import re
from typing import Any

import pytest

from kerrigan.core.inventory import Inventory
from kerrigan.core.manifest import parse_manifest
from kerrigan.core.sessions import Conclusion, SessionState
from kerrigan.testing.labs import synthetic_lab
from tests.integration.github.conftest import (
    MANIFESTS,
    PUBLIC_URL,
    SMOKE_SHA,
    Harness,
    check_run_name,
    lab,
    manifest_files,
    push_payload,
    store_inventory,
)

INVALID_PATH = ".kerrigan/workflows/invalid.yml"
INVALID = (MANIFESTS / "invalid.yml").read_text(encoding="utf-8")
INVALID_ERROR_LINES = [3, 5, 6, 9, 10, 12, 13, 18, 19, 21, 22]


async def _smoke_run(harness: Harness) -> dict[str, Any]:
    await harness.deliver("push", push_payload(SMOKE_SHA))
    await harness.settle()
    [run] = harness.github.check_runs.values()
    return run


async def test_check_run_for_a_task_devices_can_run_is_created_queued(harness: Harness) -> None:
    run = await _smoke_run(harness)
    assert (run["name"], run["status"], run["conclusion"]) == (check_run_name("hil-smoke"), "queued", None)
    assert run["head_sha"] == SMOKE_SHA


# What the resolution of hil-smoke's first task says, as regular expressions over the summary.
RESOLUTION = {
    "requested labels": r"\*\*Requested labels:\*\* `sdk=2\.2\.0`, `form_factor=som`",
    "requested tags": r"\*\*Requested tags:\*\* `2\.2\.0-som-devkits`, `uart-debug`",
    "eligible pools": r"\*\*Eligible pools:\*\* .*`sdk-2-2-som` \(2 eligible\)",
    "selected device": r"\*\*Selected:\*\* `modalix-(blue|red)box` \(pool `sdk-2-2-som`",
    "reason histogram": r"\| 8 \| tag 2\.2\.0-som-devkits missing \| never \|",
    "task overview": r"\| `smoke-som` \| ready: waiting for dispatch \| 2 of 12 \|",
}


async def test_queued_check_run_summary_carries_the_resolution(harness: Harness) -> None:
    run = await _smoke_run(harness)
    summary = run["output"]["summary"]
    assert [part for part, pattern in RESOLUTION.items() if not re.search(pattern, summary)] == []


async def test_check_run_links_to_its_session_page(harness: Harness) -> None:
    run = await _smoke_run(harness)
    [session] = await harness.sessions()
    assert run["details_url"] == f"{PUBLIC_URL}/sessions/{session.id}"
    assert (run["external_id"], session.check_run_id) == (session.id, run["id"])


async def test_task_no_device_can_ever_match_fails_the_check_run_at_once(harness: Harness) -> None:
    [run] = await harness.push_commit(manifest_files("typo.yml"))
    assert (run["status"], run["conclusion"], run["updates"]) == ("completed", "failure", 0)
    assert run["output"]["title"].startswith("No device can ever run smoke")
    [session] = await harness.sessions()
    assert (session.state, session.conclusion) == (SessionState.COMPLETED, Conclusion.FAILURE)


async def test_task_whose_matching_devices_are_busy_or_offline_stays_queued_and_says_it_waits(
    harness: Harness,
) -> None:
    [run] = await harness.push_commit(manifest_files("waiting.yml"))
    assert (run["status"], run["conclusion"]) == ("queued", None)
    assert "waits for busy or offline devices" in run["output"]["title"]
    assert "queue position 1" in run["output"]["title"]
    assert "waiting: matching devices are busy or offline" in run["output"]["summary"]


async def test_manifest_with_errors_fails_the_check_run_and_lists_every_error(harness: Harness) -> None:
    [run] = await harness.push_commit({INVALID_PATH: INVALID})
    assert (run["name"], run["status"], run["conclusion"]) == (
        check_run_name("invalid"),
        "completed",
        "failure",
    )
    assert run["output"]["title"] == "Manifest has 11 errors"
    summary = run["output"]["summary"]
    for problem in parse_manifest(INVALID, INVALID_PATH).errors:
        assert f"- line {problem.line}: {problem.field}: {problem.message}" in summary


async def test_manifest_errors_are_failure_annotations_on_the_manifest_lines(harness: Harness) -> None:
    [run] = await harness.push_commit({INVALID_PATH: INVALID})
    failures = [a for a in run["output"]["annotations"] if a["annotation_level"] == "failure"]
    assert [(a["path"], a["start_line"], a["end_line"]) for a in failures] == [
        (INVALID_PATH, line, line) for line in INVALID_ERROR_LINES
    ]


@pytest.mark.parametrize(
    ("manifest", "lines"),
    [pytest.param("invalid.yml", [13], id="invalid"), pytest.param("legacy.yml", [5, 6], id="valid")],
)
async def test_deprecations_are_warning_annotations_on_the_manifest_lines(
    harness: Harness, manifest: str, lines: list[int]
) -> None:
    path = f".kerrigan/workflows/{manifest}"
    [run] = await harness.push_commit({path: (MANIFESTS / manifest).read_text(encoding="utf-8")})
    warnings = [a for a in run["output"]["annotations"] if a["annotation_level"] == "warning"]
    assert [(a["path"], a["start_line"]) for a in warnings] == [(path, line) for line in lines]
    assert all("deprecated" in a["message"] for a in warnings)


async def test_more_than_fifty_annotations_are_sent_in_batches_of_fifty(harness: Harness) -> None:
    unknown_keys = "".join(f"unknown_{n}: 1\n" for n in range(60))
    text = f"name: many-errors\non: {{push: {{}}}}\n{unknown_keys}tasks:\n  - id: t\n    run: ./t.sh\n"
    [run] = await harness.push_commit({".kerrigan/workflows/many-errors.yml": text})
    sent = [
        len((r.body.get("output") or {}).get("annotations") or [])
        for r in harness.github.requests
        if "/check-runs" in r.path and isinstance(r.body, dict)
    ]
    assert all(count <= 50 for count in sent)
    assert len([count for count in sent if count]) > 1
    assert sorted(a["start_line"] for a in run["output"]["annotations"]) == list(range(3, 63))
    assert run["conclusion"] == "failure"


@pytest.mark.parametrize(
    "files",
    [
        pytest.param(manifest_files("typo.yml"), id="unschedulable"),
        pytest.param({INVALID_PATH: INVALID}, id="invalid"),
    ],
)
async def test_completed_check_run_offers_a_retry_action(harness: Harness, files: dict[str, str]) -> None:
    [run] = await harness.push_commit(files)
    assert run["status"] == "completed"
    assert [action["identifier"] for action in run["actions"]] == ["retry"]
    assert run["actions"][0]["label"] == "Retry"


# Every device lacks all eight labels, so each rejected-device row lists eight reasons: a few hundred such
# rows are well over GitHub's limit (a lab of thousands of devices would only take longer to store).
NOBODY_HAS = {
    "calibration.fixture_serial": "cf-0001",
    "calibration.thermal_chamber": "tc-2",
    "power.supply_channel": "psu-3",
    "power.relay_board": "rb-7",
    "jtag.adapter_serial": "jt-0042",
    "network.switch_port": "sw1-p12",
    "camera.sensor_module": "imx-477",
    "display.panel_revision": "rev-c",
}


async def test_summary_over_github_limit_is_cut_and_says_how_many_rows_are_on_the_session_page(
    harness: Harness,
) -> None:
    small, big = lab(), synthetic_lab(5, 60)
    inventory = Inventory(small.pools + big.pools, small.devices + big.devices, small.hosts + big.hosts)
    await store_inventory(harness.database, small, inventory)
    labels = "".join(f"    {key}: {value}\n" for key, value in NOBODY_HAS.items())
    manifest = (
        f"name: bench\non: {{push: {{}}}}\nscheduling:\n  labels:\n{labels}tasks:\n  - id: t\n    run: ./t\n"
    )
    [run] = await harness.push_commit({".kerrigan/workflows/bench.yml": manifest})
    [delivery] = await harness.deliveries()
    assert delivery.error is None
    summary = run["output"]["summary"]
    assert len(summary.encode()) <= 65_535
    [session] = await harness.sessions()
    cut = re.search(r"_(\d+) more rows on the \[session page\]\((\S+)\)\._\n$", summary)
    assert cut is not None
    assert cut[2] == f"{PUBLIC_URL}/sessions/{session.id}"
    assert int(cut[1]) > 50
    table = summary.split("| device | pool | every reason |\n|---|---|---|\n")[1].split("</details>")[0]
    assert table.count("\n") + int(cut[1]) == len(inventory.devices)
