"""Seed 001's acceptance criteria, EARS-R1-1 ... R6-3, as tests of Kerrigan's resource values.

The "controller" is a sender (a runner host reporting, or the dispatcher handing values on) and the
"scheduler" / "API server" is a receiver with a catalog of its own, registered in its own order.
"""

from __future__ import annotations

import pytest

from kerrigan.core.resources import (
    ResourceCatalog,
    ResourceValues,
    Unit,
    initial_values,
    update_values,
)

SENDER_ORDER = [("vcpus", Unit.COUNT), ("max_weight", Unit.COUNT), ("free_disk", Unit.BYTES)]
RECEIVER_ORDER = [("free_disk", Unit.BYTES), ("vcpus", Unit.COUNT), ("max_weight", Unit.COUNT)]
VALUES = {"vcpus": 16, "max_weight": 28, "free_disk": 500 * 2**30}


def sent(values: dict[str, int]) -> dict[str, int]:
    """What crosses the boundary: the sender's values keyed by name, from its own catalog and slots."""
    sender = ResourceCatalog(SENDER_ORDER)
    held, skipped = initial_values(sender, values)
    assert skipped == []
    return held.named(sender)


def test_r1_1_initial_values_are_identified_by_name_not_slot() -> None:
    message = sent(VALUES)
    assert set(message) == set(VALUES)
    assert all(isinstance(key, str) for key in message)


def test_r1_2_a_known_name_is_stored_at_the_receivers_own_slot() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, sent(VALUES))
    vcpus = receiver.get("vcpus")
    assert vcpus is not None
    assert vcpus.slot == 1  # the receiver's numbering, not the sender's 0
    assert held.by_slot[vcpus.slot] == 16


def test_r1_3_an_unknown_name_is_reported_and_skipped_without_touching_the_rest() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, skipped = initial_values(receiver, {**sent(VALUES), "gpus": 2})
    assert [s.name for s in skipped] == ["gpus"]
    assert held.named(receiver) == VALUES


def test_r1_4_the_initial_path_gives_the_state_the_update_path_gives() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    initial, _ = initial_values(receiver, sent(VALUES))
    updated, _ = update_values(ResourceValues(), receiver, sent(VALUES))
    assert initial == updated


def test_r2_1_a_hosts_values_travel_keyed_by_name_in_any_order() -> None:
    pairs = list(reversed(list(sent(VALUES).items())))
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, pairs)
    assert held.named(receiver) == VALUES


def test_r2_2_each_name_resolves_to_the_receivers_slot_when_a_host_is_built() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, sent(VALUES))
    for name, value in VALUES.items():
        resource = receiver.get(name)
        assert resource is not None
        assert held.by_slot[resource.slot] == value


def test_r2_3_an_unknown_name_in_a_hosts_values_does_not_abort_the_host() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, skipped = update_values(ResourceValues(), receiver, [("vcpus", 8), ("tpu", 1), ("max_weight", 4)])
    assert [s.name for s in skipped] == ["tpu"]
    assert held.named(receiver) == {"vcpus": 8, "max_weight": 4}


def test_r2_4_a_resource_added_or_removed_at_run_time_resolves_for_the_next_message() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, skipped = initial_values(receiver, {"vcpus": 16, "memory": 64})
    assert [s.name for s in skipped] == ["memory"]
    receiver.add("memory", Unit.BYTES)
    receiver.remove("vcpus")
    held, skipped = update_values(held, receiver, {"vcpus": 32, "memory": 64})
    assert [s.name for s in skipped] == ["vcpus"]
    assert held.value(receiver, "memory") == 64
    assert held.value(receiver, "vcpus") is None
    receiver.add("vcpus")  # known again: it keeps its old slot, and the next message fills it
    held, _ = update_values(held, receiver, {"vcpus": 12})
    assert held.value(receiver, "vcpus") == 12


def test_slots_of_removed_resources_are_never_reused() -> None:
    receiver = ResourceCatalog([("a", Unit.COUNT)])
    receiver.remove("a")
    assert receiver.add("b").slot == 1


def test_r3_1_values_handed_to_the_api_are_keyed_by_name() -> None:
    dispatcher = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(dispatcher, VALUES)
    assert held.named(dispatcher) == VALUES


def test_r3_2_the_api_matches_values_to_its_resources_by_name_whatever_its_numbering() -> None:
    dispatcher = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(dispatcher, VALUES)
    api = ResourceCatalog([("max_weight", Unit.COUNT), ("free_disk", Unit.BYTES), ("vcpus", Unit.COUNT)])
    shown, skipped = initial_values(api, held.named(dispatcher))
    assert skipped == []
    assert shown.named(api) == VALUES


def test_r4_1_an_update_changes_only_the_values_it_names() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, VALUES)
    held, _ = update_values(held, receiver, {"free_disk": 1})
    assert held.named(receiver) == {**VALUES, "free_disk": 1}


def test_r4_2_initial_and_update_share_one_resolution_so_they_cannot_drift() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    bad = {"vcpus": -1, "max_weight": "many", "free_disk": 7, "ghost": 1}
    first = initial_values(receiver, bad)
    second = update_values(ResourceValues(), receiver, bad)
    assert first == second
    assert sorted(s.name for s in first[1]) == ["ghost", "max_weight", "vcpus"]


def test_r5_1_no_value_depends_on_sender_and_receiver_numbering_alike() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    sender = ResourceCatalog(SENDER_ORDER)
    assert [sender.get(n).slot for n in VALUES] != [receiver.get(n).slot for n in VALUES]  # type: ignore[union-attr]
    held, _ = initial_values(receiver, sent(VALUES))
    assert held.named(receiver) == VALUES


def test_r5_2_slots_stay_inside_the_receiver() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, VALUES)
    assert not any(isinstance(key, int) for key in held.named(receiver))


@pytest.mark.parametrize("receiver_order", [RECEIVER_ORDER, list(reversed(SENDER_ORDER))])
def test_r6_1_a_different_registration_order_still_gives_every_resource_its_value(
    receiver_order: list[tuple[str, Unit]],
) -> None:
    receiver = ResourceCatalog(receiver_order)
    held, _ = initial_values(receiver, sent(VALUES))
    assert {name: held.value(receiver, name) for name in VALUES} == VALUES


def test_r6_2_the_same_registration_order_behaves_as_before() -> None:
    receiver = ResourceCatalog(SENDER_ORDER)
    held, _ = initial_values(receiver, sent(VALUES))
    assert held.by_slot == {0: 16, 1: 28, 2: 500 * 2**30}


def test_r6_3_a_scheduler_reading_by_its_own_slots_gets_the_right_values() -> None:
    receiver = ResourceCatalog(RECEIVER_ORDER)
    held, _ = initial_values(receiver, sent(VALUES))
    slot_of = {name: receiver.get(name).slot for name in VALUES}  # type: ignore[union-attr]
    wanted = held.by_slot[slot_of["max_weight"]] - held.by_slot[slot_of["vcpus"]]
    assert wanted == 28 - 16
