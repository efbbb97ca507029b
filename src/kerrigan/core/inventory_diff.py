"""What applying an inventory file would change: pools, devices, hosts and their fields, before and after.

Objects the file names are set exactly as the file says (a label the file no longer lists on a pool it names
is removed). Objects the file does not name are left alone, unless ``prune`` is asked for.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Device, Inventory, Pool, RunnerHost


class ChangeKind(enum.StrEnum):
    """Whether a change adds, alters or removes something."""

    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field of one object, before and after (``None`` where it had or will have no value)."""

    kind: ChangeKind
    subject_type: str  # "pool", "device" or "host"
    subject_id: str
    field: str  # "" for the object as a whole
    before: object
    after: object

    def __str__(self) -> str:
        sign = {ChangeKind.ADD: "+", ChangeKind.CHANGE: "~", ChangeKind.REMOVE: "-"}[self.kind]
        where = f"{self.subject_type} {self.subject_id}"
        if not self.field:
            return f"{sign} {where}"
        if self.kind is ChangeKind.ADD:
            return f"{sign} {where} {self.field}: {_show(self.after)}"
        if self.kind is ChangeKind.REMOVE:
            return f"{sign} {where} {self.field} (was {_show(self.before)})"
        return f"{sign} {where} {self.field}: {_show(self.before)} -> {_show(self.after)}"


def _show(value: object) -> str:
    if isinstance(value, (list, tuple, frozenset, set)):
        return "[" + ", ".join(sorted(str(item) for item in value)) + "]"
    return str(value)


@dataclass(frozen=True, slots=True)
class InventoryDiff:
    """Every change, objects first and then their fields, in file order."""

    changes: tuple[FieldChange, ...]

    def __bool__(self) -> bool:
        return bool(self.changes)

    def counts(self) -> dict[str, int]:
        """How many pools, devices and hosts are added, changed and removed."""
        counts: dict[str, int] = {}
        touched: set[tuple[str, str]] = set()
        for change in self.changes:
            if change.field and (change.subject_type, change.subject_id) in touched:
                continue
            touched.add((change.subject_type, change.subject_id))
            kind = change.kind if not change.field else ChangeKind.CHANGE
            name = f"{change.subject_type}s {kind.value}{'d' if kind is ChangeKind.CHANGE else 'ed'}"
            if kind is ChangeKind.REMOVE:
                name = f"{change.subject_type}s removed"
            counts[name] = counts.get(name, 0) + 1
        return counts

    def subjects(self, kind: ChangeKind, subject_type: str) -> list[str]:
        """Ids of the objects this diff adds or removes as a whole."""
        return [
            c.subject_id
            for c in self.changes
            if c.kind is kind and c.subject_type == subject_type and not c.field
        ]

    def changed(self, subject_type: str) -> list[str]:
        """Ids of objects of ``subject_type`` that stay but have changed fields."""
        added = set(self.subjects(ChangeKind.ADD, subject_type))
        seen: dict[str, None] = {}
        for change in self.changes:
            if change.subject_type == subject_type and change.field and change.subject_id not in added:
                seen.setdefault(change.subject_id)
        return list(seen)


def _map_changes(
    subject_type: str, subject_id: str, prefix: str, before: Mapping[str, str], after: Mapping[str, str]
) -> Iterable[FieldChange]:
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        kind = ChangeKind.ADD if old is None else ChangeKind.REMOVE if new is None else ChangeKind.CHANGE
        yield FieldChange(kind, subject_type, subject_id, f"{prefix}.{key}", old, new)


def _set_changes(
    subject_type: str, subject_id: str, field: str, before: Iterable[str], after: Iterable[str]
) -> Iterable[FieldChange]:
    old, new = frozenset(before), frozenset(after)
    for item in sorted(new - old):
        yield FieldChange(ChangeKind.ADD, subject_type, subject_id, field, None, item)
    for item in sorted(old - new):
        yield FieldChange(ChangeKind.REMOVE, subject_type, subject_id, field, item, None)


def _value_changes(
    subject_type: str, subject_id: str, pairs: Iterable[tuple[str, object, object]]
) -> Iterable[FieldChange]:
    for field, old, new in pairs:
        if old != new:
            yield FieldChange(ChangeKind.CHANGE, subject_type, subject_id, field, old, new)


def _check(check: HealthCheck | None) -> dict[str, object] | None:
    return check.as_document() if check is not None else None


def pool_field_changes(before: Pool, after: Pool) -> list[FieldChange]:
    """How ``after`` differs from ``before``, field by field."""
    changes = list(
        _value_changes(
            "pool",
            after.id,
            [
                ("name", before.name, after.name),
                ("firmware.channel", before.firmware.channel, after.firmware.channel),
                ("firmware.base_version", before.firmware.base_version, after.firmware.base_version),
                ("owners", list(before.owners), list(after.owners)),
                ("repositories", list(before.repositories), list(after.repositories)),
                ("health_check", _check(before.health_check), _check(after.health_check)),
            ],
        )
    )
    changes += _map_changes("pool", after.id, "labels", before.labels, after.labels)
    changes += _set_changes("pool", after.id, "tags", before.tags, after.tags)
    return changes


def device_field_changes(before: Device, after: Device) -> list[FieldChange]:
    """How ``after`` differs from ``before``, field by field."""
    changes = list(
        _value_changes(
            "device",
            after.id,
            [
                ("pool", before.pool_id, after.pool_id),
                ("board", before.board, after.board),
                ("target_type", before.target_type, after.target_type),
                ("os_type", before.os_type, after.os_type),
                ("host", before.host, after.host),
                ("state", before.state.value, after.state.value),
                ("state_reason", before.state_reason, after.state_reason),
                ("state_until", before.state_until, after.state_until),
                ("health_check", _check(before.health_check), _check(after.health_check)),
            ],
        )
    )
    changes += _map_changes("device", after.id, "labels", before.labels, after.labels)
    changes += _set_changes("device", after.id, "tags", before.tags, after.tags)
    return changes


def _host_changes(before: RunnerHost, after: RunnerHost) -> list[FieldChange]:
    return list(_value_changes("host", after.id, [("online", before.online, after.online)]))


def diff_inventories(current: Inventory, desired: Inventory, *, prune: bool = False) -> InventoryDiff:
    """The changes that turn ``current`` into ``desired`` (for what ``desired`` names; all, with prune)."""
    changes: list[FieldChange] = []
    hosts_now = {host.id: host for host in current.hosts}
    for host in desired.hosts:
        old_host = hosts_now.get(host.id)
        if old_host is None:
            changes.append(FieldChange(ChangeKind.ADD, "host", host.id, "", None, host))
        else:
            changes += _host_changes(old_host, host)
    for pool in desired.pools:
        old_pool = current.pools_by_id.get(pool.id)
        if old_pool is None:
            changes.append(FieldChange(ChangeKind.ADD, "pool", pool.id, "", None, pool))
        else:
            changes += pool_field_changes(old_pool, pool)
    for device in desired.devices:
        old_device = current.devices_by_id.get(device.id)
        if old_device is None:
            changes.append(FieldChange(ChangeKind.ADD, "device", device.id, "", None, device))
        else:
            changes += device_field_changes(old_device, device)
    if prune:
        for device in current.devices:
            if device.id not in desired.devices_by_id:
                changes.append(FieldChange(ChangeKind.REMOVE, "device", device.id, "", device, None))
        for pool in current.pools:
            if pool.id not in desired.pools_by_id:
                changes.append(FieldChange(ChangeKind.REMOVE, "pool", pool.id, "", pool, None))
        named = {host.id for host in desired.hosts} | {device.host for device in desired.devices}
        for host in current.hosts:
            if host.id not in named:
                changes.append(FieldChange(ChangeKind.REMOVE, "host", host.id, "", host, None))
    return InventoryDiff(tuple(changes))
