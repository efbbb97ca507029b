"""Which tasks that ran lately a change of labels or tags would take devices from."""

from __future__ import annotations

import dataclasses

from kerrigan.core.device_status import DeviceHealth, Health
from kerrigan.core.inventory import Device, DeviceState, Inventory, Pool, RunnerHost
from kerrigan.core.label_impact import AskedTask, by_labels_alone, devices_lost
from kerrigan.core.requirements import LabelRequirement, Requirements, TagRequirement

POOL = Pool("ci-pool", "CI pool", labels={"purpose": "ci"}, tags=frozenset({"uart"}))
OTHER = Pool("lab-pool", "Lab pool", labels={"purpose": "lab"})
BLUE = Device("blue", "ci-pool", "modalix", "devkit", "linux", "lab-a-01")
RED = Device("red", "ci-pool", "modalix", "devkit", "linux", "lab-a-01", labels={"speed": "fast"})
GREEN = Device("green", "lab-pool", "modalix", "devkit", "linux", "lab-a-02")
BEFORE = Inventory((POOL, OTHER), (BLUE, RED, GREEN), (RunnerHost("lab-a-01"), RunnerHost("lab-a-02")))


def _asks(task: str, labels: dict[str, tuple[str, ...]], tags: tuple[str, ...] = ()) -> AskedTask:
    requirements = Requirements(
        {key: LabelRequirement(key, values) for key, values in labels.items()},
        tuple(TagRequirement(tag) for tag in tags),
    )
    return AskedTask("octo/firmware", "hil", task, requirements)


def _relabelled(pool: Pool, **labels: str) -> Inventory:
    changed = dataclasses.replace(pool, labels=labels)
    return dataclasses.replace(BEFORE, pools=tuple(changed if p.id == pool.id else p for p in BEFORE.pools))


def test_renaming_a_pool_label_strands_the_tasks_that_asked_for_the_old_value() -> None:
    ci = _asks("smoke", {"purpose": ("ci",)})
    lost = devices_lost(BEFORE, _relabelled(POOL, purpose="ci-ble"), [ci])
    assert [(item.asked, item.before, item.after, item.lost) for item in lost] == [
        (ci, 2, 0, ("blue", "red"))
    ]
    assert lost[0].unschedulable


def test_a_task_that_keeps_every_device_or_never_matched_is_not_listed() -> None:
    board = _asks("board", {"kerrigan.board": ("modalix",)})
    nothing = _asks("never", {"purpose": ("nightly",)})
    assert devices_lost(BEFORE, _relabelled(POOL, purpose="ci-ble"), [board, nothing]) == ()


def test_a_task_losing_some_devices_says_how_many_remain() -> None:
    either = _asks("either", {"purpose": ("ci", "lab")})
    [item] = devices_lost(BEFORE, _relabelled(POOL, purpose="nightly"), [either])
    assert (item.before, item.after, item.lost, item.unschedulable) == (3, 1, ("blue", "red"), False)


def test_removing_a_device_label_or_a_pool_tag_counts_too() -> None:
    fast = _asks("fast", {"speed": ("fast",)})
    tagged = _asks("uart", {}, ("uart",))
    red = dataclasses.replace(RED, labels={})
    pool = dataclasses.replace(POOL, tags=frozenset())
    after = dataclasses.replace(BEFORE, pools=(pool, OTHER), devices=(BLUE, red, GREEN))
    lost = devices_lost(BEFORE, after, [fast, tagged])
    assert [(item.asked.task, item.lost) for item in lost] == [("uart", ("blue", "red")), ("fast", ("red",))]


def test_state_health_and_hosts_do_not_hide_a_loss_but_a_retired_device_matches_nothing() -> None:
    ci = _asks("smoke", {"purpose": ("ci",)})
    blue = dataclasses.replace(
        BLUE, state=DeviceState.MAINTENANCE, health=DeviceHealth(Health.BAD, "failed"), present=False
    )
    red = dataclasses.replace(RED, state=DeviceState.RETIRED)
    before = dataclasses.replace(
        BEFORE, devices=(blue, red, GREEN), hosts=(RunnerHost("lab-a-01", online=False),)
    )
    after = dataclasses.replace(before, pools=(dataclasses.replace(POOL, labels={"purpose": "x"}), OTHER))
    [item] = devices_lost(before, after, [ci])
    assert item.lost == ("blue",)


def test_a_pool_that_stops_admitting_a_repository_takes_its_devices_from_that_repository_alone() -> None:
    ci = _asks("smoke", {"purpose": ("ci",)})
    other = dataclasses.replace(ci, repository="octo/other")
    after = dataclasses.replace(
        BEFORE, pools=(dataclasses.replace(POOL, repositories=("octo/other",)), OTHER)
    )
    lost = devices_lost(BEFORE, after, [ci, other])
    assert [(item.asked.repository, item.after) for item in lost] == [("octo/firmware", 0)]


def test_the_tasks_left_with_nothing_come_first() -> None:
    either = _asks("either", {"purpose": ("ci", "lab")})
    ci = _asks("smoke", {"purpose": ("ci",)})
    lost = devices_lost(BEFORE, _relabelled(POOL, purpose="x"), [either, ci])
    assert [item.asked.task for item in lost] == ["smoke", "either"]


def test_by_labels_alone_keeps_labels_and_retired_devices() -> None:
    red = dataclasses.replace(RED, state=DeviceState.RETIRED)
    blue = dataclasses.replace(BLUE, state=DeviceState.OFFLINE)
    plain = by_labels_alone(dataclasses.replace(BEFORE, devices=(blue, red)))
    assert [(d.id, d.state) for d in plain.devices] == [
        ("blue", DeviceState.AVAILABLE),
        ("red", DeviceState.RETIRED),
    ]
    assert plain.devices[1].labels == {"speed": "fast"}
    assert all(host.online and host.pause is None for host in plain.hosts)


def test_a_gang_role_is_named_with_its_task() -> None:
    role = dataclasses.replace(_asks("link", {}), role="peer")
    assert role.name == "hil / link (peer)"
    assert dataclasses.replace(role, role=None).name == "hil / link"
