"""Effective labels and tags of pools and devices, their provenance, and the inventory's label columns."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.inventory import (
    Column,
    Device,
    Firmware,
    Inventory,
    LabelSource,
    Pool,
    SourcedLabel,
    effective_pool_labels,
    effective_target_labels,
    effective_target_tags,
    implicit_device_labels,
    implicit_pool_labels,
    sourced_target_labels,
)
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.labels import IMPLICIT_DEVICE_KEYS, IMPLICIT_KEYS, IMPLICIT_POOL_KEYS, is_reserved
from kerrigan.testing.builders import device, pool
from kerrigan.testing.labs import synthetic_lab

T = TypeVar("T")

LAB = Path(__file__).parents[3] / "fixtures" / "inventory" / "lab.yml"


@pytest.fixture(scope="module")
def lab() -> Inventory:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.inventory is not None, result.errors
    return result.inventory


def som_pool(**labels: str) -> Pool:
    return pool(
        "sdk-2-2-som",
        name="SDK 2.2 SoM",
        labels={"sdk": "2.2.0", "form_factor": "som", **labels},
        tags=["2.2.0-som-devkits", "ga-firmware"],
        firmware=Firmware(channel="ga", base_version="2.2.0"),
    )


def bluebox(**labels: str) -> Device:
    return device(
        "modalix-bluebox",
        "sdk-2-2-som",
        board="modalix",
        target_type="devkit",
        os_type="linux",
        host="lab-a-01",
        labels=labels,
        tags=["uart-debug"],
    )


# -- implicit labels -------------------------------------------------------------------------------


def test_implicit_pool_labels_come_from_id_name_and_firmware() -> None:
    assert implicit_pool_labels(som_pool()) == {
        "kerrigan.pool_id": "sdk-2-2-som",
        "kerrigan.pool_name": "sdk-2-2-som",
        "kerrigan.firmware_channel": "ga",
        "kerrigan.firmware_base_version": "2.2.0",
    }


def test_pool_name_label_is_the_slug_of_the_display_name() -> None:
    assert implicit_pool_labels(pool("p1", name="Lab A / Bench 3"))["kerrigan.pool_name"] == "lab-a-bench-3"


def test_pool_name_label_falls_back_to_the_pool_id_when_the_name_has_no_slug() -> None:
    assert implicit_pool_labels(pool("p1", name="***"))["kerrigan.pool_name"] == "p1"


def test_pool_without_firmware_has_no_firmware_labels() -> None:
    labels = implicit_pool_labels(pool("p1"))
    assert set(labels) == {"kerrigan.pool_id", "kerrigan.pool_name"}


def test_pool_with_only_a_firmware_channel_has_only_the_channel_label() -> None:
    labels = implicit_pool_labels(pool("p1", firmware=Firmware(channel="beta")))
    assert labels["kerrigan.firmware_channel"] == "beta"
    assert "kerrigan.firmware_base_version" not in labels


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("kerrigan.target_id", "davinci-old-01"),
        ("kerrigan.board", "davinci"),
        ("kerrigan.target_type", "devkit"),
        ("kerrigan.os_type", "rtos"),
        ("kerrigan.host", "lab-b-01"),
    ],
)
def test_implicit_device_label_reads_the_device_attribute(key: str, value: str) -> None:
    target = device("davinci-old-01", "p1", board="davinci", os_type="rtos", host="lab-b-01")
    assert implicit_device_labels(target)[key] == value


def test_implicit_labels_of_a_device_are_the_nine_reserved_keys() -> None:
    labels = effective_target_labels(bluebox(), som_pool())
    assert {key for key in labels if is_reserved(key)} == set(IMPLICIT_KEYS)


def test_implicit_pool_and_device_keys_split_the_nine() -> None:
    assert set(implicit_pool_labels(som_pool())) == set(IMPLICIT_POOL_KEYS)
    assert set(implicit_device_labels(bluebox())) == set(IMPLICIT_DEVICE_KEYS)


# -- effective labels ------------------------------------------------------------------------------


def test_effective_pool_labels_are_explicit_plus_implicit_pool_labels() -> None:
    assert effective_pool_labels(som_pool()) == {
        "sdk": "2.2.0",
        "form_factor": "som",
        "kerrigan.pool_id": "sdk-2-2-som",
        "kerrigan.pool_name": "sdk-2-2-som",
        "kerrigan.firmware_channel": "ga",
        "kerrigan.firmware_base_version": "2.2.0",
    }


def test_effective_pool_labels_ignore_reserved_keys_written_on_the_pool() -> None:
    written = pool("p1", labels={"kerrigan.pool_id": "forged", "kerrigan.colour": "blue", "sdk": "2.2.0"})
    labels = effective_pool_labels(written)
    assert labels["kerrigan.pool_id"] == "p1"
    assert "kerrigan.colour" not in labels


def test_effective_target_labels_are_pool_plus_device_plus_implicit_device_labels() -> None:
    assert effective_target_labels(bluebox(uart="enabled"), som_pool()) == {
        "sdk": "2.2.0",
        "form_factor": "som",
        "kerrigan.pool_id": "sdk-2-2-som",
        "kerrigan.pool_name": "sdk-2-2-som",
        "kerrigan.firmware_channel": "ga",
        "kerrigan.firmware_base_version": "2.2.0",
        "uart": "enabled",
        "kerrigan.target_id": "modalix-bluebox",
        "kerrigan.board": "modalix",
        "kerrigan.target_type": "devkit",
        "kerrigan.os_type": "linux",
        "kerrigan.host": "lab-a-01",
    }


def test_device_label_overrides_pool_label() -> None:
    assert effective_target_labels(bluebox(sdk="2.1.0"), som_pool())["sdk"] == "2.1.0"


@pytest.mark.parametrize(
    ("key", "generated"),
    [
        ("kerrigan.pool_id", "sdk-2-2-som"),
        ("kerrigan.pool_name", "sdk-2-2-som"),
        ("kerrigan.firmware_channel", "ga"),
        ("kerrigan.board", "modalix"),
        ("kerrigan.target_id", "modalix-bluebox"),
        ("kerrigan.host", "lab-a-01"),
    ],
)
def test_device_label_overrides_pool_label_except_reserved(key: str, generated: str) -> None:
    labels = effective_target_labels(bluebox(**{key: "forged"}), som_pool())
    assert labels[key] == generated


def test_reserved_key_outside_the_implicit_ones_never_reaches_effective_labels() -> None:
    labels = effective_target_labels(bluebox(**{"kerrigan.colour": "blue"}), som_pool())
    assert "kerrigan.colour" not in labels


def test_device_label_adds_a_key_its_pool_lacks() -> None:
    labels = effective_target_labels(bluebox(uart="enabled"), som_pool())
    assert labels["uart"] == "enabled"
    assert "uart" not in effective_pool_labels(som_pool())


def test_device_label_does_not_change_its_pool() -> None:
    shared = som_pool()
    effective_target_labels(bluebox(sdk="2.1.0"), shared)
    assert shared.labels["sdk"] == "2.2.0"
    assert effective_pool_labels(shared)["sdk"] == "2.2.0"


def test_device_without_labels_has_its_pool_labels() -> None:
    labels = effective_target_labels(bluebox(), som_pool(purpose="ci"))
    assert labels["purpose"] == "ci"
    assert labels["form_factor"] == "som"


def test_fixture_device_with_an_older_sdk_overrides_its_pool(lab: Inventory) -> None:
    target = lab.devices_by_id["davinci-old-01"]
    assert effective_target_labels(target, lab.pools_by_id[target.pool_id])["sdk"] == "2.1.0"


# -- tags ------------------------------------------------------------------------------------------


def test_device_tags_are_pool_tags_plus_device_tags() -> None:
    assert effective_target_tags(bluebox(), som_pool()) == {"2.2.0-som-devkits", "ga-firmware", "uart-debug"}


def test_device_without_tags_has_its_pool_tags() -> None:
    assert effective_target_tags(device("d1", "p1"), pool("p1", tags=["ga-firmware"])) == {"ga-firmware"}


# -- provenance ------------------------------------------------------------------------------------


def _sourced(target: Device, owner: Pool) -> dict[str, SourcedLabel]:
    return {label.key: label for label in sourced_target_labels(target, owner)}


def test_sourced_pool_label_is_marked_pool() -> None:
    assert _sourced(bluebox(), som_pool())["form_factor"] == SourcedLabel(
        "form_factor", "som", LabelSource.POOL
    )


def test_sourced_device_label_is_marked_device() -> None:
    assert _sourced(bluebox(uart="enabled"), som_pool())["uart"] == SourcedLabel(
        "uart", "enabled", LabelSource.DEVICE
    )


def test_sourced_device_override_names_the_pool_value_it_replaces() -> None:
    assert _sourced(bluebox(sdk="2.1.0"), som_pool())["sdk"] == SourcedLabel(
        "sdk", "2.1.0", LabelSource.DEVICE_OVERRIDE, overrides="2.2.0"
    )


@pytest.mark.parametrize("key", IMPLICIT_KEYS)
def test_sourced_implicit_label_is_marked_implicit(key: str) -> None:
    assert _sourced(bluebox(), som_pool())[key].source is LabelSource.IMPLICIT


def test_sourced_label_ignores_a_device_attempt_to_set_a_reserved_key() -> None:
    label = _sourced(bluebox(**{"kerrigan.board": "forged"}), som_pool())["kerrigan.board"]
    assert label == SourcedLabel("kerrigan.board", "modalix", LabelSource.IMPLICIT)


def test_sourced_labels_are_sorted_by_key() -> None:
    keys = [label.key for label in sourced_target_labels(bluebox(uart="enabled"), som_pool())]
    assert keys == sorted(keys)


def test_sourced_labels_agree_with_effective_labels_for_every_device_of_the_lab(lab: Inventory) -> None:
    for target in lab.devices:
        owner = lab.pools_by_id[target.pool_id]
        sourced = {label.key: label.value for label in sourced_target_labels(target, owner)}
        assert sourced == effective_target_labels(target, owner), target.id


# -- the inventory index ---------------------------------------------------------------------------


def _decoded(column: Column[T]) -> list[T]:
    """A column's value for each device, in inventory order."""
    return [column.values[code] for code in column.codes]


def _assert_columns_agree(inventory: Inventory, extra_keys: tuple[str, ...] = ()) -> None:
    effective = [
        effective_target_labels(target, inventory.pools_by_id[target.pool_id]) for target in inventory.devices
    ]
    keys = set().union(*effective) | set(IMPLICIT_KEYS) | set(extra_keys)
    index = inventory.index
    for key in sorted(keys):
        assert _decoded(index.column(key)) == [labels.get(key) for labels in effective], key


def test_index_column_agrees_with_effective_labels_for_every_device_and_key_of_the_lab(
    lab: Inventory,
) -> None:
    _assert_columns_agree(lab, extra_keys=("kerrigan.colour", "colour", "uart"))


def test_index_column_agrees_with_effective_labels_on_a_synthetic_lab() -> None:
    _assert_columns_agree(synthetic_lab(6, 25, seed=3))


def test_index_column_holds_none_where_a_device_lacks_the_key(lab: Inventory) -> None:
    column = _decoded(lab.index.column("uart"))
    lacking = {target.id for target, value in zip(lab.devices, column, strict=True) if value is None}
    assert "pcie-card-01" in lacking
    assert "modalix-bluebox" not in lacking


def test_index_tags_are_effective_device_tags(lab: Inventory) -> None:
    expected = [effective_target_tags(target, lab.pools_by_id[target.pool_id]) for target in lab.devices]
    assert _decoded(lab.index.tags) == expected


def test_index_label_keys_are_every_effective_key_of_the_lab(lab: Inventory) -> None:
    effective = set().union(
        *(effective_target_labels(target, lab.pools_by_id[target.pool_id]) for target in lab.devices)
    )
    assert lab.index.label_keys == effective


# Small inventories whose labels collide on purpose: pools and devices draw keys from the same few names,
# including reserved ones a device may try (and fail) to set.
_KEYS = st.sampled_from(["sdk", "form_factor", "uart", "purpose", "kerrigan.board", "kerrigan.pool_id"])
_VALUES = st.sampled_from(["2.1.1", "2.2.0", "som", "enabled", "ci"])


@st.composite
def inventories(draw: st.DrawFn) -> Inventory:
    pool_count = draw(st.integers(min_value=1, max_value=3))
    pools = tuple(
        pool(
            f"pool-{n}",
            labels=draw(st.dictionaries(_KEYS.filter(lambda k: not is_reserved(k)), _VALUES, max_size=3)),
            firmware=Firmware(channel=draw(st.sampled_from([None, "ga", "beta"]))),
        )
        for n in range(pool_count)
    )
    devices = tuple(
        device(
            f"dev-{n}",
            draw(st.sampled_from(pools)).id,
            board=draw(st.sampled_from(["modalix", "davinci"])),
            labels=draw(st.dictionaries(_KEYS, _VALUES, max_size=3)),
        )
        for n in range(draw(st.integers(min_value=0, max_value=6)))
    )
    return Inventory(pools, devices)


@settings(max_examples=75, deadline=None)
@given(inventories())
def test_index_column_agrees_with_effective_labels_on_any_inventory(inventory: Inventory) -> None:
    _assert_columns_agree(inventory, extra_keys=("kerrigan.firmware_channel", "missing"))
