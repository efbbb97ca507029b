"""Health checks in the inventory file: read with every problem placed, written back, diffed and merged."""

from __future__ import annotations

import dataclasses
import textwrap
from datetime import UTC, datetime, timedelta

import pytest
import yaml

from kerrigan.core.device_status import DeviceHealth, Health
from kerrigan.core.durations import duration_text
from kerrigan.core.health_checks import (
    HealthCheck,
    HealthCheckError,
    health_check_from_document,
    parse_duration,
)
from kerrigan.core.inventory import Inventory, health_check_of
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import (
    InventoryResult,
    inventory_document,
    inventory_from_document,
    parse_inventory,
)
from kerrigan.core.inventory_merge import merge_inventory
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import LabelRequirement, Requirements
from kerrigan.testing.builders import device, pool

FILE = "lab/inventory.yml"


def parse(text: str) -> InventoryResult:
    return parse_inventory(textwrap.dedent(text), FILE)


def lab(pool_check: str = "", device_check: str = "") -> InventoryResult:
    return parse(
        f"""\
        pools:
          - id: p1
            {pool_check}
            devices:
              - id: d1
                board: modalix
                host: h1
                {device_check}
              - id: d2
                board: modalix
                host: h1
        """
    )


def test_a_pools_health_check_is_read_with_its_defaults() -> None:
    result = lab(pool_check='health_check: {run: "/opt/lab/health/modalix.sh", every: 24h}')
    assert result.errors == (), [str(e) for e in result.errors]
    assert result.inventory is not None
    assert result.inventory.pools[0].health_check == HealthCheck(
        "/opt/lab/health/modalix.sh", every_s=86_400, timeout_s=600, vcpus=1
    )


def test_a_devices_health_check_overrides_its_pools() -> None:
    result = lab(
        pool_check="health_check: {run: pool.sh}",
        device_check="health_check: {run: own.sh, every: 30m, timeout_s: 60, vcpus: 2}",
    )
    assert result.inventory is not None
    first, second = result.inventory.devices
    p1 = result.inventory.pools[0]
    assert health_check_of(first, p1) == HealthCheck("own.sh", 1800, 60, 2)
    assert health_check_of(second, p1) == HealthCheck("pool.sh")


def test_a_device_without_a_check_in_a_pool_without_one_has_none() -> None:
    result = lab()
    assert result.inventory is not None
    assert health_check_of(result.inventory.devices[0], result.inventory.pools[0]) is None


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("30m", 1800), ("24h", 86_400), ("7d", 604_800), (300, 300), ("600", 600), ("90000s", 90_000)],
)
def test_durations_are_read_in_seconds(written: object, seconds: int) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize("written", ["4m", "299", "1w", "", "24 hours", "-1h", True, 1.5])
def test_bad_durations_are_refused(written: object) -> None:
    with pytest.raises(HealthCheckError):
        parse_duration(written)


@pytest.mark.parametrize(("seconds", "text"), [(86_400, "1d"), (7200, "2h"), (1800, "30m"), (301, "301s")])
def test_durations_are_written_in_their_largest_exact_unit(seconds: int, text: str) -> None:
    assert duration_text(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("check", "field", "message"),
    [
        ("{every: 24h}", "pools[0].devices[0].health_check.run", "is required"),
        ('{run: ""}', "pools[0].devices[0].health_check.run", "must not be empty"),
        ('{run: "   "}', "pools[0].devices[0].health_check.run", "non-empty command"),
        ("{run: x.sh, evry: 24h}", "pools[0].devices[0].health_check.evry", "unknown key 'evry'"),
        ("{run: x.sh, every: 4m}", "pools[0].devices[0].health_check.every", "5 minutes"),
        ("{run: x.sh, every: soon}", "pools[0].devices[0].health_check.every", "is not a duration"),
        ("{run: x.sh, timeout_s: 0}", "pools[0].devices[0].health_check.timeout_s", "1 to 86400"),
        ("{run: x.sh, timeout_s: 86401}", "pools[0].devices[0].health_check.timeout_s", "1 to 86400"),
        ("{run: x.sh, vcpus: 257}", "pools[0].devices[0].health_check.vcpus", "1 to 256"),
        ("x.sh", "pools[0].devices[0].health_check", "must be a mapping"),
    ],
)
def test_a_bad_health_check_is_an_inventory_error_naming_its_line(
    check: str, field: str, message: str
) -> None:
    result = lab(device_check=f"health_check: {check}")
    assert result.inventory is None
    assert len(result.errors) == 1, [str(e) for e in result.errors]
    error = result.errors[0]
    assert (error.file, error.line, error.field) == (FILE, 8, field)
    assert message in error.message


def test_health_checks_survive_a_round_trip_through_the_export() -> None:
    result = lab(
        pool_check="health_check: {run: pool.sh, every: 7d}",
        device_check="health_check: {run: own.sh, every: 90m, timeout_s: 60, vcpus: 2}",
    )
    assert result.inventory is not None
    document = inventory_document(result.inventory)
    again = parse_inventory(yaml.safe_dump(document, sort_keys=False), "exported.yml")
    assert again.errors == ()
    assert again.inventory is not None
    assert again.inventory.pools == result.inventory.pools
    assert again.inventory.devices == result.inventory.devices
    stored = inventory_from_document(document)
    assert stored.pools == result.inventory.pools
    assert stored.devices == result.inventory.devices


def test_a_stored_document_is_read_back_as_the_same_check() -> None:
    check = HealthCheck("x.sh", 3600, 30, 4)
    assert health_check_from_document(check.as_document()) == check
    with pytest.raises(HealthCheckError):
        health_check_from_document({"run": "x.sh", "vcpus": 0})


def test_a_changed_health_check_is_a_field_change_and_takes_part_in_equality() -> None:
    before = Inventory((pool("p1"),), (device("d1", "p1"),))
    check = HealthCheck("x.sh", 3600)
    after = Inventory(
        (dataclasses.replace(pool("p1"), health_check=check),),
        (dataclasses.replace(device("d1", "p1"), health_check=check),),
    )
    assert after.devices != before.devices
    changes = [str(change) for change in diff_inventories(before, after).changes]
    assert any(text.startswith("~ pool p1 health_check: None -> ") for text in changes), changes
    assert any(text.startswith("~ device d1 health_check: None -> ") for text in changes), changes


def test_an_import_applies_a_health_check_the_file_added_and_keeps_one_the_database_has() -> None:
    base = Inventory((pool("p1"),), (device("d1", "p1"), device("d2", "p1")))
    check = HealthCheck("x.sh", 3600)
    file = Inventory(base.pools, (dataclasses.replace(base.devices[0], health_check=check), base.devices[1]))
    other = HealthCheck("live.sh")
    database = Inventory(
        base.pools, (base.devices[0], dataclasses.replace(base.devices[1], health_check=other))
    )
    plan = merge_inventory(base, file, database)
    assert plan.conflicts == ()
    merged = plan.merged.devices_by_id
    assert (merged["d1"].health_check, merged["d2"].health_check) == (check, other)


def test_both_changing_a_health_check_differently_is_a_conflict() -> None:
    base = Inventory((pool("p1"),), (device("d1", "p1"),))
    file = Inventory(base.pools, (dataclasses.replace(base.devices[0], health_check=HealthCheck("a.sh")),))
    database = Inventory(
        base.pools, (dataclasses.replace(base.devices[0], health_check=HealthCheck("b.sh")),)
    )
    plan = merge_inventory(base, file, database)
    assert [(c.subject_id, c.field) for c in plan.conflicts] == [("d1", "health_check")]
    assert '"a.sh"' in str(plan.conflicts[0])


def test_a_health_check_matches_a_bad_device_that_other_jobs_may_not_use() -> None:
    bad = DeviceHealth(Health.BAD, "health check failed", datetime(2026, 12, 1, tzinfo=UTC), 812)
    inventory = Inventory((pool("p1"),), (dataclasses.replace(device("d1", "p1"), health=bad),))
    pinned = Requirements({"kerrigan.target_id": LabelRequirement("kerrigan.target_id", ("d1",))})
    assert resolve(pinned, inventory).eligible == ()
    assert [d.id for d in resolve(pinned, inventory, health_check=True).eligible] == ["d1"]


def test_a_check_is_due_when_its_every_has_passed_since_the_last() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    check = HealthCheck("x.sh", every_s=3600)
    assert check.due(None, now)
    assert not check.due(now - timedelta(minutes=59), now)
    assert check.due(now - timedelta(hours=1), now)
    assert not HealthCheck("x.sh").due(None, now)
