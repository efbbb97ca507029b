"""Reading an inventory file a person wrote: every problem placed by file, line and field.

:func:`parse_inventory` checks everything (ids, labels, tags, states, health checks, runner hosts) and
gives the inventory only when the whole file is valid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import yaml

from kerrigan.core.device_status import NO_NOTE, StateNote
from kerrigan.core.health_checks import (
    DEFAULT_TIMEOUT_S,
    DEFAULT_VCPUS,
    HEALTH_CHECK_KEYS,
    MAX_TIMEOUT_S,
    MAX_VCPUS,
    HealthCheck,
    HealthCheckError,
    check_run,
    parse_duration,
)
from kerrigan.core.inventory import (
    DEVICE_FIELDS,
    MAX_POOL_REPOSITORIES,
    POOL_FIELDS,
    Device,
    DeviceState,
    Firmware,
    Inventory,
    Pool,
    RepositoryGlobError,
    RunnerHost,
    validate_repository_glob,
)
from kerrigan.core.labels import (
    LabelError,
    is_valid_name,
    validate_tag,
    validate_user_key,
    validate_value,
)
from kerrigan.core.logins import is_login
from kerrigan.core.printable import is_printable
from kerrigan.core.yamlsource import Problem, SourceReader, is_null, join_field, line_of

_POOL_KEYS: Final = (*POOL_FIELDS, "health_check", "devices")
# `health` is what the export says of a device's health: read-only, so an import skips it (see
# docs/inventory.md). It is checked to be a mapping, no more.
_DEVICE_KEYS: Final = tuple(dict.fromkeys((*DEVICE_FIELDS, "state_until", "health_check", "health")))
_HOST_KEYS: Final = ("id", "state")
_HOST_STATES: Final = ("online", "offline")
DEFAULT_TARGET_TYPE: Final = "devkit"
MAX_STATE_REASON: Final = 500  # as the API takes one
DEFAULT_OS_TYPE: Final = "linux"

Entries = Mapping[str, tuple[yaml.Node, yaml.Node]]


@dataclass(frozen=True, slots=True)
class InventoryResult:
    """An inventory when the file is valid, and every problem found."""

    file: str
    inventory: Inventory | None
    errors: tuple[Problem, ...]


def parse_inventory(text: str, file: str) -> InventoryResult:
    """Read an inventory file's text; ``file`` is the path shown in every problem."""
    return _InventoryParser(file).parse(text)


class _InventoryParser:
    def __init__(self, file: str) -> None:
        self.reader = SourceReader(file)
        self.pools: list[Pool] = []
        self.devices: list[Device] = []
        self.hosts: list[RunnerHost] = []
        self.pool_lines: dict[str, int] = {}
        self.device_lines: dict[str, int] = {}
        self.device_hosts: list[tuple[yaml.Node, str, str]] = []  # (node, field, host)

    def parse(self, text: str) -> InventoryResult:
        r = self.reader
        root = r.compose(text, "inventory")
        top = r.mapping(root, "", ("pools", "devices", "hosts")) if root is not None else None
        if root is not None and top is not None:
            if "hosts" in top:
                self._hosts(top["hosts"][1])
            if "pools" not in top:
                r.error(root, "pools", "is required: list the lab's pools")
            else:
                for index, node in enumerate(r.sequence(top["pools"][1], "pools") or ()):
                    self._pool(node, join_field("pools", index))
            if "devices" in top:
                items = r.sequence(top["devices"][1], "devices") or ()
                for index, node in enumerate(items):
                    self._device(node, join_field("devices", index), pool_id=None)
            self._check_hosts(declared="hosts" in top)
        if r.errors:
            return InventoryResult(r.file, None, r.sorted_errors())
        inventory = Inventory(tuple(self.pools), tuple(self.devices), tuple(self.hosts))
        return InventoryResult(r.file, inventory, ())

    def _identifier(self, entries: Entries, node: yaml.Node, field: str, what: str) -> str | None:
        if "id" not in entries:
            self.reader.error(node, join_field(field, "id"), f"every {what} needs an id")
            return None
        id_node = entries["id"][1]
        value = self.reader.string(id_node, join_field(field, "id"))
        if value is not None and not is_valid_name(value):
            self.reader.error(
                id_node,
                join_field(field, "id"),
                f"{what} id {value!r} is not valid: 1-63 of lowercase letters, digits, '.', '_', '-'",
            )
            return None
        return value

    def _hosts(self, node: yaml.Node) -> None:
        r = self.reader
        seen: dict[str, int] = {}
        for index, item in enumerate(r.sequence(node, "hosts") or ()):
            field = join_field("hosts", index)
            entries = r.mapping(item, field, _HOST_KEYS)
            if entries is None:
                continue
            host_id = self._identifier(entries, item, field, "runner host")
            online = True
            if "state" in entries:
                online = r.choice(entries["state"][1], field + ".state", _HOST_STATES) != "offline"
            if host_id is None:
                continue
            if host_id in seen:
                r.error(
                    item,
                    field + ".id",
                    f"duplicate runner host {host_id!r} (first on line {seen[host_id]})",
                )
                continue
            seen[host_id] = line_of(item)
            self.hosts.append(RunnerHost(host_id, online))

    def _pool(self, node: yaml.Node, field: str) -> None:
        r = self.reader
        entries = r.mapping(node, field, _POOL_KEYS)
        if entries is None:
            return
        pool_id = self._identifier(entries, node, field, "pool")
        name = pool_id or ""
        if "name" in entries:
            name = r.string(entries["name"][1], field + ".name") or name
        owners: list[str] = []
        if "owners" in entries:
            for item, item_field, login in r.strings(
                entries["owners"][1], field + ".owners", scalar_ok=False
            ):
                if not is_login(login):
                    r.error(item, item_field, f"{login!r} is not a GitHub login")
                elif login not in owners:
                    owners.append(login)
        repositories: dict[str, str] = {}  # lowercase -> as written: GitHub names ignore case
        if "repositories" in entries and not is_null(entries["repositories"][1]):
            for item, item_field, glob in r.strings(
                entries["repositories"][1], field + ".repositories", scalar_ok=False
            ):
                try:
                    repositories.setdefault(validate_repository_glob(glob).lower(), glob)
                except RepositoryGlobError as exc:
                    r.error(item, item_field, str(exc))
            if len(repositories) > MAX_POOL_REPOSITORIES:
                r.error(
                    entries["repositories"][1],
                    field + ".repositories",
                    f"{len(repositories)} globs; at most {MAX_POOL_REPOSITORIES}",
                )
        firmware = Firmware()
        if "firmware" in entries and not is_null(entries["firmware"][1]):
            fw = r.mapping(entries["firmware"][1], field + ".firmware", ("channel", "base_version")) or {}
            firmware = Firmware(
                self._value(fw.get("channel"), field + ".firmware.channel", "firmware channel"),
                self._value(
                    fw.get("base_version"),
                    field + ".firmware.base_version",
                    "firmware base version",
                ),
            )
        labels = self._labels(entries.get("labels"), field + ".labels")
        tags = self._tags(entries.get("tags"), field + ".tags")
        health_check = self._health_check(entries.get("health_check"), field + ".health_check")
        if pool_id is not None:
            if pool_id in self.pool_lines:
                r.error(
                    entries["id"][1],
                    field + ".id",
                    f"duplicate pool id {pool_id!r} (first on line {self.pool_lines[pool_id]})",
                )
            else:
                self.pool_lines[pool_id] = line_of(node)
                self.pools.append(
                    Pool(
                        pool_id,
                        name,
                        tuple(owners),
                        firmware,
                        labels,
                        tags,
                        tuple(repositories.values()),
                        health_check,
                    )
                )
        if "devices" in entries and not is_null(entries["devices"][1]):
            items = r.sequence(entries["devices"][1], field + ".devices") or ()
            for index, item in enumerate(items):
                self._device(item, join_field(field + ".devices", index), pool_id=pool_id or "")

    def _device(self, node: yaml.Node, field: str, pool_id: str | None) -> None:
        r = self.reader
        entries = r.mapping(node, field, _DEVICE_KEYS)
        if entries is None:
            return
        device_id = self._identifier(entries, node, field, "device")
        if pool_id is None:
            pool_id = self._device_pool(entries, node, field)
        elif "pool" in entries:
            r.error(
                entries["pool"][0],
                field + ".pool",
                "a device listed under its pool does not name a pool",
            )
        board = self._required_value(entries, node, field, "board")
        target_type = self._optional_value(entries, field, "target_type") or DEFAULT_TARGET_TYPE
        os_type = self._optional_value(entries, field, "os_type") or DEFAULT_OS_TYPE
        host: str | None = None
        if "host" not in entries:
            r.error(node, field + ".host", "is required: name the runner host that drives it")
        else:
            host = r.string(entries["host"][1], field + ".host")
            if host is not None and not is_valid_name(host):
                r.error(
                    entries["host"][1],
                    field + ".host",
                    f"runner host {host!r} is not valid: 1-63 of lowercase letters, digits, '.', '_', '-'",
                )
                host = None
            elif host is not None:
                self.device_hosts.append((entries["host"][1], field + ".host", host))
        state = DeviceState.AVAILABLE
        if "state" in entries:
            chosen = r.choice(entries["state"][1], field + ".state", DeviceState)
            state = DeviceState(chosen) if chosen else state
        state_reason = ""
        if "state_reason" in entries:
            node = entries["state_reason"][1]
            state_reason = r.string(node, field + ".state_reason") or ""
            # As the API takes a reason: it is shown on pages and in check runs, on one line.
            if len(state_reason) > MAX_STATE_REASON or not is_printable(state_reason):
                r.error(
                    node,
                    field + ".state_reason",
                    f"must be printable text on one line, at most {MAX_STATE_REASON} characters",
                )
                state_reason = ""
        until = self._until(entries, field, state)
        labels = self._labels(entries.get("labels"), field + ".labels")
        tags = self._tags(entries.get("tags"), field + ".tags")
        health_check = self._health_check(entries.get("health_check"), field + ".health_check")
        if "health" in entries and not is_null(entries["health"][1]):
            r.mapping(entries["health"][1], field + ".health")
        if device_id is None or not pool_id or board is None or host is None:
            return
        if device_id in self.device_lines:
            r.error(
                entries["id"][1],
                field + ".id",
                f"duplicate device id {device_id!r} (first on line {self.device_lines[device_id]})",
            )
            return
        self.device_lines[device_id] = line_of(node)
        self.devices.append(
            Device(
                device_id,
                pool_id,
                board,
                target_type,
                os_type,
                host,
                state,
                state_reason,
                labels,
                tags,
                state_note=StateNote(state_reason, until=until) if until is not None else NO_NOTE,
                health_check=health_check,
            )
        )

    def _until(self, entries: Entries, field: str, state: DeviceState) -> datetime | None:
        """``state_until``: when a maintenance ends by itself, ISO 8601 with a zone (as export writes it)."""
        if "state_until" not in entries or is_null(entries["state_until"][1]):
            return None
        node = entries["state_until"][1]
        where = field + ".state_until"
        if state is not DeviceState.MAINTENANCE:
            self.reader.error(node, where, "only a device in maintenance ends its state by itself")
            return None
        text = self.reader.string(node, where)
        if text is None:
            return None
        try:
            until = datetime.fromisoformat(text)
        except ValueError:
            until = None
        if until is None or until.tzinfo is None:
            self.reader.error(
                node, where, f"{text!r} is not a time with its zone, e.g. 2026-12-01T09:00:00+00:00"
            )
            return None
        return until.astimezone(UTC)

    def _health_check(self, entry: tuple[yaml.Node, yaml.Node] | None, field: str) -> HealthCheck | None:
        """``{run: ..., every: 24h, timeout_s: 600, vcpus: 1}``; ``run`` is required."""
        r = self.reader
        if entry is None or is_null(entry[1]):
            return None
        node = entry[1]
        entries = r.mapping(node, field, HEALTH_CHECK_KEYS)
        if entries is None:
            return None
        ok = True
        run: str | None = None
        if "run" not in entries:
            r.error(node, field + ".run", "is required: the command that checks the device")
            ok = False
        else:
            run = r.string(entries["run"][1], field + ".run")
            if run is not None:
                try:
                    check_run(run)
                except HealthCheckError as exc:
                    r.error(entries["run"][1], field + ".run", str(exc))
                    run = None
        every: int | None = None
        if "every" in entries and not is_null(entries["every"][1]):
            every_node = entries["every"][1]
            if not isinstance(every_node, yaml.ScalarNode):
                r.error(every_node, field + ".every", "must be a duration such as 30m, 24h or 7d")
                ok = False
            else:
                try:
                    every = parse_duration(every_node.value)
                except HealthCheckError as exc:
                    r.error(every_node, field + ".every", str(exc))
                    ok = False
        timeout_s, vcpus = DEFAULT_TIMEOUT_S, DEFAULT_VCPUS
        if "timeout_s" in entries:
            found = r.integer(entries["timeout_s"][1], field + ".timeout_s", minimum=1, maximum=MAX_TIMEOUT_S)
            ok, timeout_s = ok and found is not None, found or timeout_s
        if "vcpus" in entries:
            found = r.integer(entries["vcpus"][1], field + ".vcpus", minimum=1, maximum=MAX_VCPUS)
            ok, vcpus = ok and found is not None, found or vcpus
        if not ok or run is None:
            return None
        return HealthCheck(run, every, timeout_s, vcpus)

    def _device_pool(self, entries: Entries, node: yaml.Node, field: str) -> str | None:
        r = self.reader
        if "pool" not in entries:
            r.error(node, field + ".pool", "a device listed on its own must name its pool")
            return None
        pool_node = entries["pool"][1]
        pool_id = r.string(pool_node, field + ".pool")
        if pool_id is not None and pool_id not in self.pool_lines:
            known = ", ".join(self.pool_lines) or "none"
            r.error(pool_node, field + ".pool", f"unknown pool {pool_id!r}; pools: {known}")
            return None
        return pool_id

    def _check_hosts(self, *, declared: bool) -> None:
        if not declared:
            return
        known = {host.id for host in self.hosts}
        for node, field, host in self.device_hosts:
            if host not in known:
                self.reader.error(
                    node,
                    field,
                    f"unknown runner host {host!r}; the hosts section "
                    f"lists {', '.join(sorted(known)) or 'none'}",
                )

    def _value(self, entry: tuple[yaml.Node, yaml.Node] | None, field: str, what: str) -> str | None:
        if entry is None or is_null(entry[1]):
            return None
        text = self.reader.string(entry[1], field)
        if text is None:
            return None
        try:
            return validate_value(text, key=what)
        except LabelError as exc:
            self.reader.error(entry[1], field, str(exc))
            return None

    def _required_value(self, entries: Entries, node: yaml.Node, field: str, key: str) -> str | None:
        if key not in entries:
            self.reader.error(node, join_field(field, key), "is required")
            return None
        return self._value(entries[key], join_field(field, key), key)

    def _optional_value(self, entries: Entries, field: str, key: str) -> str | None:
        return self._value(entries.get(key), join_field(field, key), key)

    def _labels(self, entry: tuple[yaml.Node, yaml.Node] | None, field: str) -> dict[str, str]:
        r = self.reader
        labels: dict[str, str] = {}
        if entry is None or is_null(entry[1]):
            return labels
        lines: dict[str, int] = {}
        for raw_key, (key_node, value_node) in (r.mapping(entry[1], field) or {}).items():
            key_field = join_field(field, raw_key)
            try:
                key = validate_user_key(raw_key)
            except LabelError as exc:
                r.error(key_node, key_field, str(exc))
                continue
            if key in labels:
                r.error(
                    key_node,
                    key_field,
                    f"label {key!r} is set twice (first on line {lines[key]}); keys are case-insensitive",
                )
                continue
            value = r.string(value_node, key_field, allow_empty=True)
            if value is None:
                continue
            try:
                labels[key] = validate_value(value, key=key)
            except LabelError as exc:
                r.error(value_node, key_field, str(exc))
                continue
            lines[key] = line_of(key_node)
        return labels

    def _tags(self, entry: tuple[yaml.Node, yaml.Node] | None, field: str) -> frozenset[str]:
        r = self.reader
        if entry is None or is_null(entry[1]):
            return frozenset()
        tags: set[str] = set()
        for item, item_field, text in r.strings(entry[1], field, scalar_ok=False):
            try:
                tags.add(validate_tag(text))
            except LabelError as exc:
                r.error(item, item_field, str(exc))
        return frozenset(tags)
