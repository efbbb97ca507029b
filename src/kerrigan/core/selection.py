"""Choosing one device per task among the eligible ones, for a whole session.

``spread`` puts the session's tasks on distinct pools first, then distinct runner hosts, then distinct
boards; ``pack`` puts them on as few runner hosts as it can. Either way the session holds at most
``max_devkits`` devices: once it holds that many, a task reuses a held device that suits it, and only
takes another (to run when a held one is released) when none does. The same input always gives the same
choice: ties go to the earlier device in inventory order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kerrigan.core.inventory import IndexedDevice
from kerrigan.core.manifest import Strategy


def select_devices(
    candidates: Sequence[Sequence[IndexedDevice]], strategy: Strategy, max_devkits: int
) -> list[IndexedDevice | None]:
    """One device (or ``None`` when it has no candidate) per task, in task order."""
    held: dict[str, IndexedDevice] = {}
    uses: Counter[str] = Counter()
    pools: Counter[str] = Counter()
    hosts: Counter[str] = Counter()
    boards: Counter[str] = Counter()
    choice: list[IndexedDevice | None] = []
    for eligible in candidates:
        if not eligible:
            choice.append(None)
            continue
        picked: IndexedDevice | None = None
        if len(held) >= max_devkits:
            reusable = [dev for dev in eligible if dev.device.id in held]
            if reusable:
                picked = min(reusable, key=lambda dev: uses[dev.device.id])
        if picked is None:
            fresh = [dev for dev in eligible if dev.device.id not in held] or list(eligible)
            if strategy is Strategy.SPREAD:
                picked = min(
                    fresh,
                    key=lambda dev: (
                        pools[dev.pool.id],
                        hosts[dev.device.host],
                        boards[dev.device.board],
                        uses[dev.device.id],
                    ),
                )
            else:
                per_host = Counter(dev.device.host for dev in eligible)
                picked = min(
                    fresh,
                    key=lambda dev: (
                        -hosts[dev.device.host],
                        -per_host[dev.device.host],
                        uses[dev.device.id],
                    ),
                )
        device_id = picked.device.id
        if device_id not in held:
            held[device_id] = picked
            pools[picked.pool.id] += 1
            hosts[picked.device.host] += 1
            boards[picked.device.board] += 1
        uses[device_id] += 1
        choice.append(picked)
    return choice
