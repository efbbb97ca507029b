"""A push from a repository a pool does not admit: its tasks are refused that pool's devices, and the check
run fails with the reason. The lab is ``fixtures/inventory/lab.yml``; octo/firmware pushes."""

from __future__ import annotations

import dataclasses

from kerrigan.core.inventory import Inventory
from tests.integration.github.conftest import (
    MANIFESTS,
    REPO,
    Harness,
    check_run_name,
    lab,
    store_inventory,
)

POOL = "sdk-2-2-som"  # the only pool with hil-smoke's SDK 2.2.0 SoM devkits
FILES = {".kerrigan/workflows/hil-smoke.yml": (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")}


async def restrict(harness: Harness, *globs: str) -> None:
    before = lab()
    pools = tuple(
        dataclasses.replace(pool, repositories=globs) if pool.id == POOL else pool for pool in before.pools
    )
    await store_inventory(harness.database, before, Inventory(pools, before.devices, before.hosts))


async def test_a_push_from_a_repository_the_pool_does_not_admit_fails_its_check_run_with_the_reason(
    harness: Harness,
) -> None:
    await restrict(harness, "octo-lab/*")
    runs = {run["name"]: run for run in await harness.push_commit(FILES)}
    run = runs[check_run_name("hil-smoke")]
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    output = run["output"]["summary"] + (run["output"].get("text") or "")
    assert f"repository {REPO} may not use pool {POOL}" in output
    [session] = await harness.sessions()
    [smoke, _boot] = session.resolution.to_document()["tasks"]
    assert smoke["outcome"] == "unschedulable"
    assert {"pool": POOL, "reasons": [f"repository {REPO} may not use pool {POOL}"]} in smoke[
        "rejected_pools"
    ]
    assert smoke["eligible_devices"] == []


async def test_a_push_from_a_repository_a_glob_admits_runs_as_before(harness: Harness) -> None:
    await restrict(harness, "Octo/*")  # GitHub names ignore case
    runs = {run["name"]: run for run in await harness.push_commit(FILES)}
    run = runs[check_run_name("hil-smoke")]
    assert run["status"] == "queued"
    assert "may not use pool" not in run["output"]["summary"]
