"""An owner's maintenance reaches a developer's check run: who, since when, until when and why. The lab is
``fixtures/inventory/lab.yml``; hil-smoke needs the SDK 2.2.0 SoM devkits of ``sdk-2-2-som``."""

from __future__ import annotations

from datetime import timedelta

from kerrigan.core.inventory import DeviceState
from kerrigan.store.audit import Change
from kerrigan.store.inventory import load_inventory, set_state
from tests.integration.github.conftest import MANIFESTS, Harness, check_run_name

FILES = {".kerrigan/workflows/hil-smoke.yml": (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")}


async def test_a_maintenance_an_owner_set_is_explained_in_the_check_run(harness: Harness) -> None:
    db = harness.database
    async with db.sessions() as session, session.begin():
        pool = [d.id for d in (await load_inventory(session)).devices if d.pool_id == "sdk-2-2-som"]
        for device in pool:
            await set_state(
                session,
                device,
                DeviceState.MAINTENANCE,
                "reflashing the bootloader",
                until=db.clock() + timedelta(hours=2),
                change=Change("octocat", db.clock()),
            )
    runs = {run["name"]: run for run in await harness.push_commit(FILES)}
    run = runs[check_run_name("hil-smoke")]
    assert run["status"] == "queued"  # not yet: the maintenance ends
    output = run["output"]["summary"] + (run["output"].get("text") or "")
    since = db.clock().strftime("%Y-%m-%d %H:%M")
    until = (db.clock() + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M")
    assert (
        f"device in maintenance since {since} by octocat until {until}: reflashing the bootloader" in output
    )
