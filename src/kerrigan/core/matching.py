"""Matching a task's requirements against an inventory snapshot, with every reason for every rejection.

A device is eligible when every requested label matches, every requested tag is present, it is
``available``, its runner host is online and it is not busy. Pools are filtered first on the pool-scoped
keys (``kerrigan.pool_*``, ``kerrigan.firmware_*``); a device in a rejected pool carries its pool's reasons
too, so each device's list is complete.

Reasons are worded as the seed words them and marked permanent ("never": labels, tags, a retired device)
or transient ("not yet": maintenance, offline, host offline, busy).
"""

from __future__ import annotations

import enum
import heapq
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from kerrigan.core.inventory import DeviceState, IndexedDevice, Inventory
from kerrigan.core.labels import is_pool_scoped
from kerrigan.core.requirements import LabelRequirement, Requirements
from kerrigan.core.yamlsource import suggest

NEAREST_MISSES = 5


class ReasonKind(enum.StrEnum):
    """Which rule a device failed."""

    LABEL_MISMATCH = "label_mismatch"
    LABEL_MISSING = "label_missing"
    TAG_MISSING = "tag_missing"
    DEVICE_STATE = "device_state"
    HOST_OFFLINE = "host_offline"
    DEVICE_BUSY = "device_busy"


class Outcome(enum.StrEnum):
    """Whether a task can run: now, later, or never with this inventory."""

    ELIGIBLE = "eligible"
    WAITING = "waiting"
    UNSCHEDULABLE = "unschedulable"


# Identity equality: a resolution makes each distinct reason once and shares it between devices, so
# counting them is a pointer comparison. Compare ``text`` to compare two reasons' meaning.
@dataclass(frozen=True, slots=True, eq=False)
class Reason:
    """One failed rule: ``text`` for one device, ``rule`` for the histogram bucket it falls in."""

    kind: ReasonKind
    subject: str
    text: str
    rule: str
    permanent: bool
    got: str | None = None

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """A pool and the pool-scoped rules it failed (none for an eligible pool)."""

    pool: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class DeviceVerdict:
    """A rejected device and every rule it failed."""

    device: IndexedDevice
    reasons: tuple[Reason, ...]

    @property
    def id(self) -> str:
        """The device's id."""
        return self.device.device.id

    @property
    def never(self) -> bool:
        """Whether the device can never match without a change to labels, tags or the manifest."""
        return any(reason.permanent for reason in self.reasons)


@dataclass(frozen=True, slots=True)
class ReasonCount:
    """A histogram row: how many devices failed ``rule``, and the values they had instead."""

    rule: str
    kind: ReasonKind
    count: int
    permanent: bool
    got: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Hint:
    """Advice on a requested key, value or tag that no device has ("did you mean")."""

    field: str
    line: int
    message: str


@dataclass(frozen=True, slots=True)
class TaskResolution:
    """Everything matching found out for one set of requirements."""

    requested: Requirements
    total_devices: int
    eligible_pools: tuple[str, ...]
    rejected_pools: tuple[PoolVerdict, ...]
    eligible: tuple[IndexedDevice, ...]
    rejected: tuple[DeviceVerdict, ...]
    histogram: tuple[ReasonCount, ...]
    nearest_misses: tuple[DeviceVerdict, ...]
    hints: tuple[Hint, ...]

    @property
    def outcome(self) -> Outcome:
        """Eligible now, waiting for a transient reason to clear, or unschedulable."""
        if self.eligible:
            return Outcome.ELIGIBLE
        if any(not verdict.never for verdict in self.rejected):
            return Outcome.WAITING
        return Outcome.UNSCHEDULABLE

    def summary(self) -> str:
        """One line in the manner of Kubernetes: ``0/5000 devices available: 3120 form_factor missing``."""
        line = f"{len(self.eligible)}/{self.total_devices} devices available"
        if self.histogram:
            line += ": " + ", ".join(f"{row.count} {row.rule}" for row in self.histogram)
        return line


def _values(values: tuple[str, ...]) -> str:
    return f"[{', '.join(values)}]"


class _ReasonBook:
    """Makes each distinct reason once per resolution."""

    def __init__(self) -> None:
        self._mismatch: dict[tuple[str, str], Reason] = {}
        self._missing: dict[str, Reason] = {}

    def missing(self, key: str) -> Reason:
        reason = self._missing.get(key)
        if reason is None:
            text = f"{key} missing"
            reason = Reason(ReasonKind.LABEL_MISSING, key, text, text, permanent=True)
            self._missing[key] = reason
        return reason

    def mismatch(self, requirement: LabelRequirement, got: str) -> Reason:
        cache_key = (requirement.key, got)
        reason = self._mismatch.get(cache_key)
        if reason is None:
            key, values = requirement.key, requirement.values
            if is_pool_scoped(key):
                wanted = values[0] if len(values) == 1 else f"any of {_values(values)}"
                rule = f"{key} did not match {wanted}"
                text = f"{key}={got} did not match {wanted}"
            else:
                wanted = values[0] if len(values) == 1 else f"one of {_values(values)}"
                rule = f"{key} expected {wanted}"
                text = f"{rule}, got {got}"
            reason = Reason(ReasonKind.LABEL_MISMATCH, key, text, rule, permanent=True, got=got)
            self._mismatch[cache_key] = reason
        return reason


def _tag_missing(tag: str) -> Reason:
    text = f"tag {tag} missing"
    return Reason(ReasonKind.TAG_MISSING, tag, text, text, permanent=True)


_STATE_REASONS = {
    DeviceState.MAINTENANCE: Reason(
        ReasonKind.DEVICE_STATE,
        "maintenance",
        "device in maintenance",
        "device in maintenance",
        permanent=False,
    ),
    DeviceState.OFFLINE: Reason(
        ReasonKind.DEVICE_STATE, "offline", "device offline", "device offline", permanent=False
    ),
    DeviceState.RETIRED: Reason(
        ReasonKind.DEVICE_STATE, "retired", "device retired", "device retired", permanent=True
    ),
}
_BUSY = Reason(ReasonKind.DEVICE_BUSY, "busy", "device busy", "device busy", permanent=False)


def resolve(  # noqa: PLR0915 -- one loop over every device; helpers would cost a call per device
    requested: Requirements, inventory: Inventory, busy: Collection[str] = frozenset()
) -> TaskResolution:
    """Match ``requested`` against every device of ``inventory``; ``busy`` holds leased device ids."""
    book = _ReasonBook()
    pool_reqs = [req for key, req in requested.labels.items() if is_pool_scoped(key)]
    device_reqs = [
        (req.key, req.allowed, req) for key, req in requested.labels.items() if not is_pool_scoped(key)
    ]
    tag_reqs = [(req.tag, _tag_missing(req.tag)) for req in requested.tags]
    host_reasons: dict[str, Reason] = {}

    eligible_pools: list[str] = []
    rejected_pools: list[PoolVerdict] = []
    eligible: list[IndexedDevice] = []
    rejected: list[DeviceVerdict] = []
    total = 0
    for pool in inventory.pools:
        pool_labels = inventory.pool_labels[pool.id]
        pool_reasons: list[Reason] = []
        for req in pool_reqs:
            got = pool_labels.get(req.key)
            if got is None:
                pool_reasons.append(book.missing(req.key))
            elif got not in req.allowed:
                pool_reasons.append(book.mismatch(req, got))
        if pool_reasons:
            rejected_pools.append(PoolVerdict(pool.id, tuple(pool_reasons)))
        else:
            eligible_pools.append(pool.id)

        devices = inventory.indexed[pool.id]
        total += len(devices)
        for indexed in devices:
            reasons = list(pool_reasons)
            labels = indexed.labels
            for key, allowed, req in device_reqs:
                got = labels.get(key)
                if got is None:
                    reasons.append(book.missing(key))
                elif got not in allowed:
                    reasons.append(book.mismatch(req, got))
            if tag_reqs:
                tags = indexed.tags
                reasons.extend(reason for tag, reason in tag_reqs if tag not in tags)
            device = indexed.device
            if device.state is not DeviceState.AVAILABLE:
                reasons.append(_STATE_REASONS[device.state])
            if not indexed.host_online:
                host_reason = host_reasons.get(device.host)
                if host_reason is None:
                    text = f"runner host {device.host} offline"
                    host_reason = Reason(ReasonKind.HOST_OFFLINE, device.host, text, text, permanent=False)
                    host_reasons[device.host] = host_reason
                reasons.append(host_reason)
            if device.id in busy:
                reasons.append(_BUSY)
            if reasons:
                rejected.append(DeviceVerdict(indexed, tuple(reasons)))
            else:
                eligible.append(indexed)

    nearest: tuple[DeviceVerdict, ...] = ()
    if not eligible and rejected:
        nearest = tuple(heapq.nsmallest(NEAREST_MISSES, rejected, key=_distance))
    return TaskResolution(
        requested=requested,
        total_devices=total,
        eligible_pools=tuple(eligible_pools),
        rejected_pools=tuple(rejected_pools),
        eligible=tuple(eligible),
        rejected=tuple(rejected),
        histogram=_histogram(rejected),
        nearest_misses=nearest,
        hints=tuple(_hints(requested, inventory)) if not eligible else (),
    )


def _distance(verdict: DeviceVerdict) -> tuple[int, int]:
    """How far a device is from matching: rules it can never meet as it is, then all rules."""
    return sum(reason.permanent for reason in verdict.reasons), len(verdict.reasons)


def _histogram(rejected: Iterable[DeviceVerdict]) -> tuple[ReasonCount, ...]:
    per_reason: Counter[Reason] = Counter()
    for verdict in rejected:
        per_reason.update(verdict.reasons)
    rows: dict[str, tuple[Reason, int, Counter[str]]] = {}
    for reason, count in per_reason.items():
        first, total, got = rows.get(reason.rule, (reason, 0, Counter()))
        if reason.got is not None:
            got[reason.got] += count
        rows[reason.rule] = (first, total + count, got)
    ordered = sorted(rows.items(), key=lambda item: (-item[1][1], item[0]))
    return tuple(
        ReasonCount(rule, first.kind, total, first.permanent, tuple(got.most_common()))
        for rule, (first, total, got) in ordered
    )


def _hints(requested: Requirements, inventory: Inventory) -> Iterable[Hint]:
    """Did-you-mean advice for keys, values and tags that no device anywhere has."""
    keys = inventory.label_keys
    for key, req in requested.labels.items():
        origin = req.origins[0] if req.origins else None
        field, line = (origin.field, origin.line) if origin else (key, 1)
        if key not in keys:
            close = suggest(key, keys)
            message = f"no device has the label {key!r}"
            yield Hint(field, line, message + (f"; did you mean {close!r}?" if close else ""))
            continue
        in_use = inventory.label_values.get(key, frozenset())
        if in_use.isdisjoint(req.values):
            guesses = [close for value in req.values if (close := suggest(value, in_use))]
            message = f"no device has {key}={_values(req.values) if len(req.values) > 1 else req.values[0]}"
            if guesses:
                message += f"; did you mean {' or '.join(repr(g) for g in guesses)}?"
            elif len(in_use) <= 10:
                message += f"; values in use: {', '.join(sorted(in_use))}"
            yield Hint(field, line, message)
    tags = inventory.all_tags
    for tag_req in requested.tags:
        if tag_req.tag not in tags:
            close = suggest(tag_req.tag, tags)
            origin = tag_req.origin
            field, line = (origin.field, origin.line) if origin else ("tags", 1)
            message = f"no device has the tag {tag_req.tag!r}"
            yield Hint(field, line, message + (f"; did you mean {close!r}?" if close else ""))
