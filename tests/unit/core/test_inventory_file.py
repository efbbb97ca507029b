"""The inventory file: reading it with every problem placed by file and line, and writing it back."""

from __future__ import annotations

import dataclasses
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.device_status import StateNote
from kerrigan.core.inventory import DeviceState, Firmware, Inventory, RunnerHost
from kerrigan.core.inventory_file import (
    DocumentError,
    InventoryResult,
    inventory_document,
    inventory_from_document,
    parse_inventory,
)
from kerrigan.core.labels import LabelError, validate_value
from kerrigan.core.yamlsource import Problem
from kerrigan.testing.builders import device, pool
from kerrigan.testing.labs import synthetic_lab

LAB = Path(__file__).parents[3] / "fixtures" / "inventory" / "lab.yml"
FILE = "lab/inventory.yml"


def parse(text: str) -> InventoryResult:
    return parse_inventory(textwrap.dedent(text), FILE)


def only_error(text: str) -> Problem:
    result = parse(text)
    assert result.inventory is None
    assert len(result.errors) == 1, [str(error) for error in result.errors]
    return result.errors[0]


@pytest.fixture(scope="module")
def lab() -> Inventory:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.errors == ()
    assert result.inventory is not None
    return result.inventory


# -- the fixture lab -------------------------------------------------------------------------------


def test_fixture_lab_parses_without_errors() -> None:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.errors == ()
    assert result.inventory is not None


def test_fixture_lab_has_its_pools_devices_and_hosts_in_file_order(lab: Inventory) -> None:
    assert [p.id for p in lab.pools] == ["sdk-2-2-som", "sdk-2-1-som", "sdk-2-2-pcie", "default"]
    assert len(lab.devices) == 12
    assert [h.id for h in lab.hosts] == ["lab-a-01", "lab-a-02", "lab-b-01", "lab-b-02"]


def test_fixture_lab_host_with_state_offline_is_offline(lab: Inventory) -> None:
    assert [h.id for h in lab.hosts if not h.online] == ["lab-b-02"]


def test_fixture_pool_is_read_in_full(lab: Inventory) -> None:
    som = lab.pools_by_id["sdk-2-2-som"]
    assert som.name == "SDK 2.2 SoM"
    assert som.owners == ("octocat",)
    assert som.firmware == Firmware(channel="ga", base_version="2.2.0")
    assert som.labels == {"sdk": "2.2.0", "form_factor": "som", "purpose": "ga-validation"}
    assert som.tags == {"2.2.0-som-devkits", "ga-firmware"}


def test_fixture_device_nested_under_a_pool_belongs_to_it(lab: Inventory) -> None:
    assert lab.devices_by_id["modalix-bluebox"] == device(
        "modalix-bluebox",
        "sdk-2-2-som",
        board="modalix",
        host="lab-a-01",
        labels={"uart": "enabled"},
        tags=["uart-debug"],
    )


def test_fixture_device_state_and_reason_are_read(lab: Inventory) -> None:
    greenbox = lab.devices_by_id["modalix-greenbox"]
    assert greenbox.state is DeviceState.MAINTENANCE
    assert greenbox.state_reason == "reflashing the bootloader"


def test_device_without_a_state_is_available(lab: Inventory) -> None:
    assert lab.devices_by_id["modalix-bluebox"].state is DeviceState.AVAILABLE


# -- what a valid file means -----------------------------------------------------------------------


def test_device_target_type_and_os_type_default_to_devkit_and_linux() -> None:
    result = parse(
        """\
        pools:
          - id: p1
            devices:
              - {id: d1, board: modalix, host: h1}
        """
    )
    assert result.inventory is not None
    assert (result.inventory.devices[0].target_type, result.inventory.devices[0].os_type) == (
        "devkit",
        "linux",
    )


def test_pool_name_defaults_to_its_id() -> None:
    result = parse("pools: [{id: p1}]\n")
    assert result.inventory is not None
    assert result.inventory.pools[0].name == "p1"


def test_top_level_device_joins_the_pool_it_names() -> None:
    result = parse(
        """\
        devices:
          - {id: d1, pool: p1, board: modalix, host: h1}
        pools:
          - id: p1
        """
    )
    assert result.inventory is not None
    assert result.inventory.devices[0].pool_id == "p1"


def test_label_keys_are_stored_lowercase() -> None:
    result = parse("pools: [{id: p1, labels: {Form_Factor: som}}]\n")
    assert result.inventory is not None
    assert result.inventory.pools[0].labels == {"form_factor": "som"}


def test_tags_are_stored_lowercase() -> None:
    result = parse("pools: [{id: p1, tags: [GA-Firmware]}]\n")
    assert result.inventory is not None
    assert result.inventory.pools[0].tags == {"ga-firmware"}


@pytest.mark.parametrize(
    ("written", "value"),
    [("1.10", "1.10"), ("2.2", "2.2"), ("on", "on"), ("yes", "yes"), ('"2.2.0"', "2.2.0")],
)
def test_label_value_is_kept_as_written(written: str, value: str) -> None:
    result = parse(f"pools: [{{id: p1, labels: {{sdk: {written}}}}}]\n")
    assert result.inventory is not None
    assert result.inventory.pools[0].labels == {"sdk": value}


def test_any_runner_host_is_accepted_without_a_hosts_section() -> None:
    result = parse(
        """\
        pools:
          - id: p1
            devices:
              - {id: d1, board: modalix, host: anywhere}
        """
    )
    assert result.errors == ()
    assert result.inventory is not None
    assert result.inventory.hosts == ()


def test_host_without_a_state_is_online() -> None:
    result = parse("hosts: [{id: h1}]\npools: []\n")
    assert result.inventory is not None
    assert result.inventory.hosts == (RunnerHost("h1", online=True),)


# -- each rule, with file, line and field ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        pytest.param(
            """\
            pools:
              - id: p1
                labels:
                  sdk: "2.2.0"
                  kerrigan.pool_id: p2
            """,
            5,
            "pools[0].labels.kerrigan.pool_id",
            "uses the reserved prefix 'kerrigan.'",
            id="reserved-key-on-pool",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
                devices:
                  - id: d1
                    board: modalix
                    host: h1
                    labels: {Kerrigan.Board: davinci}
            """,
            7,
            "pools[0].devices[0].labels.Kerrigan.Board",
            "uses the reserved prefix 'kerrigan.'",
            id="reserved-key-on-device",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
            devices:
              - id: d1
                pool: p9
                board: modalix
                host: h1
            """,
            5,
            "devices[0].pool",
            "unknown pool 'p9'; pools: p1",
            id="unknown-pool",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
            devices:
              - id: d1
                board: modalix
                host: h1
            """,
            4,
            "devices[0].pool",
            "a device listed on its own must name its pool",
            id="top-level-device-without-pool",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
                devices:
                  - {id: d1, pool: p1, board: modalix, host: h1}
            """,
            4,
            "pools[0].devices[0].pool",
            "a device listed under its pool does not name a pool",
            id="nested-device-naming-a-pool",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
              - id: p2
              - id: p1
            """,
            4,
            "pools[2].id",
            "duplicate pool id 'p1' (first on line 2)",
            id="duplicate-pool",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
                devices:
                  - {id: d1, board: modalix, host: h1}
              - id: p2
                devices:
                  - {id: d1, board: davinci, host: h1}
            """,
            7,
            "pools[1].devices[0].id",
            "duplicate device id 'd1' (first on line 4)",
            id="duplicate-device-across-pools",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
                devices:
                  - {id: d1, board: modalix, host: h1}
            devices:
              - {id: d1, pool: p1, board: modalix, host: h1}
            """,
            6,
            "devices[0].id",
            "duplicate device id 'd1' (first on line 4)",
            id="duplicate-device-top-level",
        ),
        pytest.param(
            """\
            hosts:
              - id: h1
              - id: h1
            pools: []
            """,
            3,
            "hosts[1].id",
            "duplicate runner host 'h1' (first on line 2)",
            id="duplicate-host",
        ),
        pytest.param(
            """\
            pools:
              - id: p1
                devices:
                  - id: d1
                    board: modalix
                    host: h1
                    state: broken
            """,
            7,
            "pools[0].devices[0].state",
            "must be one of available, maintenance, offline, retired, not 'broken'",
            id="bad-device-state",
        ),
        pytest.param(
            """\
            hosts:
              - id: h1
                state: asleep
            pools: []
            """,
            3,
            "hosts[0].state",
            "must be one of online, offline, not 'asleep'",
            id="bad-host-state",
        ),
        pytest.param(
            """\
            hosts:
              - id: h1
            pools:
              - id: p1
                devices:
                  - id: d1
                    board: modalix
                    host: h2
            """,
            8,
            "pools[0].devices[0].host",
            "unknown runner host 'h2'; the hosts section lists h1",
            id="unknown-runner-host",
        ),
        pytest.param("hosts: []\n", 1, "pools", "is required: list the lab's pools", id="missing-pools"),
        pytest.param(
            "pools:\n  - name: Nameless\n", 2, "pools[0].id", "every pool needs an id", id="pool-id"
        ),
        pytest.param(
            "pools:\n  - id: p1\n    devices:\n      - {board: modalix, host: h1}\n",
            4,
            "pools[0].devices[0].id",
            "every device needs an id",
            id="device-id",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    devices:\n      - {id: d1, host: h1}\n",
            4,
            "pools[0].devices[0].board",
            "is required",
            id="device-board",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    devices:\n      - {id: d1, board: modalix}\n",
            4,
            "pools[0].devices[0].host",
            "is required: name the runner host that drives it",
            id="device-host",
        ),
        pytest.param(
            "hosts:\n  - state: online\npools: []\n",
            2,
            "hosts[0].id",
            "every runner host needs an id",
            id="host-id",
        ),
        pytest.param(
            "pools:\n  - id: SDK 2.2\n",
            2,
            "pools[0].id",
            "pool id 'SDK 2.2' is not valid",
            id="invalid-pool-id",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    tags: [ga, UART Debug]\n",
            3,
            "pools[0].tags[1]",
            "tag 'UART Debug' contains ' '",
            id="bad-tag",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    labels:\n      sdk: ''\n",
            4,
            "pools[0].labels.sdk",
            "value of label 'sdk' must not be empty",
            id="empty-label-value",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    labels: {sdk: a, SDK: b}\n",
            3,
            "pools[0].labels.SDK",
            "label 'sdk' is set twice (first on line 3); keys are case-insensitive",
            id="label-set-twice",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    owners: [octocat, 'not a login']\n",
            3,
            "pools[0].owners[1]",
            "'not a login' is not a GitHub login",
            id="bad-owner",
        ),
        pytest.param(
            "pools:\n  - id: p1\n    devices:\n      - {id: d1, bord: modalix, board: x, host: h1}\n",
            4,
            "pools[0].devices[0].bord",
            "unknown key 'bord'; did you mean 'board'?",
            id="unknown-device-key",
        ),
    ],
)
def test_invalid_inventory_reports_the_rule_with_its_line_and_field(
    text: str, line: int, field: str, message: str
) -> None:
    error = only_error(text)
    assert (error.file, error.line, error.field) == (FILE, line, field)
    assert message in error.message


def test_several_mistakes_are_reported_together_in_file_order() -> None:
    result = parse(
        """\
        hosts:
          - id: h1
        pools:
          - id: p1
            labels: {kerrigan.pool_id: p2}
            devices:
              - {id: d1, board: modalix, host: h2, state: broken}
          - id: p1
        """
    )
    assert result.inventory is None
    assert [(e.line, e.field) for e in result.errors] == [
        (5, "pools[0].labels.kerrigan.pool_id"),
        (7, "pools[0].devices[0].host"),
        (7, "pools[0].devices[0].state"),
        (8, "pools[1].id"),
    ]


@pytest.mark.parametrize("text", ["", "pools: [", "- just\n- a list\n", "pools: {p1: {}}\n"])
def test_file_that_is_not_an_inventory_gives_an_error_not_an_exception(text: str) -> None:
    result = parse(text)
    assert result.inventory is None
    assert result.errors
    assert all(error.file == FILE for error in result.errors)


# -- the round trip --------------------------------------------------------------------------------


def round_trip(inventory: Inventory) -> Inventory:
    text = yaml.safe_dump(inventory_document(inventory), sort_keys=False)
    result = parse_inventory(text, "exported.yml")
    assert result.errors == (), [str(error) for error in result.errors]
    assert result.inventory is not None
    return result.inventory


def assert_same_inventory(again: Inventory, inventory: Inventory) -> None:
    assert again.pools == inventory.pools
    assert again.devices == inventory.devices
    assert again.hosts == inventory.hosts


def test_fixture_lab_survives_a_round_trip(lab: Inventory) -> None:
    assert_same_inventory(round_trip(lab), lab)


def test_synthetic_lab_survives_a_round_trip() -> None:
    inventory = synthetic_lab(3, 4)
    assert_same_inventory(round_trip(inventory), inventory)


def test_values_a_yaml_loader_would_retype_survive_a_round_trip() -> None:
    inventory = Inventory(
        pools=(pool("p1", name="on", labels={"sdk": "1.10", "uart": "on", "debug": "yes", "x": "null"}),),
        devices=(device("d1", "p1", board="0x10", labels={"rev": "010", "flag": "~"}, host="h1"),),
    )
    assert_same_inventory(round_trip(inventory), inventory)


def _valid(value: str) -> bool:
    try:
        validate_value(value)
    except LabelError:
        return False
    return True


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=63).filter(_valid))
def test_any_valid_label_value_survives_a_round_trip(value: str) -> None:
    inventory = Inventory(
        pools=(pool("p1", labels={"sdk": value}),),
        devices=(device("d1", "p1", labels={"uart": value}),),
    )
    assert_same_inventory(round_trip(inventory), inventory)


# -- health, which the export writes and an import skips --------------------------------------------


def test_a_devices_health_mapping_is_accepted_and_ignored() -> None:
    with_health = parse(
        """\
        pools:
          - id: p1
            devices:
              - id: d1
                board: modalix
                host: h1
                health: {status: bad, reason: health check failed, since: 2026-12-01T10:02:00Z}
        """
    )
    without = parse("pools: [{id: p1, devices: [{id: d1, board: modalix, host: h1}]}]\n")
    assert with_health.errors == ()
    assert with_health.inventory == without.inventory


@pytest.mark.parametrize("value", ["bad", "[good]", "3"])
def test_a_health_that_is_not_a_mapping_is_an_error_on_its_line(value: str) -> None:
    problem = only_error(
        f"""\
        pools:
          - id: p1
            devices:
              - id: d1
                board: modalix
                host: h1
                health: {value}
        """
    )
    assert (problem.line, problem.field) == (7, "pools[0].devices[0].health")
    assert "must be a mapping" in problem.message


# -- the stored document, read back ----------------------------------------------------------------


def test_a_document_reads_back_into_the_inventory_it_was_written_from(lab: Inventory) -> None:
    for inventory in (lab, synthetic_lab(3, 4)):
        assert_same_inventory(inventory_from_document(inventory_document(inventory)), inventory)


def test_a_document_read_back_skips_keys_it_does_not_know() -> None:
    document = inventory_document(Inventory((pool("p1"),), (device("d1", "p1"),)))
    document["pools"][0]["devices"][0]["health"] = {"status": "good"}  # type: ignore[index]
    assert inventory_from_document(document).devices == (device("d1", "p1"),)


@pytest.mark.parametrize(
    "document", [{}, {"pools": [{"id": "p1"}]}, {"pools": [{"id": "p", "name": "p", "tags": "x"}]}]
)
def test_a_document_that_is_not_an_inventory_is_a_document_error(document: dict[str, object]) -> None:
    with pytest.raises(DocumentError):
        inventory_from_document(document)


# -- a maintenance's end -------------------------------------------------------------------------------

UNTIL = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_a_maintenance_until_survives_the_file_and_the_stored_document() -> None:
    reflashing = dataclasses.replace(
        device("d1", "p1", host="h1"),
        state=DeviceState.MAINTENANCE,
        state_reason="reflashing",
        state_note=StateNote("reflashing", "olga", UNTIL - timedelta(hours=1), UNTIL),
    )
    inventory = Inventory(pools=(pool("p1"),), devices=(reflashing,))
    document = inventory_document(inventory)
    assert document["pools"][0]["devices"][0]["state_until"] == "2026-12-01T09:30:00+00:00"  # type: ignore[index]
    for again in (round_trip(inventory), inventory_from_document(document)):
        assert again.devices[0].state_until == UNTIL


def test_a_state_until_with_another_zone_is_read_as_that_instant() -> None:
    result = parse(
        """
        pools:
          - id: p1
            devices:
              - {id: d1, board: b, host: h1, state: maintenance, state_until: "2026-12-01T10:30:00+01:00"}
        """
    )
    assert result.inventory is not None, result.errors
    assert result.inventory.devices[0].state_until == UNTIL


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("state: available, state_until: '2026-12-01T09:30:00+00:00'", "only a device in maintenance ends"),
        ("state: maintenance, state_until: '2026-12-01T09:30:00'", "is not a time with its zone"),
        ("state: maintenance, state_until: 'next tuesday'", "is not a time with its zone"),
    ],
)
def test_a_state_until_that_cannot_be_kept_is_an_error_naming_the_field(entry: str, message: str) -> None:
    error = only_error(f"pools:\n  - id: p1\n    devices:\n      - {{id: d1, board: b, host: h1, {entry}}}\n")
    assert (error.line, error.field) == (4, "pools[0].devices[0].state_until")
    assert message in error.message


@pytest.mark.parametrize("value", ['"bench\\r# heading"', '"tab\\there"', "x" * 501])
def test_a_state_reason_that_is_not_printable_text_on_one_line_is_an_error_on_its_line(value: str) -> None:
    """It is shown in check runs and on pages as the API's reasons are: printable, one line, 500 at most."""
    problem = only_error(
        f"""\
        pools:
          - id: p1
            devices:
              - id: d1
                board: modalix
                host: h1
                state: maintenance
                state_reason: {value}
        """
    )
    assert (problem.line, problem.field) == (8, "pools[0].devices[0].state_reason")
    assert "printable text on one line" in problem.message
