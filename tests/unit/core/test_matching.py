"""Matching and diagnostics: every reason for every device, in the seed's words."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.inventory import (
    DeviceState,
    Firmware,
    Inventory,
    RunnerHost,
    effective_target_labels,
    effective_target_tags,
)
from kerrigan.core.labels import is_pool_scoped
from kerrigan.core.matching import Outcome, ReasonKind, TaskResolution, resolve
from kerrigan.core.requirements import Requirements
from kerrigan.testing.builders import device, pool, requirements


def texts(resolution: TaskResolution, device_id: str) -> list[str]:
    """The reasons one device was rejected for, as text."""
    for verdict in resolution.rejected:
        if verdict.id == device_id:
            return [reason.text for reason in verdict.reasons]
    raise AssertionError(f"{device_id} was not rejected")


@pytest.fixture
def lab() -> Inventory:
    return Inventory(
        pools=(
            pool(
                "sdk-2-2-som",
                labels={"sdk": "2.2.0", "form_factor": "som"},
                tags=["2.2.0-som-devkits"],
                firmware=Firmware("ga", "2.2.0"),
            ),
            pool("default", labels={"sdk": "2.1.1"}),
        ),
        devices=(
            device("modalix-bluebox", "sdk-2-2-som", labels={"uart": "enabled"}, tags=["uart-debug"]),
            device("modalix-redbox", "sdk-2-2-som", host="lab-a-02"),
            device("modalix-greenbox", "sdk-2-2-som", state=DeviceState.MAINTENANCE),
            device("legacy-01", "default", board="cortex"),
            device("legacy-02", "default", board="cortex", host="lab-b-02"),
        ),
        hosts=(RunnerHost("lab-a-01"), RunnerHost("lab-a-02"), RunnerHost("lab-b-02", online=False)),
    )


@pytest.mark.parametrize(
    ("request_", "device_id", "expected"),
    [
        (
            {"kerrigan.pool_id": "sdk-2-2-som"},
            "legacy-01",
            "kerrigan.pool_id=default did not match sdk-2-2-som",
        ),
        ({"form_factor": "som"}, "legacy-01", "form_factor missing"),
        ({"sdk": "2.2.0"}, "legacy-01", "sdk expected 2.2.0, got 2.1.1"),
        ({"sdk": ["2.2.0", "2.3.0"]}, "legacy-01", "sdk expected one of [2.2.0, 2.3.0], got 2.1.1"),
        (
            {"kerrigan.pool_id": ["a", "b"]},
            "legacy-01",
            "kerrigan.pool_id=default did not match any of [a, b]",
        ),
        ({}, "modalix-greenbox", "device in maintenance"),
        ({}, "legacy-02", "runner host lab-b-02 offline"),
    ],
)
def test_reasons_use_the_seeds_wording(
    lab: Inventory, request_: dict[str, str | list[str]], device_id: str, expected: str
) -> None:
    resolution = resolve(requirements(request_), lab)
    assert expected in texts(resolution, device_id)


def test_missing_tag_is_named(lab: Inventory) -> None:
    resolution = resolve(requirements(tags=["uart-debug"]), lab)
    assert texts(resolution, "modalix-redbox") == ["tag uart-debug missing"]


def test_a_rejected_device_lists_every_failed_rule_not_just_the_first(lab: Inventory) -> None:
    asked = requirements(
        {"kerrigan.pool_id": "sdk-2-2-som", "sdk": "2.2.0", "form_factor": "som"}, tags=["uart-debug"]
    )
    assert texts(resolve(asked, lab), "legacy-02") == [
        "kerrigan.pool_id=default did not match sdk-2-2-som",
        "sdk expected 2.2.0, got 2.1.1",
        "form_factor missing",
        "tag uart-debug missing",
        "runner host lab-b-02 offline",
    ]


def test_device_in_any_state_but_available_is_rejected(lab: Inventory) -> None:
    devices = tuple(device(f"d-{state.value}", "default", state=state) for state in DeviceState)
    inventory = Inventory(lab.pools, devices)
    resolution = resolve(Requirements(), inventory)
    assert [d.id for d in resolution.eligible] == ["d-available"]
    assert texts(resolution, "d-offline") == ["device offline"]
    assert texts(resolution, "d-retired") == ["device retired"]


def test_pool_level_filtering_uses_pool_scoped_keys_only(lab: Inventory) -> None:
    resolution = resolve(requirements({"kerrigan.firmware_channel": "ga", "sdk": "2.2.0"}), lab)
    assert resolution.eligible_pools == ("sdk-2-2-som",)
    assert [(v.pool, [r.text for r in v.reasons]) for v in resolution.rejected_pools] == [
        ("default", ["kerrigan.firmware_channel missing"])
    ]


def test_pool_without_pool_scoped_request_is_eligible_even_if_its_devices_are_not(lab: Inventory) -> None:
    resolution = resolve(requirements({"sdk": "9.9.9"}), lab)
    assert resolution.eligible_pools == ("sdk-2-2-som", "default")
    assert resolution.eligible == ()


def test_devices_in_a_rejected_pool_carry_the_pools_reason(lab: Inventory) -> None:
    resolution = resolve(requirements({"kerrigan.pool_id": "sdk-2-2-som"}), lab)
    assert texts(resolution, "legacy-01") == ["kerrigan.pool_id=default did not match sdk-2-2-som"]


def test_list_value_matches_any_of_its_values(lab: Inventory) -> None:
    resolution = resolve(requirements({"sdk": ["2.1.1", "2.2.0"]}), lab)
    assert {d.id for d in resolution.eligible} == {"modalix-bluebox", "modalix-redbox", "legacy-01"}


def test_values_compare_as_exact_strings() -> None:
    inventory = Inventory((pool("p", labels={"sdk": "1.10"}),), (device("d", "p"),))
    assert resolve(requirements({"sdk": "1.1"}), inventory).eligible == ()
    assert [d.id for d in resolve(requirements({"sdk": "1.10"}), inventory).eligible] == ["d"]


def test_device_label_refines_its_pools_label_for_matching(lab: Inventory) -> None:
    inventory = Inventory(
        (pool("p", labels={"sdk": "2.2.0"}),),
        (device("old", "p", labels={"sdk": "2.1.0"}), device("new", "p")),
    )
    resolution = resolve(requirements({"sdk": "2.2.0"}), inventory)
    assert [d.id for d in resolution.eligible] == ["new"]
    assert texts(resolution, "old") == ["sdk expected 2.2.0, got 2.1.0"]


def test_implicit_labels_select_a_device_board_and_host(lab: Inventory) -> None:
    assert [d.id for d in resolve(requirements({"kerrigan.target_id": "modalix-redbox"}), lab).eligible] == [
        "modalix-redbox"
    ]
    assert [d.id for d in resolve(requirements({"kerrigan.board": "cortex"}), lab).eligible] == ["legacy-01"]
    assert [d.id for d in resolve(requirements({"kerrigan.host": "lab-a-02"}), lab).eligible] == [
        "modalix-redbox"
    ]


def test_busy_device_waits_rather_than_failing(lab: Inventory) -> None:
    asked = requirements({"kerrigan.target_id": "modalix-bluebox"})
    resolution = resolve(asked, lab, busy={"modalix-bluebox"})
    assert texts(resolution, "modalix-bluebox") == ["device busy"]
    assert resolution.outcome is Outcome.WAITING


@pytest.mark.parametrize(
    ("request_", "outcome"),
    [
        ({"sdk": "2.2.0", "form_factor": "som"}, Outcome.ELIGIBLE),
        ({"kerrigan.target_id": "modalix-greenbox"}, Outcome.WAITING),  # in maintenance
        ({"kerrigan.target_id": "legacy-02"}, Outcome.WAITING),  # its host is offline
        ({"sdk": "3.0.0"}, Outcome.UNSCHEDULABLE),
    ],
)
def test_outcome_tells_never_from_not_yet(lab: Inventory, request_: dict[str, str], outcome: Outcome) -> None:
    assert resolve(requirements(request_), lab).outcome is outcome


def test_a_retired_device_never_matches() -> None:
    inventory = Inventory((pool("p"),), (device("d", "p", state=DeviceState.RETIRED),))
    resolution = resolve(Requirements(), inventory)
    assert resolution.outcome is Outcome.UNSCHEDULABLE
    assert resolution.rejected[0].never


def test_label_and_tag_reasons_are_permanent_and_state_reasons_transient(lab: Inventory) -> None:
    resolution = resolve(requirements({"sdk": "2.2.0"}, tags=["uart-debug"]), lab)
    permanence = {
        reason.kind: reason.permanent for verdict in resolution.rejected for reason in verdict.reasons
    }
    assert permanence == {
        ReasonKind.LABEL_MISMATCH: True,
        ReasonKind.TAG_MISSING: True,
        ReasonKind.DEVICE_STATE: False,
        ReasonKind.HOST_OFFLINE: False,
    }


def test_histogram_counts_devices_per_rule_with_the_values_they_had(lab: Inventory) -> None:
    resolution = resolve(requirements({"sdk": "2.2.0", "form_factor": "som"}), lab)
    rows = {row.rule: (row.count, row.permanent, dict(row.got)) for row in resolution.histogram}
    assert rows == {
        "sdk expected 2.2.0": (2, True, {"2.1.1": 2}),
        "form_factor missing": (2, True, {}),
        "device in maintenance": (1, False, {}),
        "runner host lab-b-02 offline": (1, False, {}),
    }
    assert [row.count for row in resolution.histogram] == sorted(
        (row.count for row in resolution.histogram), reverse=True
    )


def test_summary_reads_like_kubernetes(lab: Inventory) -> None:
    resolution = resolve(requirements({"form_factor": "som"}), lab)
    assert resolution.summary() == (
        "2/5 devices available: 2 form_factor missing, 1 device in maintenance, "
        "1 runner host lab-b-02 offline"
    )


def test_nearest_misses_are_the_devices_failing_fewest_rules(lab: Inventory) -> None:
    resolution = resolve(requirements({"sdk": "2.2.0", "uart": "enabled", "form_factor": "som"}), lab)
    assert resolution.eligible[0].id == "modalix-bluebox"
    assert resolution.nearest_misses == ()  # only shown when nothing matches

    nothing = resolve(requirements({"sdk": "2.2.0", "uart": "enabled", "purpose": "ci"}), lab)
    nearest = [(v.id, [r.text for r in v.reasons]) for v in nothing.nearest_misses]
    assert nearest[0] == ("modalix-bluebox", ["purpose missing"])
    assert [len(reasons) for _, reasons in nearest] == sorted(len(r) for _, r in nearest)


def test_nearest_misses_put_devices_that_only_wait_first() -> None:
    inventory = Inventory(
        (pool("p", labels={"sdk": "2.2.0"}),),
        (
            device("wrong-sdk", "p", labels={"sdk": "2.1.0"}),
            device("in-maintenance", "p", state=DeviceState.MAINTENANCE),
        ),
    )
    resolution = resolve(requirements({"sdk": "2.2.0"}), inventory)
    assert [v.id for v in resolution.nearest_misses] == ["in-maintenance", "wrong-sdk"]


@pytest.mark.parametrize(
    ("request_", "tags", "hint"),
    [
        ({"form-factor": "som"}, [], "no device has the label 'form-factor'; did you mean 'form_factor'?"),
        ({}, ["uart-debgu"], "no device has the tag 'uart-debgu'; did you mean 'uart-debug'?"),
        ({"sdk": "2.2"}, [], "no device has sdk=2.2; did you mean '2.2.0'?"),
    ],
)
def test_did_you_mean_for_keys_tags_and_values_no_device_has(
    lab: Inventory, request_: dict[str, str], tags: list[str], hint: str
) -> None:
    resolution = resolve(requirements(request_, tags), lab)
    assert [h.message for h in resolution.hints] == [hint]


def test_no_hints_when_something_matches(lab: Inventory) -> None:
    assert resolve(requirements({"sdk": "2.2.0"}), lab).hints == ()


def test_a_device_on_a_host_the_inventory_does_not_list_is_on_an_online_host() -> None:
    inventory = Inventory((pool("p"),), (device("d", "p", host="unlisted"),))
    assert [d.id for d in resolve(Requirements(), inventory).eligible] == ["d"]


def test_an_empty_inventory_is_unschedulable() -> None:
    resolution = resolve(requirements({"sdk": "2.2.0"}), Inventory())
    assert resolution.outcome is Outcome.UNSCHEDULABLE
    assert resolution.summary() == "0/0 devices available"


# -- property: the columnar matcher agrees with the rules applied one device at a time ------------

KEYS = ["sdk", "form_factor", "uart", "kerrigan.pool_id", "kerrigan.board", "kerrigan.firmware_channel"]
VALUES = ["a", "b", "c"]
TAGS = ["t1", "t2", "t3"]


def reference_reasons(
    asked: Requirements, inventory: Inventory, busy: frozenset[str]
) -> dict[str, list[str]]:
    """Each device's reasons, worked out the plain way from the seed's formulas."""
    offline = {host.id for host in inventory.hosts if not host.online}
    found = {}
    ordered = sorted(asked.labels.values(), key=lambda req: not is_pool_scoped(req.key))
    for dev in inventory.devices:
        home = inventory.pools_by_id[dev.pool_id]
        labels = effective_target_labels(dev, home)
        reasons = []
        for req in ordered:
            got = labels.get(req.key)
            wanted = ", ".join(req.values)
            if got is None:
                reasons.append(f"{req.key} missing")
            elif got not in req.values:
                if is_pool_scoped(req.key):
                    target = req.values[0] if len(req.values) == 1 else f"any of [{wanted}]"
                    reasons.append(f"{req.key}={got} did not match {target}")
                else:
                    target = req.values[0] if len(req.values) == 1 else f"one of [{wanted}]"
                    reasons.append(f"{req.key} expected {target}, got {got}")
        tags = effective_target_tags(dev, home)
        reasons += [f"tag {t.tag} missing" for t in asked.tags if t.tag not in tags]
        if dev.state is not DeviceState.AVAILABLE:
            reasons.append(
                "device in maintenance"
                if dev.state is DeviceState.MAINTENANCE
                else f"device {dev.state.value}"
            )
        if dev.host in offline:
            reasons.append(f"runner host {dev.host} offline")
        if dev.id in busy:
            reasons.append("device busy")
        found[dev.id] = reasons
    return found


@st.composite
def labs_and_requests(draw: st.DrawFn) -> tuple[Inventory, Requirements, frozenset[str]]:
    pool_count = draw(st.integers(1, 4))
    user_labels = st.dictionaries(
        st.sampled_from(["sdk", "form_factor", "uart"]), st.sampled_from(VALUES), max_size=3
    )
    pools = tuple(
        pool(
            f"p{n}",
            labels=draw(user_labels),
            tags=draw(st.sets(st.sampled_from(TAGS))),
            firmware=Firmware(draw(st.sampled_from([None, "a", "b"]))),
        )
        for n in range(pool_count)
    )
    devices = tuple(
        device(
            f"d{n}",
            f"p{draw(st.integers(0, pool_count - 1))}",
            labels=draw(user_labels),
            tags=draw(st.sets(st.sampled_from(TAGS))),
            board=draw(st.sampled_from(VALUES)),
            host=draw(st.sampled_from(["h1", "h2"])),
            state=draw(st.sampled_from(list(DeviceState))),
        )
        for n in range(draw(st.integers(0, 12)))
    )
    hosts = (RunnerHost("h1"), RunnerHost("h2", online=draw(st.booleans())))
    asked = requirements(
        draw(
            st.dictionaries(
                st.sampled_from(KEYS),
                st.one_of(
                    st.sampled_from([*VALUES, "p0", "p1"]),
                    st.lists(st.sampled_from([*VALUES, "p0"]), min_size=1, max_size=3, unique=True),
                ),
                max_size=4,
            )
        ),
        draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)),
    )
    busy = frozenset(draw(st.sets(st.sampled_from([d.id for d in devices])))) if devices else frozenset()
    return Inventory(pools, devices, hosts), asked, busy


@settings(max_examples=200, deadline=None)
@given(labs_and_requests())
def test_a_device_is_eligible_iff_it_has_no_reasons(
    case: tuple[Inventory, Requirements, frozenset[str]],
) -> None:
    inventory, asked, busy = case
    resolution = resolve(asked, inventory, busy)
    eligible = {d.id for d in resolution.eligible}
    rejected = {v.id: [r.text for r in v.reasons] for v in resolution.rejected}
    assert eligible.isdisjoint(rejected)
    assert eligible | set(rejected) == {d.id for d in inventory.devices}
    assert all(rejected.values())
    expected = reference_reasons(asked, inventory, busy)
    assert {d: r for d, r in expected.items() if r} == rejected
    assert {d for d, r in expected.items() if not r} == eligible
    assert sum(row.count for row in resolution.histogram) == sum(len(r) for r in rejected.values())
