"""Writing an inventory in the file's shape, and reading back what was written.

:func:`inventory_document` writes an inventory so that reading it (:func:`~kerrigan.core.inventory_file.
reading.parse_inventory`) gives the same inventory; :func:`inventory_from_document` reads such a document back
without checking it again (the stored base of an import, which only this module wrote).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from kerrigan.core.device_status import NO_NOTE, StateNote
from kerrigan.core.health_checks import HealthCheck, health_check_from_document
from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost
from kerrigan.core.inventory_file.reading import DEFAULT_OS_TYPE, DEFAULT_TARGET_TYPE


def inventory_document(inventory: Inventory) -> dict[str, object]:
    """The inventory in the file's shape (devices nested under their pools), ready for YAML or JSON."""
    by_pool: dict[str, list[dict[str, object]]] = {pool.id: [] for pool in inventory.pools}
    for device in inventory.devices:
        entry: dict[str, object] = {
            "id": device.id,
            "board": device.board,
            "target_type": device.target_type,
            "os_type": device.os_type,
            "host": device.host,
            "state": device.state.value,
        }
        if device.state_reason:
            entry["state_reason"] = device.state_reason
        if device.state_until is not None:
            entry["state_until"] = device.state_until.astimezone(UTC).isoformat()
        if device.labels:
            entry["labels"] = dict(sorted(device.labels.items()))
        if device.tags:
            entry["tags"] = sorted(device.tags)
        if device.health_check is not None:
            entry["health_check"] = device.health_check.as_document()
        if device.health.health.value != "unknown" or device.health.reason:  # read-only: imports ignore it
            entry["health"] = {
                "health": device.health.health.value,
                "reason": device.health.reason,
                **({"since": device.health.since.isoformat()} if device.health.since else {}),
                **({"job": device.health.job} if device.health.job is not None else {}),
            }
        by_pool[device.pool_id].append(entry)
    pools: list[dict[str, object]] = []
    for pool in inventory.pools:
        doc: dict[str, object] = {"id": pool.id, "name": pool.name}
        if pool.owners:
            doc["owners"] = list(pool.owners)
        if pool.repositories:
            doc["repositories"] = list(pool.repositories)
        firmware = {
            key: value
            for key, value in (
                ("channel", pool.firmware.channel),
                ("base_version", pool.firmware.base_version),
            )
            if value
        }
        if firmware:
            doc["firmware"] = firmware
        if pool.labels:
            doc["labels"] = dict(sorted(pool.labels.items()))
        if pool.tags:
            doc["tags"] = sorted(pool.tags)
        if pool.health_check is not None:
            doc["health_check"] = pool.health_check.as_document()
        doc["devices"] = by_pool[pool.id]
        pools.append(doc)
    document: dict[str, object] = {}
    if inventory.hosts:
        document["hosts"] = [
            {"id": host.id, "state": "online" if host.online else "offline"} for host in inventory.hosts
        ]
    document["pools"] = pools
    return document


class DocumentError(ValueError):
    """A document that :func:`inventory_document` did not write."""


def _texts(value: object) -> list[str]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise DocumentError(f"expected a list, not {value!r}")
    return [str(item) for item in value]


def _labels_of(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise DocumentError(f"expected a mapping, not {value!r}")
    return {str(key): str(item) for key, item in value.items()}


def _health_check_of(value: object) -> HealthCheck | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DocumentError(f"expected a mapping, not {value!r}")
    return health_check_from_document(value)


def _note_of(item: Mapping[str, object]) -> StateNote:
    """A stored device's ``state_until`` (ISO 8601) as its note."""
    until = item.get("state_until")
    if until is None:
        return NO_NOTE
    return StateNote(str(item.get("state_reason", "")), until=datetime.fromisoformat(str(until)))


def inventory_from_document(document: Mapping[str, object]) -> Inventory:
    """The inventory an :func:`inventory_document` holds (keys it does not write, such as ``health``, are
    skipped); :class:`DocumentError` if it is not one."""
    try:
        hosts = tuple(
            RunnerHost(str(entry["id"]), entry.get("state", "online") != "offline")
            for entry in document.get("hosts", ())  # type: ignore[attr-defined]
        )
        pools: list[Pool] = []
        devices: list[Device] = []
        for entry in document["pools"]:  # type: ignore[attr-defined]
            firmware = entry.get("firmware") or {}
            pools.append(
                Pool(
                    str(entry["id"]),
                    str(entry["name"]),
                    tuple(_texts(entry.get("owners", ()))),
                    Firmware(firmware.get("channel"), firmware.get("base_version")),
                    _labels_of(entry.get("labels", {})),
                    frozenset(_texts(entry.get("tags", ()))),
                    tuple(_texts(entry.get("repositories", ()))),
                    _health_check_of(entry.get("health_check")),
                )
            )
            devices += (
                Device(
                    str(item["id"]),
                    str(entry["id"]),
                    str(item["board"]),
                    str(item.get("target_type", DEFAULT_TARGET_TYPE)),
                    str(item.get("os_type", DEFAULT_OS_TYPE)),
                    str(item["host"]),
                    DeviceState(item.get("state", DeviceState.AVAILABLE.value)),
                    str(item.get("state_reason", "")),
                    _labels_of(item.get("labels", {})),
                    frozenset(_texts(item.get("tags", ()))),
                    state_note=_note_of(item),
                    health_check=_health_check_of(item.get("health_check")),
                )
                for item in entry.get("devices", ())
            )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise DocumentError(f"not an inventory document: {exc!r}") from exc
    return Inventory(tuple(pools), tuple(devices), hosts)
