"""An inventory file merged into the live inventory, three ways, as ``kubectl apply`` does it.

The three inventories are the *base* (the file as last imported), the *file* (as it is now) and the
*database* (as it is now, with the edits made on the web since, the states pool owners set, the hosts
runners report). Per pool, device and runner host, and per field of each:

- a field the file did not change since the base keeps the database's value;
- a field the file changed is applied when the database still has the base's value (or the file's);
- a field both changed, to different values, is a :class:`Conflict`.

Labels merge key by key, owners, repositories and tags item by item (so those never conflict while there is
a base), other fields as values. An object the base does not have has no base value for any field: where
file and database agree nothing happens, where they differ it is a conflict. With no base at all (the first
import, or a database from before imports were stored) every object is such an object: into an empty
database everything is added; into a filled one every field where the file and the database differ is a
conflict, so nothing live is overwritten without ``force``.

Objects the file no longer names are removed only with ``prune``, and only when the database still has them
as the base had them; an object the database changed since, or one that was never imported (added on the
web), is a conflict. ``force`` resolves every conflict the file's way.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Generic, Literal, TypeVar

from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost
from kerrigan.core.inventory_diff import InventoryDiff, diff_inventories

T = TypeVar("T", Pool, Device, RunnerHost)


class _Unknown:
    """The base value of a field whose object the base does not have."""

    _instance: _Unknown | None = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Final = _Unknown()


@dataclass(frozen=True, slots=True)
class Whole:
    """How a whole object stands in one of the three inventories (``present``, ``absent``, ``changed: …``)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class Conflict:
    """A field (or, with ``field`` empty, an object) that the file and the database changed differently.

    ``base`` is :data:`UNKNOWN` when the base does not have the object; ``None`` anywhere means absent.
    """

    subject_type: str  # "pool", "device" or "host"
    subject_id: str
    field: str
    base: object
    file: object
    database: object

    def __str__(self) -> str:
        where = f"{self.subject_type} {self.subject_id}" + (f" {self.field}" if self.field else "")
        return (
            f"! {where}: last import {_show(self.base)}, file {_show(self.file)}, "
            f"database {_show(self.database)}"
        )


def _show(value: object) -> str:
    if value is UNKNOWN:
        return "(unknown)"
    if value is None:
        return "(absent)"
    if isinstance(value, Whole):
        return value.text
    if isinstance(value, (frozenset, set)):
        value = sorted(value)
    if isinstance(value, HealthCheck):
        value = value.as_document()
    return json.dumps(value, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class MergePlan:
    """What an import would do: the inventory to store, the changes that make it, the conflicts, and the
    base the next import merges against."""

    merged: Inventory
    diff: InventoryDiff
    conflicts: tuple[Conflict, ...]
    next_base: Inventory


# -- the fields of each kind of object -------------------------------------------------------------

Kind = Literal["value", "map", "set"]


@dataclass(frozen=True, slots=True)
class _Field(Generic[T]):
    name: str
    kind: Kind
    read: Callable[[T], object]


class _Values:
    """The merged fields of one object, read back with their types."""

    def __init__(self, values: Mapping[str, object]) -> None:
        self._values = values

    def text(self, name: str) -> str:
        value = self._values[name]
        assert isinstance(value, str)
        return value

    def optional(self, name: str) -> str | None:
        value = self._values[name]
        assert value is None or isinstance(value, str)
        return value

    def time(self, name: str) -> datetime | None:
        value = self._values[name]
        assert value is None or isinstance(value, datetime)
        return value

    def items(self, name: str) -> list[str]:
        value = self._values[name]
        assert isinstance(value, list)
        return [str(item) for item in value]

    def labels(self, name: str) -> dict[str, str]:
        value = self._values[name]
        assert isinstance(value, dict)
        return {str(key): str(item) for key, item in value.items()}

    def check(self, name: str) -> HealthCheck | None:
        value = self._values[name]
        assert value is None or isinstance(value, HealthCheck)
        return value

    def flag(self, name: str) -> bool:
        return bool(self._values[name])


def _pool_rebuild(pool: Pool, values: _Values) -> Pool:
    return dataclasses.replace(
        pool,
        name=values.text("name"),
        firmware=Firmware(values.optional("firmware.channel"), values.optional("firmware.base_version")),
        owners=tuple(values.items("owners")),
        repositories=tuple(values.items("repositories")),
        labels=values.labels("labels"),
        tags=frozenset(values.items("tags")),
        health_check=values.check("health_check"),
    )


def _device_rebuild(device: Device, values: _Values) -> Device:
    # Only the fields the file carries are replaced: any other keeps the database's value.
    return dataclasses.replace(
        device,
        pool_id=values.text("pool"),
        board=values.text("board"),
        target_type=values.text("target_type"),
        os_type=values.text("os_type"),
        host=values.text("host"),
        state=DeviceState(values.text("state")),
        state_reason=values.text("state_reason"),
        state_note=dataclasses.replace(device.state_note, until=values.time("state_until")),
        labels=values.labels("labels"),
        tags=frozenset(values.items("tags")),
        health_check=values.check("health_check"),
    )


def _host_rebuild(host: RunnerHost, values: _Values) -> RunnerHost:
    return dataclasses.replace(host, online=values.flag("online"))


POOL_MERGE_FIELDS: Final[tuple[_Field[Pool], ...]] = (
    _Field("name", "value", lambda p: p.name),
    _Field("firmware.channel", "value", lambda p: p.firmware.channel),
    _Field("firmware.base_version", "value", lambda p: p.firmware.base_version),
    _Field("owners", "set", lambda p: p.owners),
    _Field("repositories", "set", lambda p: p.repositories),
    _Field("labels", "map", lambda p: p.labels),
    _Field("tags", "set", lambda p: sorted(p.tags)),
    _Field("health_check", "value", lambda p: p.health_check),
)
DEVICE_MERGE_FIELDS: Final[tuple[_Field[Device], ...]] = (
    _Field("pool", "value", lambda d: d.pool_id),
    _Field("board", "value", lambda d: d.board),
    _Field("target_type", "value", lambda d: d.target_type),
    _Field("os_type", "value", lambda d: d.os_type),
    _Field("host", "value", lambda d: d.host),
    _Field("state", "value", lambda d: d.state.value),
    _Field("state_reason", "value", lambda d: d.state_reason),
    _Field("state_until", "value", lambda d: d.state_until),
    _Field("labels", "map", lambda d: d.labels),
    _Field("tags", "set", lambda d: sorted(d.tags)),
    _Field("health_check", "value", lambda d: d.health_check),
)
HOST_MERGE_FIELDS: Final[tuple[_Field[RunnerHost], ...]] = (_Field("online", "value", lambda h: h.online),)


@dataclass(frozen=True, slots=True)
class _Kind(Generic[T]):
    name: str
    fields: tuple[_Field[T], ...]
    rebuild: Callable[[T, _Values], T]


_ORDER: Final = {"host": 0, "pool": 1, "device": 2}
_POOLS: Final = _Kind("pool", POOL_MERGE_FIELDS, _pool_rebuild)
_DEVICES: Final = _Kind("device", DEVICE_MERGE_FIELDS, _device_rebuild)
_HOSTS: Final = _Kind("host", HOST_MERGE_FIELDS, _host_rebuild)


def _changed_fields(kind: _Kind[T], before: T, after: T) -> list[str]:
    """The fields (labels key by key) in which ``after`` differs from ``before``."""
    names: list[str] = []
    for field in kind.fields:
        old, new = field.read(before), field.read(after)
        if field.kind == "map":
            assert isinstance(old, Mapping)
            assert isinstance(new, Mapping)
            names += [
                f"{field.name}.{key}" for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)
            ]
        elif field.kind == "set":
            if set(old) != set(new):  # type: ignore[call-overload]
                names.append(field.name)
        elif old != new:
            names.append(field.name)
    return names


# -- merging ---------------------------------------------------------------------------------------


class _Merger:
    def __init__(self, *, force: bool) -> None:
        self.force = force
        self.conflicts: list[Conflict] = []

    def value(self, where: tuple[str, str, str], base: object, file: object, database: object) -> object:
        if file == base:
            return database  # the file did not change it: the database's value stands
        if database in (base, file):
            return file
        self.conflicts.append(Conflict(*where, base, file, database))
        return file if self.force else database

    def mapping(
        self, where: tuple[str, str, str], base: object, file: Mapping[str, str], database: Mapping[str, str]
    ) -> dict[str, str]:
        old = base if isinstance(base, Mapping) else None
        subject_type, subject_id, name = where
        merged: dict[str, str] = {}
        for key in dict.fromkeys([*database, *file, *(old or ())]):
            value = self.value(
                (subject_type, subject_id, f"{name}.{key}"),
                old.get(key) if old is not None else UNKNOWN,
                file.get(key),
                database.get(key),
            )
            if value is not None:
                merged[key] = str(value)
        return merged

    def items(
        self, where: tuple[str, str, str], base: object, file: Sequence[str], database: Sequence[str]
    ) -> list[str]:
        if not isinstance(base, Sequence):
            # No base: item by item, every difference would be a conflict; one conflict for the field says it
            # more plainly.
            if set(file) == set(database):
                return list(database)
            self.conflicts.append(Conflict(*where, UNKNOWN, sorted(file), sorted(database)))
            return list(file if self.force else database)
        removed = set(base) - set(file)
        added = [item for item in file if item not in base and item not in database]
        return [item for item in database if item not in removed] + added

    def fields(self, kind: _Kind[T], base: T | None, file: T, database: T) -> T:
        values: dict[str, object] = {}
        for field in kind.fields:
            where = (kind.name, file.id, field.name)
            old = field.read(base) if base is not None else UNKNOWN
            new, now = field.read(file), field.read(database)
            if field.kind == "map":
                values[field.name] = self.mapping(where, old, new, now)  # type: ignore[arg-type]
            elif field.kind == "set":
                values[field.name] = self.items(where, old, new, now)  # type: ignore[arg-type]
            else:
                values[field.name] = self.value(where, old, new, now)
        return kind.rebuild(database, _Values(values))

    def objects(
        self,
        kind: _Kind[T],
        base: Mapping[str, T],
        file: Mapping[str, T],
        database: Mapping[str, T],
        *,
        prune: bool,
        keep: Collection[str] = (),
        implicit: Collection[str] = (),
    ) -> tuple[dict[str, T], dict[str, T]]:
        """The merged objects of one kind in database-then-file order, and those to carry in the next base
        (the base's objects the file dropped that stay in the database).

        ``keep`` are never pruned (still in use); ``implicit`` the base has without fields of their own (the
        hosts its devices named).
        """
        merged: dict[str, T] = {}
        retained: dict[str, T] = {}
        for object_id in dict.fromkeys([*database, *file]):
            old, new, now = base.get(object_id), file.get(object_id), database.get(object_id)
            if new is not None and now is not None:
                merged[object_id] = self.fields(kind, old, new, now)
            elif new is not None:
                if old is None:
                    merged[object_id] = new
                    continue
                edits = _changed_fields(kind, old, new)
                if not edits:
                    continue  # removed from the database since the last import, and the file is as it was
                self.conflicts.append(
                    Conflict(
                        kind.name,
                        object_id,
                        "",
                        Whole("present"),
                        Whole("changed: " + ", ".join(edits)),
                        Whole("absent"),
                    )
                )
                if self.force:
                    merged[object_id] = new
            elif now is not None:
                if not prune or object_id in keep:
                    merged[object_id] = now
                    if old is not None:
                        retained[object_id] = old
                    continue
                if old is None and object_id in implicit:
                    continue  # the base named it, with nothing of its own to have changed: removed
                if old is None:
                    # Never imported: added on the web (or by a runner token), or there is no base at all.
                    self.conflicts.append(
                        Conflict(kind.name, object_id, "", UNKNOWN, Whole("absent"), Whole("present"))
                    )
                elif edits := _changed_fields(kind, old, now):
                    self.conflicts.append(
                        Conflict(
                            kind.name,
                            object_id,
                            "",
                            Whole("present"),
                            Whole("absent"),
                            Whole("changed: " + ", ".join(edits)),
                        )
                    )
                else:
                    continue  # unchanged since the last import: removed
                if not self.force:
                    merged[object_id] = now
                    retained[object_id] = old if old is not None else now
        return merged, retained


def _by_id(items: Iterable[T]) -> dict[str, T]:
    return {item.id: item for item in items}


def merge_inventory(
    base: Inventory | None,
    file: Inventory,
    database: Inventory,
    *,
    prune: bool = False,
    force: bool = False,
) -> MergePlan:
    """Merge ``file`` into ``database`` against ``base`` (``None``: no earlier import); see the module."""
    base = base or Inventory((), (), ())
    merger = _Merger(force=force)
    devices, kept_devices = merger.objects(
        _DEVICES, base.devices_by_id, file.devices_by_id, database.devices_by_id, prune=prune
    )
    # A pool that a device of the merge stays in is not pruned (a device the web moved into it, say).
    pools, kept_pools = merger.objects(
        _POOLS,
        base.pools_by_id,
        file.pools_by_id,
        database.pools_by_id,
        prune=prune,
        keep={device.pool_id for device in devices.values()},
    )
    # A pool the database removed while the file kept it as it was, that a device of the merge needs.
    for device in devices.values():
        if device.pool_id not in pools and device.pool_id in file.pools_by_id:
            merger.conflicts.append(
                Conflict(
                    "pool",
                    device.pool_id,
                    "",
                    Whole("present"),
                    Whole(f"present, with device {device.id}"),
                    Whole("absent"),
                )
            )
            if force:
                pools[device.pool_id] = file.pools_by_id[device.pool_id]
    # A runner host the file names only through its devices is named all the same, and one a device of the
    # merge is on is in use: neither is pruned.
    base_hosts, file_hosts = _by_id(base.hosts), _by_id(file.hosts)
    hosts, kept_hosts = merger.objects(
        _HOSTS,
        base_hosts,
        file_hosts,
        _by_id(database.hosts),
        prune=prune,
        keep={device.host for device in (*file.devices, *devices.values())},
        implicit={device.host for device in base.devices} - base_hosts.keys(),
    )
    merged = Inventory(tuple(pools.values()), tuple(devices.values()), tuple(hosts.values()))
    next_pools = file.pools_by_id.keys() | kept_pools.keys()
    next_base = Inventory(
        (*file.pools, *(p for p in kept_pools.values() if p.id not in file.pools_by_id)),
        (
            *file.devices,
            *(d for d in kept_devices.values() if d.id not in file.devices_by_id and d.pool_id in next_pools),
        ),
        (*file.hosts, *(h for h in kept_hosts.values() if h.id not in file_hosts)),
    )
    diff = diff_inventories(database, merged, prune=True)
    conflicts = sorted(merger.conflicts, key=lambda c: _ORDER[c.subject_type])  # as the diff: hosts first
    return MergePlan(merged, diff, tuple(conflicts), next_base)
