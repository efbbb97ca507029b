"""The label inventory: pools of devices on runner hosts, and the labels each one carries.

Effective labels follow the seed's formulas::

    effective_pool_labels   = explicit_pool_labels + implicit_pool_labels
    effective_device_labels = effective_pool_labels + explicit_device_labels + implicit_device_labels

A device's explicit labels override its pool's only for keys outside the reserved ``kerrigan.`` namespace
(explicit labels can never hold such keys, so the override rule holds by construction and is checked again
here). A device's tags are its pool's tags plus its own.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kerrigan.core.labels import is_reserved, slugify


class DeviceState(enum.StrEnum):
    """Where a device stands; only ``available`` devices take jobs."""

    AVAILABLE = "available"
    MAINTENANCE = "maintenance"
    OFFLINE = "offline"
    RETIRED = "retired"


class LabelSource(enum.StrEnum):
    """Where an effective label's value comes from."""

    POOL = "pool"
    DEVICE = "device"
    DEVICE_OVERRIDE = "device override"
    IMPLICIT = "implicit"


@dataclass(frozen=True, slots=True)
class Firmware:
    """A pool's firmware policy, exposed as ``kerrigan.firmware_*`` labels."""

    channel: str | None = None
    base_version: str | None = None


@dataclass(frozen=True, slots=True)
class Pool:
    """A set of devices that share labels, tags, a firmware policy and owners."""

    id: str
    name: str
    owners: tuple[str, ...] = ()
    firmware: Firmware = Firmware()
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Device:
    """One devkit (a target) in a pool, driven by a runner host."""

    id: str
    pool_id: str
    board: str
    target_type: str
    os_type: str
    host: str
    state: DeviceState = DeviceState.AVAILABLE
    state_reason: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class RunnerHost:
    """A machine that drives devices; a device on an offline host cannot run anything."""

    id: str
    online: bool = True


def implicit_pool_labels(pool: Pool) -> dict[str, str]:
    """The ``kerrigan.`` labels Kerrigan generates for a pool."""
    labels = {
        "kerrigan.pool_id": pool.id,
        "kerrigan.pool_name": slugify(pool.name) or pool.id,
    }
    if pool.firmware.channel:
        labels["kerrigan.firmware_channel"] = pool.firmware.channel
    if pool.firmware.base_version:
        labels["kerrigan.firmware_base_version"] = pool.firmware.base_version
    return labels


def implicit_device_labels(device: Device) -> dict[str, str]:
    """The ``kerrigan.`` labels Kerrigan generates for a device (a target)."""
    return {
        "kerrigan.target_id": device.id,
        "kerrigan.board": device.board,
        "kerrigan.target_type": device.target_type,
        "kerrigan.os_type": device.os_type,
        "kerrigan.host": device.host,
    }


def effective_pool_labels(pool: Pool) -> dict[str, str]:
    """``explicit_pool_labels + implicit_pool_labels``."""
    labels = {key: value for key, value in pool.labels.items() if not is_reserved(key)}
    labels.update(implicit_pool_labels(pool))
    return labels


def effective_target_labels(target: Device, pool: Pool) -> dict[str, str]:
    """``effective_pool_labels + explicit_device_labels + implicit_device_labels``."""
    labels = effective_pool_labels(pool)
    labels.update((k, v) for k, v in target.labels.items() if not is_reserved(k))
    labels.update(implicit_device_labels(target))
    return labels


def effective_target_tags(target: Device, pool: Pool) -> frozenset[str]:
    """A device's tags are its pool's tags plus its own."""
    return pool.tags | target.tags


@dataclass(frozen=True, slots=True)
class SourcedLabel:
    """An effective label with where its value came from."""

    key: str
    value: str
    source: LabelSource
    overrides: str | None = None  # the pool's value a device label replaced


def sourced_target_labels(target: Device, pool: Pool) -> list[SourcedLabel]:
    """The effective labels of a device, each marked with where it came from, sorted by key."""
    sourced = {k: SourcedLabel(k, v, LabelSource.POOL) for k, v in pool.labels.items()}
    for key, value in implicit_pool_labels(pool).items():
        sourced[key] = SourcedLabel(key, value, LabelSource.IMPLICIT)
    for key, value in target.labels.items():
        if is_reserved(key):
            continue
        below = sourced.get(key)
        if below is None:
            sourced[key] = SourcedLabel(key, value, LabelSource.DEVICE)
        else:
            sourced[key] = SourcedLabel(key, value, LabelSource.DEVICE_OVERRIDE, below.value)
    for key, value in implicit_device_labels(target).items():
        sourced[key] = SourcedLabel(key, value, LabelSource.IMPLICIT)
    return [sourced[key] for key in sorted(sourced)]


@dataclass(frozen=True, slots=True)
class IndexedDevice:
    """A device with its effective labels and tags worked out once, for matching."""

    device: Device
    pool: Pool
    labels: Mapping[str, str]
    tags: frozenset[str]
    host_online: bool


@dataclass(frozen=True)
class Inventory:
    """A consistent snapshot of pools, devices and runner hosts.

    A device whose host is not listed in ``hosts`` is taken to be on an online host.
    """

    pools: tuple[Pool, ...] = ()
    devices: tuple[Device, ...] = ()
    hosts: tuple[RunnerHost, ...] = ()

    @cached_property
    def pools_by_id(self) -> dict[str, Pool]:
        """Pools keyed by id."""
        return {pool.id: pool for pool in self.pools}

    @cached_property
    def devices_by_id(self) -> dict[str, Device]:
        """Devices keyed by id."""
        return {device.id: device for device in self.devices}

    @cached_property
    def pool_labels(self) -> dict[str, dict[str, str]]:
        """Each pool's effective labels, keyed by pool id."""
        return {pool.id: effective_pool_labels(pool) for pool in self.pools}

    @cached_property
    def indexed(self) -> dict[str, tuple[IndexedDevice, ...]]:
        """Every device with its effective labels, grouped by pool id in the pools' order."""
        offline = {host.id for host in self.hosts if not host.online}
        by_pool: dict[str, list[IndexedDevice]] = {pool.id: [] for pool in self.pools}
        for device in self.devices:
            pool = self.pools_by_id[device.pool_id]
            labels = dict(self.pool_labels[pool.id])
            for key, value in device.labels.items():
                if not is_reserved(key):
                    labels[key] = value
            labels.update(implicit_device_labels(device))
            by_pool[pool.id].append(
                IndexedDevice(
                    device=device,
                    pool=pool,
                    labels=labels,
                    tags=pool.tags | device.tags,
                    host_online=device.host not in offline,
                )
            )
        return {pool_id: tuple(devices) for pool_id, devices in by_pool.items()}

    @cached_property
    def label_keys(self) -> frozenset[str]:
        """Every label key some device carries (for "did you mean")."""
        keys: set[str] = set()
        for devices in self.indexed.values():
            for indexed in devices:
                keys.update(indexed.labels)
        return frozenset(keys)

    @cached_property
    def label_values(self) -> dict[str, frozenset[str]]:
        """Every value in use, by key (for "did you mean")."""
        values: dict[str, set[str]] = {}
        for devices in self.indexed.values():
            for indexed in devices:
                for key, value in indexed.labels.items():
                    values.setdefault(key, set()).add(value)
        return {key: frozenset(found) for key, found in values.items()}

    @cached_property
    def all_tags(self) -> frozenset[str]:
        """Every tag some device carries."""
        tags: set[str] = set()
        for devices in self.indexed.values():
            for indexed in devices:
                tags.update(indexed.tags)
        return frozenset(tags)
