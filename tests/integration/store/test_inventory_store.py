"""The inventory store on a real database (SQLite always, PostgreSQL when asked): repositories hand out core
objects, every change is audited, versions stop lost updates, and an inventory file's diff applies exactly."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.store.audit import AuditEntry, Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import (
    ConflictError,
    NotFoundError,
    StaleError,
    StoredDevice,
    StoredPool,
    apply_diff,
    check_etag,
    create_device,
    create_pool,
    delete_device,
    delete_pool,
    get_device,
    get_pool,
    list_devices,
    list_pools,
    load_inventory,
    save_device,
    save_pool,
)
from kerrigan.store.label_keys import delete_label_key, label_keys, put_label_key
from kerrigan.store.models import ApiTokenRow, Base
from kerrigan.store.tokens import create_token, login_for_token, revoke_tokens, token_hash
from kerrigan.testing.builders import device, pool
from kerrigan.testing.clock import FakeClock

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "fixtures" / "inventory" / "lab.yml"

SOM = pool(
    "sdk-2-2-som",
    name="SDK 2.2 SoM",
    owners=["octocat"],
    firmware=Firmware("ga", "2.2.0"),
    labels={"sdk": "2.2.0", "form_factor": "som", "purpose": "ga-validation"},
    tags=["2.2.0-som-devkits", "ga-firmware"],
)
PCIE = pool("sdk-2-2-pcie", name="SDK 2.2 PCIe", labels={"sdk": "2.2.0", "form_factor": "pcie"})
BLUEBOX = device("modalix-bluebox", SOM.id, host="lab-a-01", labels={"uart": "enabled"}, tags=["uart-debug"])


def parse_lab() -> Inventory:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.inventory is not None, result.errors
    return result.inventory


def by_id(items: Iterable[Any]) -> dict[str, Any]:
    return {item.id: item for item in items}


def as_utc(moment: datetime) -> datetime:
    """The UTC reading of a stored time: PostgreSQL returns it with its zone, SQLite without."""
    return moment.astimezone(UTC) if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def fields(entries: Iterable[AuditEntry]) -> list[tuple[str, str, object, object]]:
    """(action, field, before, after) of each entry, in a stable order."""
    return sorted(((e.action, e.field, e.before, e.after) for e in entries), key=repr)


async def apply(db: Database, desired: Inventory, *, prune: bool = False, actor: str = "importer") -> None:
    async with db.sessions() as session, session.begin():
        current = await load_inventory(session)
        diff = diff_inventories(current, desired, prune=prune)
        await apply_diff(session, desired, diff, Change(actor, db.clock()))


async def load(db: Database) -> Inventory:
    async with db.sessions() as session:
        return await load_inventory(session)


async def seed(db: Database, *pools: Pool, devices: Iterable[Device] = ()) -> None:
    """Store pools and devices as ``setup`` at the clock's time."""
    async with db.sessions() as session, session.begin():
        change = Change("setup", db.clock())
        for item in pools:
            await create_pool(session, item, change)
        for item in devices:
            await create_device(session, item, change)


# -- the fixture lab, whole -----------------------------------------------------------------------


async def test_applying_the_fixture_lab_then_loading_gives_what_the_file_says(db: Database) -> None:
    lab = parse_lab()
    await apply(db, lab)
    loaded = await load(db)
    assert by_id(loaded.pools) == by_id(lab.pools)
    assert by_id(loaded.devices) == by_id(lab.devices)
    assert by_id(loaded.hosts) == by_id(lab.hosts)


async def test_loaded_pools_and_hosts_come_in_id_order(db: Database) -> None:
    await apply(db, parse_lab())
    loaded = await load(db)
    assert [item.id for item in loaded.pools] == sorted(item.id for item in parse_lab().pools)
    assert [item.id for item in loaded.hosts] == sorted(item.id for item in parse_lab().hosts)


async def test_diffing_the_applied_lab_against_its_file_finds_nothing(db: Database) -> None:
    lab = parse_lab()
    await apply(db, lab)
    assert not diff_inventories(await load(db), lab, prune=True)


async def test_prune_removes_the_devices_pools_and_hosts_no_longer_named(db: Database) -> None:
    lab = parse_lab()
    await apply(db, lab)
    # Drop the `default` pool (legacy-01, legacy-02) and host lab-b-02 with the device it drives.
    gone_devices = {"legacy-01", "legacy-02", "davinci-som-01"}
    desired = Inventory(
        tuple(item for item in lab.pools if item.id != "default"),
        tuple(item for item in lab.devices if item.id not in gone_devices),
        tuple(item for item in lab.hosts if item.id != "lab-b-02"),
    )
    await apply(db, desired, prune=True)
    loaded = await load(db)
    assert by_id(loaded.pools) == by_id(desired.pools)
    assert by_id(loaded.devices) == by_id(desired.devices)
    assert by_id(loaded.hosts) == by_id(desired.hosts)


async def test_without_prune_what_the_file_no_longer_names_stays(db: Database) -> None:
    lab = parse_lab()
    await apply(db, lab)
    desired = Inventory(
        tuple(item for item in lab.pools if item.id != "default"),
        tuple(item for item in lab.devices if item.pool_id != "default"),
        lab.hosts,
    )
    await apply(db, desired)
    loaded = await load(db)
    assert "default" in by_id(loaded.pools)
    assert {"legacy-01", "legacy-02"} <= set(by_id(loaded.devices))


async def test_applying_a_host_state_change_sets_it_and_audits_it(db: Database, clock: FakeClock) -> None:
    lab = parse_lab()
    await apply(db, lab)
    clock.advance(60)
    hosts = tuple(RunnerHost(h.id, online=h.id != "lab-a-01") for h in lab.hosts)
    await apply(db, replace(lab, hosts=hosts), actor="alice")
    assert by_id((await load(db)).hosts)["lab-a-01"] == RunnerHost("lab-a-01", online=False)
    async with db.sessions() as session:
        entries = await list_audit(session, actor="alice")
    changes = {(e.subject_type, e.subject_id, e.field, e.before, e.after) for e in entries}
    assert changes == {
        ("host", "lab-a-01", "online", True, False),
        ("host", "lab-b-02", "online", False, True),
    }


# -- core objects, never ORM rows ------------------------------------------------------------------


def assert_core(objects: Iterable[object]) -> None:
    for item in objects:
        assert type(item) in (Pool, Device, RunnerHost), type(item)
        assert not isinstance(item, Base)
        assert dataclasses.is_dataclass(item)
        labels = getattr(item, "labels", {})
        assert type(labels) is dict
        assert type(getattr(item, "tags", frozenset())) is frozenset


async def test_reads_return_core_dataclasses_not_orm_rows(db: Database) -> None:
    await apply(db, parse_lab())
    async with db.sessions() as session:
        inventory = await load_inventory(session)
        one_pool = await get_pool(session, "sdk-2-2-som")
        one_device = await get_device(session, "modalix-bluebox")
        devices = await list_devices(session, "sdk-2-2-som")
    # Read after the session has closed: nothing lazy is left behind.
    assert type(inventory) is Inventory
    assert_core([*inventory.pools, *inventory.devices, *inventory.hosts])
    assert_core([one_pool.pool])
    assert_core([one_device.device, one_device.pool])
    assert_core([item for stored in devices for item in (stored.device, stored.pool)])
    assert one_device.pool == by_id(parse_lab().pools)["sdk-2-2-som"]


async def test_list_pools_gives_every_pool_in_id_order_with_its_device_count(db: Database) -> None:
    lab = parse_lab()
    await apply(db, lab)
    async with db.sessions() as session:
        pools = await list_pools(session)
    assert_core([stored.pool for stored in pools])
    assert [stored.pool.id for stored in pools] == sorted(item.id for item in lab.pools)
    assert {stored.pool.id: stored.devices for stored in pools} == {
        "default": 2,
        "sdk-2-1-som": 3,
        "sdk-2-2-pcie": 3,
        "sdk-2-2-som": 4,
    }


async def test_writes_return_core_dataclasses_not_orm_rows(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        change = Change("setup", db.clock())
        created_pool = await create_pool(session, SOM, change)
        saved_pool = await save_pool(session, replace(SOM, name="renamed"), change)
        created_device = await create_device(session, BLUEBOX, change)
        saved_device = await save_device(session, replace(BLUEBOX, board="davinci"), change)
    assert [type(x) for x in (created_pool, saved_pool)] == [StoredPool, StoredPool]
    assert [type(x) for x in (created_device, saved_device)] == [StoredDevice, StoredDevice]
    assert_core([created_pool.pool, saved_pool.pool, created_device.device, saved_device.device])
    assert_core([created_device.pool, saved_device.pool])
    assert saved_pool.pool.name == "renamed"
    assert saved_device.device.board == "davinci"


# -- audited saves ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            {"name": "SDK 2.2 SoM rev B"}, [("change", "name", "SDK 2.2 SoM", "SDK 2.2 SoM rev B")], id="name"
        ),
        pytest.param(
            {"owners": ("octocat", "mona")},
            [("change", "owners", ["octocat"], ["octocat", "mona"])],
            id="owners",
        ),
        pytest.param(
            {"firmware": Firmware("beta", "2.2.1")},
            [
                ("change", "firmware.base_version", "2.2.0", "2.2.1"),
                ("change", "firmware.channel", "ga", "beta"),
            ],
            id="firmware",
        ),
        pytest.param(
            {"labels": {"sdk": "2.2.1", "form_factor": "som", "site": "lab-a"}},
            [
                ("add", "labels.site", None, "lab-a"),
                ("change", "labels.sdk", "2.2.0", "2.2.1"),
                ("remove", "labels.purpose", "ga-validation", None),
            ],
            id="labels",
        ),
        pytest.param(
            {"tags": frozenset({"2.2.0-som-devkits", "uart-debug"})},
            [("add", "tags", None, "uart-debug"), ("remove", "tags", "ga-firmware", None)],
            id="tags",
        ),
        pytest.param(
            {"name": "SoM", "owners": (), "labels": {"sdk": "2.2.0"}, "tags": frozenset()},
            [
                ("change", "name", "SDK 2.2 SoM", "SoM"),
                ("change", "owners", ["octocat"], []),
                ("remove", "labels.form_factor", "som", None),
                ("remove", "labels.purpose", "ga-validation", None),
                ("remove", "tags", "2.2.0-som-devkits", None),
                ("remove", "tags", "ga-firmware", None),
            ],
            id="several-fields",
        ),
    ],
)
async def test_save_pool_audits_each_changed_field_with_actor_time_before_and_after(
    db: Database, clock: FakeClock, edit: dict[str, Any], expected: list[tuple[str, str, object, object]]
) -> None:
    await seed(db, SOM)
    clock.advance(3600)
    async with db.sessions() as session, session.begin():
        await save_pool(session, replace(SOM, **edit), Change("alice", clock()))
    async with db.sessions() as session:
        entries = await list_audit(session, pool_id=SOM.id)
    saved, created = entries[:-1], entries[-1]
    assert (created.action, created.actor, created.field) == ("add", "setup", "")
    assert fields(saved) == sorted(expected, key=repr)
    assert {(e.actor, as_utc(e.at), e.subject_type, e.subject_id, e.pool_id) for e in saved} == {
        ("alice", clock(), "pool", SOM.id, SOM.id)
    }


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        pytest.param(
            {"state": DeviceState.MAINTENANCE, "state_reason": "reflashing"},
            [("change", "state", "available", "maintenance"), ("change", "state_reason", "", "reflashing")],
            id="state",
        ),
        pytest.param(
            {"labels": {"uart": "disabled", "sdk": "2.1.0"}},
            [("add", "labels.sdk", None, "2.1.0"), ("change", "labels.uart", "enabled", "disabled")],
            id="labels",
        ),
        pytest.param(
            {"labels": {}, "tags": frozenset({"jtag"})},
            [
                ("add", "tags", None, "jtag"),
                ("remove", "labels.uart", "enabled", None),
                ("remove", "tags", "uart-debug", None),
            ],
            id="labels-and-tags",
        ),
        pytest.param(
            {"host": "lab-a-02", "board": "davinci", "os_type": "rtos", "target_type": "som"},
            [
                ("change", "board", "modalix", "davinci"),
                ("change", "host", "lab-a-01", "lab-a-02"),
                ("change", "os_type", "linux", "rtos"),
                ("change", "target_type", "devkit", "som"),
            ],
            id="attributes",
        ),
    ],
)
async def test_save_device_audits_each_changed_field_with_actor_time_before_and_after(
    db: Database, clock: FakeClock, edit: dict[str, Any], expected: list[tuple[str, str, object, object]]
) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    clock.advance(3600)
    async with db.sessions() as session, session.begin():
        await save_device(session, replace(BLUEBOX, **edit), Change("alice", clock()))
    async with db.sessions() as session:
        entries = await list_audit(session, device_id=BLUEBOX.id)
    saved = entries[:-1]
    assert fields(saved) == sorted(expected, key=repr)
    assert {(e.actor, as_utc(e.at), e.subject_type, e.subject_id, e.pool_id) for e in saved} == {
        ("alice", clock(), "device", BLUEBOX.id, SOM.id)
    }


@pytest.mark.parametrize(
    "save",
    [
        pytest.param(lambda s, c: save_pool(s, SOM, c), id="pool"),
        pytest.param(lambda s, c: save_device(s, BLUEBOX, c), id="device"),
    ],
)
async def test_saving_an_unchanged_object_writes_no_audit_row_and_keeps_its_version(
    db: Database,
    clock: FakeClock,
    save: Callable[[AsyncSession, Change], Awaitable[StoredPool | StoredDevice]],
) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    async with db.sessions() as session:
        before = await list_audit(session)
        etags = ((await get_pool(session, SOM.id)).etag, (await get_device(session, BLUEBOX.id)).etag)
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        stored = await save(session, Change("alice", clock()))
    async with db.sessions() as session:
        assert await list_audit(session) == before
        assert ((await get_pool(session, SOM.id)).etag, (await get_device(session, BLUEBOX.id)).etag) == etags
    assert stored.etag in etags


async def test_state_change_stamps_state_changed_at_with_the_clock(db: Database, clock: FakeClock) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    clock.advance(600)
    async with db.sessions() as session, session.begin():
        await save_device(session, replace(BLUEBOX, state=DeviceState.OFFLINE), Change("alice", clock()))
    async with db.sessions() as session:
        stored = await get_device(session, BLUEBOX.id)
    assert stored.device.state is DeviceState.OFFLINE
    assert as_utc(stored.state_changed_at) == clock()


async def test_change_other_than_state_keeps_state_changed_at(db: Database, clock: FakeClock) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    created = clock()
    clock.advance(600)
    async with db.sessions() as session, session.begin():
        await save_device(session, replace(BLUEBOX, labels={"uart": "off"}), Change("alice", clock()))
    async with db.sessions() as session:
        stored = await get_device(session, BLUEBOX.id)
    assert as_utc(stored.state_changed_at) == created
    assert as_utc(stored.updated_at) == clock()


async def test_saving_a_device_with_another_pool_moves_it_there(db: Database) -> None:
    await seed(db, SOM, PCIE, devices=[BLUEBOX])
    async with db.sessions() as session, session.begin():
        await save_device(session, replace(BLUEBOX, pool_id=PCIE.id), Change("alice", db.clock()))
    async with db.sessions() as session:
        moved = await get_device(session, BLUEBOX.id)
        left = await list_devices(session, SOM.id)
        joined = await list_devices(session, PCIE.id)
        counts = {pool_id: (await get_pool(session, pool_id)).devices for pool_id in (SOM.id, PCIE.id)}
        entries = await list_audit(session, device_id=BLUEBOX.id)
    assert (moved.device.pool_id, moved.pool) == (PCIE.id, PCIE)
    assert left == []
    assert [stored.device.id for stored in joined] == [BLUEBOX.id]
    assert counts == {SOM.id: 0, PCIE.id: 1}
    assert fields(entries[:-1]) == [("change", "pool", SOM.id, PCIE.id)]


async def test_moving_a_device_to_an_unknown_pool_is_not_found_and_leaves_it(db: Database) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    async with db.sessions() as session:
        with pytest.raises(NotFoundError, match="nowhere"):
            await save_device(session, replace(BLUEBOX, pool_id="nowhere"), Change("alice", db.clock()))
    async with db.sessions() as session:
        assert (await get_device(session, BLUEBOX.id)).device.pool_id == SOM.id


# -- versions: If-Match and racing writers ---------------------------------------------------------


@pytest.mark.parametrize(
    ("if_match", "stale"),
    [
        (None, False),
        ("*", False),
        ('"pool-p-v2"', False),
        ('W/"pool-p-v2"', True),  # If-Match compares strongly: a weak tag never matches
        ('"pool-p-v1", "pool-p-v2"', False),
        ('"pool-p-v1"', True),
        ('"pool-q-v2"', True),
        ("pool-p-v2", True),
    ],
)
def test_check_etag_accepts_only_the_current_version(if_match: str | None, stale: bool) -> None:
    if stale:
        with pytest.raises(StaleError) as raised:
            check_etag('"pool-p-v2"', if_match)
        assert raised.value.current_etag == '"pool-p-v2"'
    else:
        check_etag('"pool-p-v2"', if_match)


async def test_save_pool_with_an_etag_from_before_another_save_is_stale(db: Database) -> None:
    await seed(db, SOM)
    async with db.sessions() as session:
        read = await get_pool(session, SOM.id)
    async with db.sessions() as session, session.begin():
        first = await save_pool(session, replace(SOM, name="first"), Change("alice", db.clock()))
    async with db.sessions() as session:
        with pytest.raises(StaleError) as raised:
            await save_pool(session, replace(SOM, name="second"), Change("bob", db.clock()), read.etag)
    assert raised.value.current_etag == first.etag != read.etag
    async with db.sessions() as session:
        assert (await get_pool(session, SOM.id)).pool.name == "first"


async def test_save_pool_with_the_current_etag_succeeds(db: Database) -> None:
    await seed(db, SOM)
    async with db.sessions() as session, session.begin():
        read = await get_pool(session, SOM.id)
        saved = await save_pool(session, replace(SOM, name="renamed"), Change("alice", db.clock()), read.etag)
    assert saved.pool.name == "renamed"
    assert saved.etag != read.etag


async def test_device_etag_goes_stale_when_its_pool_changes(db: Database) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    async with db.sessions() as session:
        read = await get_device(session, BLUEBOX.id)
    async with db.sessions() as session, session.begin():
        await save_pool(session, replace(SOM, labels={"sdk": "2.3.0"}), Change("alice", db.clock()))
    async with db.sessions() as session:
        with pytest.raises(StaleError):
            await save_device(
                session, replace(BLUEBOX, board="davinci"), Change("bob", db.clock()), read.etag
            )


async def test_delete_pool_with_a_stale_etag_is_refused_and_keeps_the_pool(db: Database) -> None:
    await seed(db, SOM)
    async with db.sessions() as session:
        read = await get_pool(session, SOM.id)
    async with db.sessions() as session, session.begin():
        await save_pool(session, replace(SOM, name="renamed"), Change("alice", db.clock()))
    async with db.sessions() as session:
        with pytest.raises(StaleError):
            await delete_pool(session, SOM.id, Change("bob", db.clock()), read.etag)
    async with db.sessions() as session:
        assert (await get_pool(session, SOM.id)).pool.name == "renamed"


async def test_second_of_two_racing_pool_saves_fails_instead_of_overwriting(db: Database) -> None:
    # Each writer sends the version it read, as an API client sends If-Match: both read, then both write.
    await seed(db, SOM)
    async with db.sessions() as first, db.sessions() as second:
        read_first = await get_pool(first, SOM.id)
        read_second = await get_pool(second, SOM.id)
        won = await save_pool(
            first, replace(read_first.pool, name="first"), Change("alice", db.clock()), read_first.etag
        )
        await first.commit()
        with pytest.raises(StaleError) as raised:
            await save_pool(
                second, replace(read_second.pool, name="second"), Change("bob", db.clock()), read_second.etag
            )
        await second.rollback()
    assert raised.value.current_etag == won.etag
    async with db.sessions() as session:
        assert (await get_pool(session, SOM.id)).pool.name == "first"
        assert {e.actor for e in await list_audit(session, pool_id=SOM.id)} == {"setup", "alice"}


# -- rules of the inventory ------------------------------------------------------------------------


async def test_deleting_a_pool_that_still_has_devices_is_a_conflict(db: Database) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    async with db.sessions() as session:
        with pytest.raises(ConflictError, match="still has 1 device"):
            await delete_pool(session, SOM.id, Change("alice", db.clock()))
    async with db.sessions() as session:
        assert (await get_pool(session, SOM.id)).devices == 1


async def test_deleting_an_empty_pool_removes_it_and_audits_it(db: Database) -> None:
    await seed(db, SOM)
    async with db.sessions() as session, session.begin():
        await delete_pool(session, SOM.id, Change("alice", db.clock()))
    async with db.sessions() as session:
        assert (await load_inventory(session)).pools == ()
        latest = (await list_audit(session, pool_id=SOM.id))[0]
    assert (latest.actor, latest.action, latest.subject_id, latest.after) == ("alice", "remove", SOM.id, None)
    assert latest.before["labels"] == dict(SOM.labels)


@pytest.mark.parametrize(
    "create",
    [
        pytest.param(lambda s, c: create_pool(s, replace(SOM, name="again"), c), id="pool"),
        pytest.param(lambda s, c: create_device(s, replace(BLUEBOX, board="again"), c), id="device"),
    ],
)
async def test_creating_an_existing_id_again_is_a_conflict(
    db: Database, create: Callable[[AsyncSession, Change], Awaitable[object]]
) -> None:
    await seed(db, SOM, devices=[BLUEBOX])
    async with db.sessions() as session:
        with pytest.raises(ConflictError, match="already exists"):
            await create(session, Change("alice", db.clock()))
    async with db.sessions() as session:
        assert (await get_pool(session, SOM.id)).pool == SOM
        assert (await get_device(session, BLUEBOX.id)).device == BLUEBOX


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s, c: get_pool(s, "nowhere"), id="get_pool"),
        pytest.param(lambda s, c: get_device(s, "nothing"), id="get_device"),
        pytest.param(lambda s, c: list_devices(s, "nowhere"), id="list_devices"),
        pytest.param(lambda s, c: save_pool(s, pool("nowhere"), c), id="save_pool"),
        pytest.param(lambda s, c: save_device(s, device("nothing", SOM.id), c), id="save_device"),
        pytest.param(lambda s, c: create_device(s, device("nothing", "nowhere"), c), id="create_device"),
        pytest.param(lambda s, c: delete_pool(s, "nowhere", c), id="delete_pool"),
        pytest.param(lambda s, c: delete_device(s, "nothing", c), id="delete_device"),
        pytest.param(lambda s, c: delete_label_key(s, "nothing", c), id="delete_label_key"),
    ],
)
async def test_an_unknown_id_is_not_found(
    db: Database, call: Callable[[AsyncSession, Change], Awaitable[object]]
) -> None:
    await seed(db, SOM)
    async with db.sessions() as session:
        with pytest.raises(NotFoundError, match=r"nowhere|nothing"):
            await call(session, Change("alice", db.clock()))


# -- API tokens ------------------------------------------------------------------------------------


async def test_a_created_token_is_stored_only_as_its_hash(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        token = await create_token(session, "octocat", db.clock())
    async with db.sessions() as session:
        rows = (await session.scalars(select(ApiTokenRow))).all()
    assert [(row.login, row.token_hash) for row in rows] == [("octocat", token_hash(token))]
    stored = [str(getattr(rows[0], column.key)) for column in ApiTokenRow.__table__.columns]
    assert not any(token in value for value in stored)


async def test_login_for_token_finds_the_login_of_a_live_token_only(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        token = await create_token(session, "octocat", db.clock())
    async with db.sessions() as session:
        assert await login_for_token(session, token) == "octocat"
        assert await login_for_token(session, token + "x") is None
        assert await login_for_token(session, token_hash(token)) is None


async def test_revoke_tokens_revokes_every_live_token_of_that_login_only(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        tokens = [await create_token(session, "octocat", db.clock()) for _ in range(2)]
        other = await create_token(session, "hubot", db.clock())
    async with db.sessions() as session, session.begin():
        assert await revoke_tokens(session, "octocat", db.clock()) == 2
    async with db.sessions() as session, session.begin():
        assert [await login_for_token(session, token) for token in tokens] == [None, None]
        assert await login_for_token(session, other) == "hubot"
        assert await revoke_tokens(session, "octocat", db.clock()) == 0


async def test_api_tokens_made_and_revoked_are_in_the_audit_log_never_the_token(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        token = await create_token(session, "octocat", db.clock(), actor="olga")
    async with db.sessions() as session, session.begin():
        await revoke_tokens(session, "octocat", db.clock(), actor="olga")
    async with db.sessions() as session:
        audit = await list_audit(session)
    made = f"token made {db.clock():%Y-%m-%d %H:%M}"
    assert [
        (e.actor, e.action, e.subject_type, e.subject_id, e.before, e.after) for e in reversed(audit)
    ] == [
        ("olga", "add", "api_token", "octocat", None, made),
        ("olga", "remove", "api_token", "octocat", made, None),
    ]
    assert not [e for e in audit if token in f"{e.before}{e.after}"]


# -- the label key registry ------------------------------------------------------------------------


async def test_approving_a_new_label_key_stores_it_and_audits_who_added_it(
    db: Database, clock: FakeClock
) -> None:
    async with db.sessions() as session, session.begin():
        assert await put_label_key(session, "sdk", "SDK release", Change("admin", clock())) is True
    async with db.sessions() as session:
        assert await label_keys(session) == {"sdk": "SDK release"}
        entries = await list_audit(session)
    assert [(e.actor, as_utc(e.at), e.subject_type, e.subject_id) for e in entries] == [
        ("admin", clock(), "label_key", "sdk")
    ]
    assert fields(entries) == [("add", "description", None, "SDK release")]


async def test_changing_a_label_key_description_audits_before_and_after(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await put_label_key(session, "sdk", "SDK release", Change("admin", db.clock()))
    async with db.sessions() as session, session.begin():
        assert await put_label_key(session, "sdk", "SDK version", Change("root", db.clock())) is False
    async with db.sessions() as session:
        assert await label_keys(session) == {"sdk": "SDK version"}
        entries = await list_audit(session, actor="root")
    assert fields(entries) == [("change", "description", "SDK release", "SDK version")]


async def test_approving_a_label_key_again_unchanged_audits_nothing(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await put_label_key(session, "sdk", "SDK release", Change("admin", db.clock()))
    async with db.sessions() as session, session.begin():
        assert await put_label_key(session, "sdk", "SDK release", Change("root", db.clock())) is False
    async with db.sessions() as session:
        assert await list_audit(session, actor="root") == []


async def test_withdrawing_a_label_key_removes_it_and_audits_its_description(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await put_label_key(session, "sdk", "SDK release", Change("admin", db.clock()))
        await put_label_key(session, "uart", "UART wired", Change("admin", db.clock()))
    async with db.sessions() as session, session.begin():
        await delete_label_key(session, "sdk", Change("root", db.clock()))
    async with db.sessions() as session:
        assert await label_keys(session) == {"uart": "UART wired"}
        entries = await list_audit(session, actor="root")
    assert [(e.subject_type, e.subject_id) for e in entries] == [("label_key", "sdk")]
    assert fields(entries) == [("remove", "description", "SDK release", None)]
