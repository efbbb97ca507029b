"""Selection: one device per task, spread or packed, at most max_devkits held."""

from __future__ import annotations

import pytest

from kerrigan.core.inventory import Device
from kerrigan.core.manifest import Strategy
from kerrigan.core.selection import select_devices
from kerrigan.testing.builders import device

A1 = device("a1", "pool-a", host="h1", board="modalix")
A2 = device("a2", "pool-a", host="h1", board="davinci")
A3 = device("a3", "pool-a", host="h2", board="modalix")
B1 = device("b1", "pool-b", host="h1", board="modalix")
B2 = device("b2", "pool-b", host="h3", board="davinci")
ALL = [A1, A2, A3, B1, B2]


def ids(chosen: list[Device | None]) -> list[str | None]:
    return [d.id if d else None for d in chosen]


def test_spread_takes_distinct_pools_first() -> None:
    assert ids(select_devices([ALL, ALL], Strategy.SPREAD, 4)) == ["a1", "b2"]


def test_spread_then_takes_distinct_hosts() -> None:
    only_a = [A1, A2, A3]
    assert ids(select_devices([only_a, only_a], Strategy.SPREAD, 4)) == ["a1", "a3"]


def test_spread_then_takes_distinct_boards() -> None:
    same_pool_and_host = [A1, device("a4", "pool-a", host="h1", board="modalix"), A2]
    assert ids(select_devices([same_pool_and_host] * 2, Strategy.SPREAD, 4)) == ["a1", "a2"]


def test_pack_keeps_tasks_on_the_fewest_hosts() -> None:
    chosen = select_devices([ALL, ALL, ALL], Strategy.PACK, 4)
    assert {d.host for d in chosen if d} == {"h1"}
    assert len({d.id for d in chosen if d}) == 3


def test_pack_starts_on_the_host_with_most_candidates() -> None:
    candidates = [B2, A3, device("c1", "pool-c", host="h2")]
    assert ids(select_devices([candidates], Strategy.PACK, 4)) == ["a3"]


@pytest.mark.parametrize("strategy", list(Strategy))
def test_session_holds_at_most_max_devkits_when_held_devices_suit(strategy: Strategy) -> None:
    chosen = select_devices([ALL] * 6, strategy, 2)
    assert len({d.id for d in chosen if d}) == 2


def test_task_reuses_a_held_device_that_suits_it_once_at_the_cap() -> None:
    chosen = select_devices([[A1], [B2], [A1, A2]], Strategy.SPREAD, 2)
    assert ids(chosen) == ["a1", "b2", "a1"]


def test_task_whose_candidates_are_all_unheld_takes_another_device_at_the_cap() -> None:
    chosen = select_devices([[A1], [B2], [A3]], Strategy.SPREAD, 2)
    assert ids(chosen) == ["a1", "b2", "a3"]


def test_task_without_candidates_gets_none() -> None:
    assert ids(select_devices([[], [A1]], Strategy.SPREAD, 1)) == [None, "a1"]


@pytest.mark.parametrize("strategy", list(Strategy))
def test_the_same_input_gives_the_same_choice(strategy: Strategy) -> None:
    first = ids(select_devices([ALL] * 4, strategy, 3))
    assert all(ids(select_devices([ALL] * 4, strategy, 3)) == first for _ in range(5))
