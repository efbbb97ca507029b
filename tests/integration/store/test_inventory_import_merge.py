"""``kerrigan inventory import`` as a three-way merge, as a lab runs it: the file is imported, pool owners
edit on the web (through the store functions the web API calls), runners report, and it is imported again.
Real processes on a real database (SQLite, and PostgreSQL when asked)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kerrigan.core.inventory import DeviceState, Inventory
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import get_device, get_pool, load_inventory, save_pool, set_state
from kerrigan.store.inventory_imports import last_import
from kerrigan.store.runners import record_report
from tests.integration.store.test_inventory_cli import (
    LAB,
    Kerrigan,
    by_id,
    parse_lab,
    run_kerrigan,
    seed_lab,
    snapshot,
    write_inventory,
)

sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)

POOL = "sdk-2-2-som"  # purpose: ga-validation in the file
DEVICE = "modalix-bluebox"  # available in the file
LIVE_HOST = "lab-b-02"  # `state: offline` in the file


@pytest.fixture
def kerrigan(db: Database, database_url: str, tmp_path: Path) -> Kerrigan:
    return Kerrigan(database_url, tmp_path)


async def edit_on_the_web(db: Database, *, purpose: str | None = None) -> None:
    """What a pool owner does on the web after the import: a label on their pool (and, with ``purpose``,
    that label changed), a board put into maintenance with a reason; and the runner on the host the file
    calls offline comes up and reports."""
    change = Change("octocat", db.clock())
    async with db.sessions() as session, session.begin():
        stored = await get_pool(session, POOL, lock=True)
        labels = {**stored.pool.labels, "site": "lab-a"}
        if purpose is not None:
            labels["purpose"] = purpose
        await save_pool(session, dataclasses.replace(stored.pool, labels=labels), change)
        await set_state(
            session, DEVICE, DeviceState.MAINTENANCE, "reflashing the bootloader", until=None, change=change
        )
        await record_report(session, LIVE_HOST, db.clock(), resources={"vcpus": 8}, device_states={})


async def assert_web_edits_kept(db: Database) -> None:
    async with db.sessions() as session:
        pool = (await get_pool(session, POOL)).pool
        device = (await get_device(session, DEVICE)).device
        hosts = by_id((await load_inventory(session)).hosts)
    assert pool.labels["site"] == "lab-a"
    assert (device.state, device.state_reason) == (DeviceState.MAINTENANCE, "reflashing the bootloader")
    assert hosts[LIVE_HOST].online is True


def with_purpose(lab: Inventory, purpose: str) -> Inventory:
    pools = by_id(lab.pools)
    pools[POOL] = dataclasses.replace(pools[POOL], labels={**pools[POOL].labels, "purpose": purpose})
    return dataclasses.replace(lab, pools=tuple(pools.values()))


async def test_reimporting_the_unchanged_file_keeps_the_web_edits_and_the_live_host(
    kerrigan: Kerrigan, db: Database
) -> None:
    first = kerrigan("inventory", "import", "--actor", "alice", LAB)
    assert first.returncode == 0, first.stderr
    await edit_on_the_web(db)
    before = await snapshot(db)
    again = kerrigan("inventory", "import", "--actor", "alice", LAB)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == ["no changes: the database already has every change the file makes"]
    await assert_web_edits_kept(db)
    assert await snapshot(db) == before  # not a row of the audit log either
    async with db.sessions() as session:
        base = await last_import(session)
        audit = await list_audit(session, actor="alice", limit=1000)
    assert base is not None
    assert (base.actor, base.inventory) == ("alice", parse_lab())
    assert audit  # the first import's additions, named after who imported
    assert not await list_audit_for(db, "inventory-import")


async def list_audit_for(db: Database, actor: str) -> list[object]:
    async with db.sessions() as session:
        return list(await list_audit(session, actor=actor, limit=1000))


async def test_a_field_the_file_changes_is_applied_and_the_web_edits_stay(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    lab = await seed_lab(db)
    await edit_on_the_web(db)
    edited = write_inventory(tmp_path / "edited.yml", with_purpose(lab, "nightly"))
    done = kerrigan("inventory", "import", "--actor", "bob", edited)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"~ pool {POOL} labels.purpose: ga-validation -> nightly",
        "applied: 1 pools changed",
    ]
    await assert_web_edits_kept(db)
    async with db.sessions() as session:
        assert (await get_pool(session, POOL)).pool.labels["purpose"] == "nightly"
        by_bob = await list_audit(session, actor="bob")
        base = await last_import(session)
    assert [(e.subject_id, e.field, e.before, e.after) for e in by_bob] == [
        (POOL, "labels.purpose", "ga-validation", "nightly")
    ]
    assert base is not None
    assert base.inventory.pools_by_id[POOL].labels["purpose"] == "nightly"  # the new base


async def test_a_label_changed_both_in_the_file_and_on_the_web_is_a_conflict_until_forced(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    lab = await seed_lab(db)
    await edit_on_the_web(db, purpose="nightly")
    edited = write_inventory(tmp_path / "edited.yml", with_purpose(lab, "release"))
    conflict = (
        f'! pool {POOL} labels.purpose: last import "ga-validation", file "release", database "nightly"'
    )
    before = await snapshot(db)

    dry = kerrigan("inventory", "import", "--dry-run", edited)
    assert dry.returncode == 1
    assert dry.stdout.splitlines() == [conflict]
    assert "1 conflict(s)" in dry.stderr
    assert await snapshot(db) == before

    refused = kerrigan("inventory", "import", "--actor", "carol", edited)
    assert refused.returncode == 1
    assert conflict in refused.stdout.splitlines()
    assert "nothing was changed" in refused.stderr
    assert "--force" in refused.stderr
    assert await snapshot(db) == before

    forced = kerrigan("inventory", "import", "--force", "--actor", "carol", edited)
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.splitlines() == [
        f"~ pool {POOL} labels.purpose: nightly -> release",
        conflict,
        "applied: 1 pools changed; 1 conflict(s) resolved the file's way (--force)",
    ]
    await assert_web_edits_kept(db)  # the other edits were not in conflict: kept
    async with db.sessions() as session:
        assert (await get_pool(session, POOL)).pool.labels["purpose"] == "release"
        by_carol = await list_audit(session, actor="carol")
    assert [(e.field, e.before, e.after) for e in by_carol] == [("labels.purpose", "nightly", "release")]


@sqlite_only
async def test_without_actor_the_audit_log_names_the_user_running_the_command(
    db: Database, database_url: str, tmp_path: Path
) -> None:
    env = {"KERRIGAN_DATABASE_URL": database_url, "LOGNAME": "lab-admin", "USER": "lab-admin"}
    done = run_kerrigan("inventory", "import", LAB, cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    async with db.sessions() as session:
        actors = {entry.actor for entry in await list_audit(session, limit=1000)}
        base = await last_import(session)
    assert actors == {"lab-admin"}
    assert base is not None
    assert base.actor == "lab-admin"


@sqlite_only
async def test_a_filled_database_without_a_base_refuses_every_difference_until_its_export_is_imported(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db, base=False)  # imported before the base was stored
    await edit_on_the_web(db)
    before = await snapshot(db)
    refused = kerrigan("inventory", "import", LAB)
    assert refused.returncode == 1
    assert set(refused.stdout.splitlines()) == {
        f"! host {LIVE_HOST} online: last import (unknown), file false, database true",
        f'! pool {POOL} labels.site: last import (unknown), file (absent), database "lab-a"',
        f'! device {DEVICE} state: last import (unknown), file "available", database "maintenance"',
        f"! device {DEVICE} state_reason: last import (unknown), file "
        '"", database "reflashing the bootloader"',
    }
    assert "no earlier import" in refused.stderr
    assert await snapshot(db) == before
    # The way out the message names: export the database, and import that as the first base.
    exported = tmp_path / "exported.yml"
    exported.write_text(kerrigan("inventory", "export").stdout, encoding="utf-8")
    adopted = kerrigan("inventory", "import", exported)
    assert (adopted.returncode, adopted.stdout.startswith("no changes")) == (0, True), adopted.stderr
    async with db.sessions() as session:
        assert await last_import(session) is not None


@sqlite_only
async def test_an_invalid_file_leaves_the_base_as_it_was(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db)
    path = tmp_path / "invalid.yml"
    path.write_text(
        "pools:\n  - id: p1\n    devices:\n      - {id: d1, board: modalix, host: h1, health: bad}\n"
    )
    done = kerrigan("inventory", "import", path)
    assert done.returncode == 2
    assert f"{path}:4:" in done.stderr
    assert "health: must be a mapping" in done.stderr
    async with db.sessions() as session:
        base = await last_import(session)
    assert base is not None
    assert base.inventory == parse_lab()
