"""A person's reservation reaches a developer's check run: whose, until when and why. The lab is
``fixtures/inventory/lab.yml``; hil-smoke needs the SDK 2.2.0 SoM devkits of ``sdk-2-2-som``."""

from __future__ import annotations

from datetime import timedelta

from kerrigan.core.reservations import read_request
from kerrigan.core.roles import Principal
from kerrigan.store.inventory import load_inventory
from kerrigan.store.reservations import ReservationGrant, create_reservation, grant_reservations
from tests.integration.github.conftest import MANIFESTS, Harness, check_run_name

FILES = {".kerrigan/workflows/hil-smoke.yml": (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")}


async def test_a_reserved_board_is_explained_in_the_check_run_of_the_job_waiting_for_it(
    harness: Harness,
) -> None:
    db = harness.database
    async with db.sessions() as session, session.begin():
        inventory = await load_inventory(session)
        pool = [d for d in inventory.devices if d.pool_id == "sdk-2-2-som"]
        for device in pool:
            asked = read_request({"device": device.id, "duration_s": 7200, "note": "UART bring-up"})
            reservation, _ = await create_reservation(
                session, Principal("octocat"), asked, db.clock(), inventory=inventory, per_user=100
            )
            await grant_reservations(
                session, [ReservationGrant(reservation.id, device.id, device.host or "")], db.clock()
            )
    runs = {run["name"]: run for run in await harness.push_commit(FILES)}
    run = runs[check_run_name("hil-smoke")]
    assert run["status"] == "queued"  # not yet: the reservation ends
    output = run["output"]["summary"] + (run["output"].get("text") or "")
    until = (db.clock() + timedelta(hours=2)).strftime("%Y-%m-%d %H:%M")
    reason = f"device reserved by octocat until {until}: UART bring-up"
    assert f"`modalix-bluebox` (`sdk-2-2-som`): {reason}" in output
