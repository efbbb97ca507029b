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
import re
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache, cached_property
from typing import Final, Generic, TypeVar

from kerrigan.core.device_status import (
    NO_NOTE,
    UNKNOWN_HEALTH,
    DeviceHealth,
    DeviceReservation,
    HostPause,
    StateNote,
)
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.labels import is_reserved, slugify

T = TypeVar("T")


POOL_FIELDS: Final = ("id", "name", "owners", "repositories", "firmware", "labels", "tags")
"""The fields of a pool as the inventory file and the API write them."""

DEVICE_FIELDS: Final = (
    "id",
    "pool",
    "board",
    "target_type",
    "os_type",
    "host",
    "state",
    "state_reason",
    "labels",
    "tags",
)
"""The fields of a device as the inventory file and the API write them."""


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


MAX_REPOSITORY_GLOB: Final = 200
MAX_POOL_REPOSITORIES: Final = 100
"""At most this many globs per pool: each is tried against every session's repository."""
_OWNER_PART = r"[A-Za-z0-9*?-]+"
_NAME_PART = r"[A-Za-z0-9._*?-]+"
_REPOSITORY_GLOB = re.compile(rf"{_OWNER_PART}/{_NAME_PART}")
REPOSITORY_OWNER_PATTERN: Final = r"[A-Za-z0-9-]+"
REPOSITORY_NAME_PATTERN: Final = r"[A-Za-z0-9._-]+"
REPOSITORY_PATTERN: Final = (
    f"{REPOSITORY_OWNER_PATTERN}/{REPOSITORY_NAME_PATTERN}"  # the API's document states it
)
_REPOSITORY = re.compile(REPOSITORY_PATTERN)


class RepositoryGlobError(ValueError):
    """A pool's ``repositories`` entry, or a repository name, that is not well formed."""


def validate_repository_glob(text: str) -> str:
    """A glob on ``owner/name`` (``*`` and ``?`` match within one part), or :class:`RepositoryGlobError`."""
    if not 1 <= len(text) <= MAX_REPOSITORY_GLOB or _REPOSITORY_GLOB.fullmatch(text) is None:
        raise RepositoryGlobError(
            f"{text[:MAX_REPOSITORY_GLOB]!r} is not a repository glob: owner/name, 1-{MAX_REPOSITORY_GLOB} "
            "characters, the owner of letters, digits and '-', the name of letters, digits, '.', '_' "
            "and '-', either with the wildcards * and ?"
        )
    return text


def validate_repository(text: str) -> str:
    """A repository's ``owner/name`` (no wildcards), or :class:`RepositoryGlobError`."""
    if not 1 <= len(text) <= MAX_REPOSITORY_GLOB or _REPOSITORY.fullmatch(text) is None:
        raise RepositoryGlobError(
            f"{text[:MAX_REPOSITORY_GLOB]!r} is not a repository: owner/name, the owner of letters, "
            "digits and '-', the name of letters, digits, '.', '_' and '-'"
        )
    return text


@cache
def _glob_pattern(glob: str) -> re.Pattern[str]:
    body = "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in glob)
    return re.compile(body, re.IGNORECASE)


def repository_matches(glob: str, repository: str) -> bool:
    """Whether ``repository`` (``owner/name``) matches ``glob``, ignoring case as GitHub does."""
    return _glob_pattern(glob).fullmatch(repository) is not None


@dataclass(frozen=True, slots=True)
class Pool:
    """A set of devices that share labels, tags, a firmware policy and owners.

    ``repositories`` are globs on ``owner/name``: when there are any, only sessions of the repositories they
    match may use the pool's devices; without them every installed repository may.
    """

    id: str
    name: str
    owners: tuple[str, ...] = ()
    firmware: Firmware = Firmware()
    labels: Mapping[str, str] = field(default_factory=dict)
    tags: frozenset[str] = frozenset()
    repositories: tuple[str, ...] = ()
    health_check: HealthCheck | None = None  # for its devices that define none of their own

    def admits(self, repository: str) -> bool:
        """Whether sessions of ``repository`` may use this pool's devices."""
        return not self.repositories or any(repository_matches(g, repository) for g in self.repositories)


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
    # Live data, not in the inventory file (nor in a device's equality, which is the file's): who set the
    # state and since and until when, the device's health, and whether its runner host finds it.
    state_note: StateNote = field(default=NO_NOTE, compare=False)
    health: DeviceHealth = field(default=UNKNOWN_HEALTH, compare=False)
    present: bool = field(default=True, compare=False)
    reserved: DeviceReservation | None = field(default=None, compare=False)  # a person holds it
    health_check: HealthCheck | None = None  # over its pool's (file data: part of equality)

    @property
    def state_until(self) -> datetime | None:
        """When a maintenance ends by itself (the inventory file's ``state_until``); ``None`` for a device
        in any other state, or in a maintenance without an end."""
        return self.state_note.until if self.state is DeviceState.MAINTENANCE else None


@dataclass(frozen=True, slots=True)
class RunnerHost:
    """A machine that drives devices; a device on an offline host cannot run anything.

    ``vcpus`` is how many vCPUs a job may claim there, as the host's agent last reported them (``None``
    until it has): a task claiming more can never run on it. A ``pause`` keeps new jobs off its devices.
    ``heard`` is whether its agent has ever spoken (a heartbeat or registration): a host an inventory names
    or ``kerrigan runners create`` makes is offline until then, whatever ``online`` says, so nothing is
    leased to a machine with no agent yet (the lease would only run out, as ``runner_lost``).
    """

    id: str
    online: bool = True
    vcpus: int | None = None
    pause: HostPause | None = None
    # Its agent's fact, not the inventory's: a host is the same inventory entry whether or not it spoke.
    heard: bool = field(default=True, compare=False)

    @property
    def up(self) -> bool:
        """Whether it may take work: online, and its agent has spoken."""
        return self.online and self.heard


def health_check_of(device: Device, pool: Pool | None) -> HealthCheck | None:
    """The health check that runs on ``device``: its own, else its pool's (None: it has none)."""
    if device.health_check is not None:
        return device.health_check
    return pool.health_check if pool is not None else None


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


# The implicit device labels and the device attribute each one reads.
_DEVICE_ATTRIBUTES: Final = {
    "kerrigan.target_id": "id",
    "kerrigan.board": "board",
    "kerrigan.target_type": "target_type",
    "kerrigan.os_type": "os_type",
    "kerrigan.host": "host",
}


def implicit_device_labels(device: Device) -> dict[str, str]:
    """The ``kerrigan.`` labels Kerrigan generates for a device (a target)."""
    return {key: getattr(device, attribute) for key, attribute in _DEVICE_ATTRIBUTES.items()}


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
    sourced = {k: SourcedLabel(k, v, LabelSource.POOL) for k, v in pool.labels.items() if not is_reserved(k)}
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
class Column(Generic[T]):
    """One attribute of every device, encoded: ``values[codes[i]]`` is device ``i``'s value.

    A rule is decided once per entry of ``values``; mapping those verdicts over ``codes`` (small integers
    in a compact buffer) costs an index per device, with no hashing and few cache misses.
    """

    values: tuple[T, ...]
    codes: Sequence[int]

    @classmethod
    def encode(cls, items: Iterable[T]) -> Column[T]:
        """Encode ``items`` in order; each distinct item gets the next code."""
        position: dict[T, int] = {}
        codes = [position.setdefault(item, len(position)) for item in items]
        packed: Sequence[int] = bytes(codes) if len(position) <= 256 else array("I", codes)
        return cls(tuple(position), packed)


class InventoryIndex:
    """Columns over a snapshot's devices, built once and shared by every resolution against it.

    Position ``i`` of every column is ``devices[i]`` (inventory order). A label column holds each device's
    effective value for one key, or ``None`` where the device lacks the key; label columns are made on first
    use and kept.
    """

    def __init__(self, inventory: Inventory) -> None:
        self.devices: tuple[Device, ...] = inventory.devices
        self.pool_labels = {pool.id: effective_pool_labels(pool) for pool in inventory.pools}
        self.pool_ids = [device.pool_id for device in self.devices]
        self.pools = Column.encode(self.pool_ids)
        self.hosts = Column.encode(device.host for device in self.devices)
        # Most devices carry the shared defaults: those encode as cheaply as before (an enum, None), and
        # only the others hash their note or health.
        self.states = Column.encode(
            (device.state, device.state_note) if device.state_note is not NO_NOTE else (device.state, None)
            for device in self.devices
        )
        self.health = Column.encode(
            None if device.health is UNKNOWN_HEALTH else device.health for device in self.devices
        )
        self.absent = Column.encode(None if device.present else device.host for device in self.devices)
        self.reserved = Column.encode(device.reserved for device in self.devices)
        self.offline_hosts = frozenset(host.id for host in inventory.hosts if not host.up)
        self.paused_hosts = {host.id: host.pause for host in inventory.hosts if host.pause is not None}
        self.host_vcpus = {host.id: host.vcpus for host in inventory.hosts}
        pools = inventory.pools_by_id
        self.tags = Column.encode(pools[device.pool_id].tags | device.tags for device in self.devices)
        self._labelled = [
            (position, device.labels) for position, device in enumerate(self.devices) if device.labels
        ]
        self._columns: dict[str, Column[str | None]] = {}

    def column(self, key: str) -> Column[str | None]:
        """Every device's effective value for ``key`` (``None`` where it has none)."""
        column = self._columns.get(key)
        if column is None:
            column = self._columns[key] = Column.encode(self._values(key))
        return column

    def _values(self, key: str) -> list[str | None]:
        attribute = _DEVICE_ATTRIBUTES.get(key)
        if attribute is not None:
            return [getattr(device, attribute) for device in self.devices]
        per_pool = {pool_id: labels.get(key) for pool_id, labels in self.pool_labels.items()}
        values = list(map(per_pool.__getitem__, self.pool_ids))
        if not is_reserved(key):
            for position, labels in self._labelled:
                value = labels.get(key)
                if value is not None:
                    values[position] = value
        return values

    @cached_property
    def label_keys(self) -> frozenset[str]:
        """Every label key some device carries (for "did you mean")."""
        keys: set[str] = set(_DEVICE_ATTRIBUTES) if self.devices else set()
        for pool_id in set(self.pool_ids):
            keys.update(self.pool_labels[pool_id])
        for _, labels in self._labelled:
            keys.update(key for key in labels if not is_reserved(key))
        return frozenset(keys)

    @cached_property
    def all_tags(self) -> frozenset[str]:
        """Every tag some device carries."""
        return frozenset().union(*self.tags.values)


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
    def runner_hosts(self) -> tuple[RunnerHost, ...]:
        """Every runner host in id order: those listed, and each device's host that is not (online, not
        reported: as matching takes it)."""
        listed = {host.id: host for host in self.hosts}
        for device in self.devices:
            if device.host not in listed:
                listed[device.host] = RunnerHost(device.host)
        return tuple(listed[host] for host in sorted(listed))

    @cached_property
    def host_pools(self) -> dict[str, frozenset[str]]:
        """The pools of each runner host's devices, by host (a host that drives none is not in it)."""
        pools: dict[str, set[str]] = {}
        for device in self.devices:
            pools.setdefault(device.host, set()).add(device.pool_id)
        return {host: frozenset(ids) for host, ids in pools.items()}

    @cached_property
    def index(self) -> InventoryIndex:
        """The columns matching works on, built once per snapshot."""
        return InventoryIndex(self)
