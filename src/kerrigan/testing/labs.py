"""Synthetic labs: deterministic inventories of any size for tests and benchmarks."""

from __future__ import annotations

import random

from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost

SDKS = ("2.0.0", "2.1.1", "2.2.0", "2.3.0-rc1")
FORM_FACTORS = ("som", "pcie", "m2")
BOARDS = ("modalix", "davinci", "cortex", "helix", "orion")


def synthetic_lab(pools: int, devices_per_pool: int, *, seed: int = 0) -> Inventory:
    """A lab of ``pools * devices_per_pool`` devices, spread over one runner host per 100 devices.

    About 1 device in 20 is in maintenance, 1 in 100 offline, 1 in 200 retired; 1 host in 25 is offline.
    Pool labels carry the SDK and form factor; a third of the devices add a ``uart`` label and tag,
    and one in ten overrides its pool's SDK.
    """
    rng = random.Random(seed)  # noqa: S311 -- a reproducible lab, not a secret
    total = pools * devices_per_pool
    host_count = max(1, total // 100)
    hosts = tuple(RunnerHost(f"host-{n:04d}", online=n % 25 != 7) for n in range(host_count))
    pool_list: list[Pool] = []
    devices: list[Device] = []
    for p in range(pools):
        sdk = SDKS[p % len(SDKS)]
        form_factor = FORM_FACTORS[(p // len(SDKS)) % len(FORM_FACTORS)]
        pool_id = f"pool-{p:04d}"
        tags = frozenset({f"{sdk}-{form_factor}-devkits"} | ({"ga-firmware"} if p % 3 == 0 else set()))
        pool_list.append(
            Pool(
                id=pool_id,
                name=f"Pool {p} SDK {sdk} {form_factor}",
                owners=(f"owner{p % 17}",),
                firmware=Firmware(channel="ga" if p % 4 else "beta", base_version=sdk),
                labels={"sdk": sdk, "form_factor": form_factor, "purpose": "ci" if p % 2 else "ga"},
                tags=tags,
            )
        )
        for d in range(devices_per_pool):
            n = p * devices_per_pool + d
            labels: dict[str, str] = {}
            device_tags: set[str] = set()
            if rng.random() < 1 / 3:
                labels["uart"] = "enabled"
                device_tags.add("uart-debug")
            if rng.random() < 0.1:
                labels["sdk"] = rng.choice(SDKS)
            roll = rng.random()
            state = DeviceState.AVAILABLE
            if roll < 0.005:
                state = DeviceState.RETIRED
            elif roll < 0.015:
                state = DeviceState.OFFLINE
            elif roll < 0.065:
                state = DeviceState.MAINTENANCE
            devices.append(
                Device(
                    id=f"dev-{n:06d}",
                    pool_id=pool_id,
                    board=BOARDS[n % len(BOARDS)],
                    target_type="devkit",
                    os_type="linux" if n % 7 else "rtos",
                    host=hosts[n % host_count].id,
                    state=state,
                    labels=labels,
                    tags=frozenset(device_tags),
                )
            )
    return Inventory(tuple(pool_list), tuple(devices), hosts)
