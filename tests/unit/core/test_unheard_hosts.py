"""A runner host no agent has spoken for is offline, whatever the inventory says (issue 28): a device there
is not eligible, nor is the host for a boardless task, so nothing is leased to a machine with no agent."""

from __future__ import annotations

from kerrigan.core.inventory import Inventory, RunnerHost
from kerrigan.core.matching import resolve, resolve_hosts
from kerrigan.core.requirements import Requirements
from kerrigan.testing.builders import device, pool


def lab(*hosts: RunnerHost) -> Inventory:
    return Inventory(
        pools=(pool("som"),),
        devices=(device("bluebox", "som", host="lab-a-01"), device("redbox", "som", host="lab-a-02")),
        hosts=hosts,
    )


def test_a_host_online_in_the_inventory_but_never_heard_from_is_offline() -> None:
    inventory = lab(RunnerHost("lab-a-01", vcpus=8, heard=False), RunnerHost("lab-a-02", vcpus=8))
    assert not inventory.hosts[0].up
    resolution = resolve(Requirements(), inventory)
    assert [found.id for found in resolution.eligible] == ["redbox"]
    (rejected,) = resolution.rejected
    assert (rejected.id, [reason.text for reason in rejected.reasons]) == (
        "bluebox",
        ["runner host lab-a-01 offline"],
    )


def test_a_boardless_task_is_not_placed_on_a_host_never_heard_from() -> None:
    inventory = lab(RunnerHost("lab-a-01", vcpus=8, heard=False), RunnerHost("lab-a-02", vcpus=8))
    found = resolve_hosts(Requirements(), inventory, vcpus=1)
    assert found.eligible == ("lab-a-02",)
    assert [reason.text for reason in found.reasons[0]] == ["runner host lab-a-01 offline"]


def test_a_heard_host_that_an_inventory_or_a_silence_put_offline_stays_offline() -> None:
    assert not RunnerHost("lab-a-01", online=False, heard=True).up
    assert RunnerHost("lab-a-01").up  # a file's host with no database behind it (kerrigan explain)
