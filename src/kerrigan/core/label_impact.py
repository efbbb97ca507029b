"""What a change of labels or tags would take from the workflows that ran lately.

Before a pool owner relabels a pool or a device, the page and the API show every task of the last days
whose requirements matched devices that would no longer match (``purpose: ci`` renamed ``ci-ble``: the
workflows asking for ``purpose: ci`` lose those boards, and perhaps every board they had).

A device *matches* a task here by what a change of labels can alter: its effective labels and tags, and
its pool's ``repositories`` list for the task's repository. Its state, health, presence, reservations and
host are left out (they pass; a board in maintenance comes back), except that a retired device matches
nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from kerrigan.core.device_status import NO_NOTE, UNKNOWN_HEALTH
from kerrigan.core.inventory import DeviceState, Inventory, RunnerHost
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import Requirements


@dataclass(frozen=True, slots=True)
class AskedTask:
    """A task that ran lately, and what it asked of a device (``role`` for one role of a gang)."""

    repository: str
    workflow: str
    task: str
    requirements: Requirements
    role: str | None = None

    @property
    def name(self) -> str:
        """``workflow / task`` (``/ role`` for a gang's role), as the pages show it."""
        named = f"{self.workflow} / {self.task}"
        return f"{named} ({self.role})" if self.role else named


@dataclass(frozen=True, slots=True)
class LostDevices:
    """A task that would match fewer devices after the change: how many before and after, and which."""

    asked: AskedTask
    before: int
    after: int
    lost: tuple[str, ...]

    @property
    def unschedulable(self) -> bool:
        """Whether the change leaves the task no device at all (it would fail at once, *never*)."""
        return self.after == 0

    def as_dict(self) -> dict[str, object]:
        """As the API answers it."""
        return {
            "repository": self.asked.repository,
            "workflow": self.asked.workflow,
            "task": self.asked.task,
            "role": self.asked.role,
            "devices_before": self.before,
            "devices_after": self.after,
            "lost": list(self.lost),
        }


def by_labels_alone(inventory: Inventory) -> Inventory:
    """``inventory`` with what a label change cannot alter made to pass: every device not retired is
    available, present, of unknown health and unreserved; every host online and unpaused, its vCPUs
    unknown."""
    devices = tuple(
        device
        if device.state is DeviceState.RETIRED
        else dataclasses.replace(
            device,
            state=DeviceState.AVAILABLE,
            state_note=NO_NOTE,
            health=UNKNOWN_HEALTH,
            present=True,
            reserved=None,
        )
        for device in inventory.devices
    )
    hosts = tuple(RunnerHost(host.id) for host in inventory.hosts)
    return Inventory(inventory.pools, devices, hosts)


def devices_lost(before: Inventory, after: Inventory, asked: Iterable[AskedTask]) -> tuple[LostDevices, ...]:
    """Every task of ``asked`` that matches devices in ``before`` that it would not match in ``after``,
    the tasks left with none first, then by how many they lose."""
    before, after = by_labels_alone(before), by_labels_alone(after)
    found: list[LostDevices] = []
    for task in asked:
        was = _matching(task, before)
        if not was:
            continue
        now = _matching(task, after)
        lost = tuple(sorted(set(was) - set(now)))
        if lost:
            found.append(LostDevices(task, len(was), len(now), lost))
    found.sort(key=lambda item: (item.after > 0, -len(item.lost), item.asked.repository, item.asked.name))
    return tuple(found)


def _matching(task: AskedTask, inventory: Inventory) -> tuple[str, ...]:
    resolution = resolve(task.requirements, inventory, repository=task.repository or None)
    return tuple(device.id for device in resolution.eligible)
