"""``kerrigan explain MANIFEST`` without ``--inventory``: against the lab's database, as the server sees it
now, so a bad device, an owner's maintenance and a paused host are in its reasons."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import update

from kerrigan.core.device_status import HostPause
from kerrigan.core.inventory import DeviceState
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.inventory import set_state
from kerrigan.store.models import DeviceRow
from kerrigan.store.runners import set_pause
from tests.integration.store.test_inventory_cli import LAB, Kerrigan, kerrigan  # noqa: F401 -- the fixture

MANIFESTS = LAB.parents[1] / "manifests"


async def test_explain_against_the_lab_database_names_health_maintenance_and_pauses(
    db: Database,
    kerrigan: Kerrigan,  # noqa: F811
    tmp_path: Path,
) -> None:
    assert kerrigan("inventory", "import", LAB, "--actor", "alice").returncode == 0
    async with db.sessions() as session, session.begin():
        await session.execute(
            update(DeviceRow)
            .where(DeviceRow.id == "modalix-bluebox")
            .values(health="bad", health_reason="health check failed", health_job_pk=812)
        )
        await set_state(
            session,
            "modalix-redbox",
            DeviceState.MAINTENANCE,
            "reflashing the bootloader",
            until=None,
            change=Change("hubot", db.clock()),
        )
        await set_pause(
            session,
            "lab-a-02",
            HostPause("kernel upgrade", "octocat", db.clock()),
            Change("octocat", db.clock()),
        )
    done = kerrigan("explain", MANIFESTS / "hil-smoke.yml", "--format", "json")
    assert done.returncode == 1, done.stderr  # no eligible device now: not yet
    document = json.loads(done.stdout)
    words = json.dumps(document)
    assert "device health bad" in words
    assert "health check failed (job 812)" in words
    assert "by hubot: reflashing the bootloader" in words
    assert "runner host lab-a-02 paused by octocat: kernel upgrade" in words
    text = kerrigan("explain", MANIFESTS / "hil-smoke.yml")
    assert "device health bad" in text.stdout
    with_file = kerrigan("explain", "--inventory", LAB, MANIFESTS / "hil-smoke.yml", "--format", "json")
    assert "device health bad" not in with_file.stdout  # the file knows nothing of the lab's live state
