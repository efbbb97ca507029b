"""The import's three-way merge: base (last import), file (now), database (now), field by field."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pytest

from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost
from kerrigan.core.inventory_diff import ChangeKind
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.inventory_merge import UNKNOWN, Conflict, MergePlan, Whole, merge_inventory
from kerrigan.testing.builders import device, pool

LAB = Path(__file__).parents[3] / "fixtures" / "inventory" / "lab.yml"

SOM = pool(
    "som",
    name="SoM",
    owners=["octocat"],
    firmware=Firmware("ga", "2.2.0"),
    labels={"sdk": "2.2.0", "purpose": "ci"},
    tags=["ga-firmware", "uart-debug"],
)
BLUEBOX = device("bluebox", "som", host="lab-a-01", labels={"uart": "enabled"}, tags=["usb"])
REDBOX = device("redbox", "som", host="lab-a-02")
HOSTS = (RunnerHost("lab-a-01"), RunnerHost("lab-a-02", online=False))
BASE = Inventory((SOM,), (BLUEBOX, REDBOX), HOSTS)


def lab(
    pools: Iterable[Pool] = (SOM,),
    devices: Iterable[Device] = (BLUEBOX, REDBOX),
    hosts: Iterable[RunnerHost] = HOSTS,
) -> Inventory:
    return Inventory(tuple(pools), tuple(devices), tuple(hosts))


def with_pool(**fields: object) -> Inventory:
    return lab(pools=[replace(SOM, **fields)])  # type: ignore[arg-type]


def with_bluebox(**fields: object) -> Inventory:
    return lab(devices=[replace(BLUEBOX, **fields), REDBOX])  # type: ignore[arg-type]


def changes(plan: MergePlan) -> set[str]:
    return {str(change) for change in plan.diff.changes}


# -- an unchanged file ----------------------------------------------------------------------------


def test_an_unchanged_file_keeps_every_edit_made_in_the_database_since() -> None:
    database = lab(
        pools=[replace(SOM, labels={**SOM.labels, "site": "a"}, tags=SOM.tags | {"web"})],
        devices=[replace(BLUEBOX, state=DeviceState.MAINTENANCE, state_reason="reflashing"), REDBOX],
        hosts=[HOSTS[0], replace(HOSTS[1], online=True)],  # its runner reports: online
    )
    plan = merge_inventory(BASE, BASE, database)
    assert (plan.diff.changes, plan.conflicts) == ((), ())
    assert plan.merged == database


# -- values ----------------------------------------------------------------------------------------


def test_a_value_the_file_changed_is_applied_where_the_database_still_has_the_base_value() -> None:
    plan = merge_inventory(BASE, with_bluebox(board="davinci"), BASE)
    assert changes(plan) == {"~ device bluebox board: modalix -> davinci"}
    assert plan.conflicts == ()


def test_a_value_the_database_already_changed_the_files_way_is_no_change() -> None:
    edited = with_bluebox(state=DeviceState.MAINTENANCE, state_reason="reflashing")
    plan = merge_inventory(BASE, edited, edited)
    assert (plan.diff.changes, plan.conflicts) == ((), ())


def test_a_value_both_changed_differently_is_a_conflict_the_database_keeps_without_force() -> None:
    file = with_pool(name="SoM boards")
    database = with_pool(name="SoM (lab A)")
    plan = merge_inventory(BASE, file, database)
    assert plan.conflicts == (Conflict("pool", "som", "name", "SoM", "SoM boards", "SoM (lab A)"),)
    assert plan.merged.pools_by_id["som"].name == "SoM (lab A)"
    assert plan.diff.changes == ()


def test_force_applies_the_files_value_of_a_conflict() -> None:
    plan = merge_inventory(BASE, with_pool(name="SoM boards"), with_pool(name="SoM (lab A)"), force=True)
    assert len(plan.conflicts) == 1
    assert changes(plan) == {"~ pool som name: SoM (lab A) -> SoM boards"}


def test_device_state_merges_as_a_value_so_the_file_can_end_a_maintenance_it_started() -> None:
    base = with_bluebox(state=DeviceState.MAINTENANCE, state_reason="reflashing")
    plan = merge_inventory(base, BASE, base)
    assert changes(plan) == {
        "~ device bluebox state: maintenance -> available",
        "~ device bluebox state_reason: reflashing -> ",
    }


def test_a_host_the_file_did_not_change_keeps_what_its_runner_reports() -> None:
    database = lab(hosts=[replace(HOSTS[0], online=False), replace(HOSTS[1], online=True)])
    plan = merge_inventory(BASE, BASE, database)
    assert plan.diff.changes == ()
    assert [host.online for host in plan.merged.hosts] == [False, True]


def test_a_host_the_file_turns_offline_while_the_database_has_the_base_value_goes_offline() -> None:
    file = lab(hosts=[replace(HOSTS[0], online=False), HOSTS[1]])
    plan = merge_inventory(BASE, file, BASE)
    assert changes(plan) == {"~ host lab-a-01 online: True -> False"}


# -- maps, key by key; sets, item by item ---------------------------------------------------------


def test_labels_merge_key_by_key() -> None:
    file = with_pool(labels={"sdk": "2.2.1", "owner": "lab-a"})  # purpose removed, sdk changed, owner added
    database = with_pool(labels={"sdk": "2.2.0", "purpose": "ci", "site": "a"})  # site added on the web
    plan = merge_inventory(BASE, file, database)
    assert plan.conflicts == ()
    assert plan.merged.pools_by_id["som"].labels == {"sdk": "2.2.1", "site": "a", "owner": "lab-a"}


def test_a_label_the_file_removed_but_the_database_changed_is_a_conflict() -> None:
    file = with_pool(labels={"sdk": "2.2.0"})
    database = with_pool(labels={"sdk": "2.2.0", "purpose": "nightly"})
    plan = merge_inventory(BASE, file, database)
    assert plan.conflicts == (Conflict("pool", "som", "labels.purpose", "ci", None, "nightly"),)
    assert plan.merged.pools_by_id["som"].labels == {"sdk": "2.2.0", "purpose": "nightly"}


def test_a_label_both_set_to_different_values_is_a_conflict_naming_the_key() -> None:
    plan = merge_inventory(
        BASE, with_bluebox(labels={"uart": "disabled"}), with_bluebox(labels={"uart": "broken"})
    )
    assert [str(c) for c in plan.conflicts] == [
        '! device bluebox labels.uart: last import "enabled", file "disabled", database "broken"'
    ]


def test_tags_merge_item_by_item_and_never_conflict_while_there_is_a_base() -> None:
    file = with_pool(tags=frozenset({"ga-firmware", "som"}))  # uart-debug removed, som added
    database = with_pool(tags=frozenset({"ga-firmware", "uart-debug", "web"}))  # web added
    plan = merge_inventory(BASE, file, database)
    assert plan.conflicts == ()
    assert plan.merged.pools_by_id["som"].tags == {"ga-firmware", "som", "web"}


def test_owners_merge_item_by_item_keeping_the_database_order() -> None:
    file = with_pool(owners=("octocat", "mona"))
    database = with_pool(owners=("hubot", "octocat"))
    plan = merge_inventory(BASE, file, database)
    assert plan.merged.pools_by_id["som"].owners == ("hubot", "octocat", "mona")


def test_repositories_merge_item_by_item() -> None:
    base = with_pool(repositories=("octo/a", "octo/b"))
    file = with_pool(repositories=("octo/a",))
    database = with_pool(repositories=("octo/a", "octo/b", "octo/c"))
    plan = merge_inventory(base, file, database)
    assert plan.merged.pools_by_id["som"].repositories == ("octo/a", "octo/c")


# -- objects added -----------------------------------------------------------------------------------


def test_an_object_the_file_adds_is_added() -> None:
    greenbox = device("greenbox", "som", host="lab-a-03")
    plan = merge_inventory(BASE, lab(devices=[BLUEBOX, REDBOX, greenbox]), BASE)
    assert changes(plan) == {"+ device greenbox"}
    assert plan.merged.devices_by_id["greenbox"] == greenbox


def test_an_added_object_the_database_has_already_conflicts_only_where_they_differ() -> None:
    greenbox = device("greenbox", "som", labels={"uart": "enabled", "usb": "2"})
    database = lab(devices=[BLUEBOX, REDBOX, replace(greenbox, labels={"uart": "enabled", "usb": "3"})])
    plan = merge_inventory(BASE, lab(devices=[BLUEBOX, REDBOX, greenbox]), database)
    assert plan.conflicts == (Conflict("device", "greenbox", "labels.usb", UNKNOWN, "2", "3"),)


# -- objects removed -------------------------------------------------------------------------------


def test_an_object_the_file_dropped_stays_without_prune_and_stays_in_the_next_base() -> None:
    file = lab(devices=[BLUEBOX])
    plan = merge_inventory(BASE, file, BASE)
    assert plan.diff.changes == ()
    assert "redbox" in plan.merged.devices_by_id
    assert plan.next_base.devices_by_id["redbox"] == REDBOX  # so a later --prune still knows it


def test_prune_removes_an_object_the_file_dropped_that_the_database_has_as_it_was() -> None:
    plan = merge_inventory(BASE, lab(devices=[BLUEBOX]), BASE, prune=True)
    assert changes(plan) == {"- device redbox"}
    assert plan.conflicts == ()
    assert "redbox" not in plan.next_base.devices_by_id


def test_a_later_prune_removes_what_an_import_without_prune_left_behind() -> None:
    file = lab(devices=[BLUEBOX])
    first = merge_inventory(BASE, file, BASE)
    second = merge_inventory(first.next_base, file, first.merged, prune=True)
    assert changes(second) == {"- device redbox"}


def test_pruning_an_object_the_database_changed_since_is_a_conflict_force_removes_it() -> None:
    database = lab(devices=[BLUEBOX, replace(REDBOX, state=DeviceState.MAINTENANCE, state_reason="x")])
    plan = merge_inventory(BASE, lab(devices=[BLUEBOX]), database, prune=True)
    assert [str(c) for c in plan.conflicts] == [
        "! device redbox: last import present, file absent, database changed: state, state_reason"
    ]
    assert plan.diff.changes == ()
    forced = merge_inventory(BASE, lab(devices=[BLUEBOX]), database, prune=True, force=True)
    assert changes(forced) == {"- device redbox"}


def test_pruning_an_object_never_imported_is_a_conflict() -> None:
    added_on_the_web = device("web-box", "som")
    database = lab(devices=[BLUEBOX, REDBOX, added_on_the_web])
    plan = merge_inventory(BASE, BASE, database, prune=True)
    assert plan.conflicts == (Conflict("device", "web-box", "", UNKNOWN, Whole("absent"), Whole("present")),)
    assert merge_inventory(BASE, BASE, database).conflicts == ()  # without --prune it is simply kept


def test_prune_keeps_a_pool_a_device_stays_in() -> None:
    lab_b = pool("lab-b")
    base = lab(pools=[SOM, lab_b])
    database = lab(
        pools=[SOM, lab_b], devices=[BLUEBOX, replace(REDBOX, pool_id="lab-b")]
    )  # moved on the web
    plan = merge_inventory(base, BASE, database, prune=True)
    assert plan.conflicts == ()
    assert "lab-b" in plan.merged.pools_by_id
    assert plan.diff.changes == ()


def test_prune_keeps_a_host_the_files_devices_name_and_removes_one_the_base_named() -> None:
    database = lab(hosts=[*HOSTS, RunnerHost("lab-a-03")])
    base = lab(devices=[BLUEBOX, REDBOX, device("old", "som", host="lab-a-03")])
    # lab-a-03 was named only by a device in the base; the file drops both.
    plan = merge_inventory(
        base, BASE, replace(database, devices=(*database.devices, base.devices[2])), prune=True
    )
    assert changes(plan) == {"- device old", "- host lab-a-03"}
    # lab-a-02 leaves the hosts section but redbox still runs there: it stays.
    file = lab(hosts=[HOSTS[0]])
    assert merge_inventory(BASE, file, BASE, prune=True).diff.changes == ()


def test_an_object_the_database_removed_stays_removed_while_the_file_is_as_it_was() -> None:
    database = lab(devices=[BLUEBOX])
    plan = merge_inventory(BASE, BASE, database)
    assert (plan.diff.changes, plan.conflicts) == ((), ())


def test_an_object_the_database_removed_and_the_file_changed_is_a_conflict_force_adds_it() -> None:
    database = lab(devices=[BLUEBOX])
    file = lab(devices=[BLUEBOX, replace(REDBOX, board="davinci")])
    plan = merge_inventory(BASE, file, database)
    assert plan.conflicts == (
        Conflict("device", "redbox", "", Whole("present"), Whole("changed: board"), Whole("absent")),
    )
    assert changes(merge_inventory(BASE, file, database, force=True)) == {"+ device redbox"}


def test_a_pool_the_database_removed_that_a_new_device_needs_is_a_conflict() -> None:
    lab_b = pool("lab-b")
    base = lab(pools=[SOM, lab_b])
    file = lab(pools=[SOM, lab_b], devices=[BLUEBOX, REDBOX, device("new", "lab-b")])
    plan = merge_inventory(base, file, BASE)
    assert [(c.subject_type, c.subject_id, c.field) for c in plan.conflicts] == [("pool", "lab-b", "")]
    forced = merge_inventory(base, file, BASE, force=True)
    assert changes(forced) == {"+ pool lab-b", "+ device new"}


# -- without a base --------------------------------------------------------------------------------


def test_without_a_base_everything_goes_into_an_empty_database() -> None:
    plan = merge_inventory(None, BASE, Inventory((), (), ()))
    assert plan.conflicts == ()
    assert {(c.kind, c.subject_id) for c in plan.diff.changes} == {
        (ChangeKind.ADD, "som"),
        (ChangeKind.ADD, "bluebox"),
        (ChangeKind.ADD, "redbox"),
        (ChangeKind.ADD, "lab-a-01"),
        (ChangeKind.ADD, "lab-a-02"),
    }


def test_without_a_base_a_database_that_matches_the_file_has_nothing_to_do() -> None:
    plan = merge_inventory(None, BASE, BASE)
    assert (plan.diff.changes, plan.conflicts) == ((), ())
    assert plan.next_base == BASE


def test_without_a_base_every_difference_from_a_filled_database_is_a_conflict() -> None:
    database = lab(
        pools=[replace(SOM, labels={**SOM.labels, "site": "a"}, tags=SOM.tags | {"web"})],
        devices=[replace(BLUEBOX, state=DeviceState.MAINTENANCE), REDBOX],
        hosts=[HOSTS[0], replace(HOSTS[1], online=True)],
    )
    plan = merge_inventory(None, BASE, database)
    assert [str(c) for c in plan.conflicts] == [
        "! host lab-a-02 online: last import (unknown), file false, database true",
        '! pool som labels.site: last import (unknown), file (absent), database "a"',
        '! pool som tags: last import (unknown), file ["ga-firmware", "uart-debug"], '
        'database ["ga-firmware", "uart-debug", "web"]',
        '! device bluebox state: last import (unknown), file "available", database "maintenance"',
    ]
    assert plan.diff.changes == ()
    assert plan.merged == database
    assert merge_inventory(None, BASE, database, force=True).merged == BASE


def test_without_a_base_prune_conflicts_with_whatever_the_file_does_not_name() -> None:
    plan = merge_inventory(None, lab(devices=[BLUEBOX]), BASE, prune=True)
    assert [(c.subject_id, c.base) for c in plan.conflicts] == [("redbox", UNKNOWN)]


# -- the real lab ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fixture_lab() -> Inventory:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.inventory is not None
    return result.inventory


def test_reimporting_the_lab_keeps_the_offline_hosts_runner_online(fixture_lab: Inventory) -> None:
    # lab-b-02 is `state: offline` in the file; since, a runner came up there and reports.
    hosts = tuple(replace(h, online=True) if h.id == "lab-b-02" else h for h in fixture_lab.hosts)
    database = replace(fixture_lab, hosts=hosts)
    plan = merge_inventory(fixture_lab, fixture_lab, database)
    assert plan.diff.changes == ()
    assert {h.id: h.online for h in plan.merged.hosts}["lab-b-02"] is True
