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

from kerrigan.core.inventory import Device
from kerrigan.core.manifest import Strategy


def select_devices(
    candidates: Sequence[Sequence[Device]], strategy: Strategy, max_devkits: int
) -> list[Device | None]:
    """One device (or ``None`` when it has no candidate) per task, in task order."""
    held: dict[str, Device] = {}
    uses: Counter[str] = Counter()
    pools: Counter[str] = Counter()
    hosts: Counter[str] = Counter()
    boards: Counter[str] = Counter()
    choice: list[Device | None] = []
    for eligible in candidates:
        if not eligible:
            choice.append(None)
            continue
        picked: Device | None = None
        if len(held) >= max_devkits:
            reusable = [dev for dev in eligible if dev.id in held]
            if reusable:
                picked = min(reusable, key=lambda dev: uses[dev.id])
        if picked is None:
            fresh = [dev for dev in eligible if dev.id not in held] or list(eligible)
            if strategy is Strategy.SPREAD:
                picked = min(
                    fresh,
                    key=lambda dev: (
                        pools[dev.pool_id],
                        hosts[dev.host],
                        boards[dev.board],
                        uses[dev.id],
                    ),
                )
            else:
                per_host = Counter(dev.host for dev in eligible)
                picked = min(
                    fresh,
                    key=lambda dev: (
                        -hosts[dev.host],
                        -per_host[dev.host],
                        uses[dev.id],
                    ),
                )
        device_id = picked.id
        if device_id not in held:
            held[device_id] = picked
            pools[picked.pool_id] += 1
            hosts[picked.host] += 1
            boards[picked.board] += 1
        uses[device_id] += 1
        choice.append(picked)
    return choice
