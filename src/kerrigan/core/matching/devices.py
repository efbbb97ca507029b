"""Matching a task's requirements against every device of an inventory snapshot: pools filtered first on the
pool-scoped keys and the repository, then each device on every rule, with every reason for every
rejection, the nearest misses and did-you-mean hints."""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import compress

from kerrigan.core.inventory import Device, Inventory, InventoryIndex, Pool
from kerrigan.core.labels import is_pool_scoped
from kerrigan.core.matching.reasons import (
    BUSY,
    Hint,
    Outcome,
    Reason,
    ReasonBook,
    ReasonCount,
    absent_reason,
    health_reason,
    host_offline,
    host_paused,
    host_vcpus,
    reason_histogram,
    repository_refused,
    reserved_reason,
    state_reason,
    tag_missing,
    values_text,
)
from kerrigan.core.requirements import LabelRequirement, Requirements
from kerrigan.core.yamlsource import suggest

NEAREST_MISSES = 5


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """A pool and the pool-scoped rules it failed (none for an eligible pool)."""

    pool: str
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class DeviceVerdict:
    """A rejected device and every rule it failed."""

    device: Device
    reasons: tuple[Reason, ...]

    @property
    def id(self) -> str:
        """The device's id."""
        return self.device.id

    @property
    def never(self) -> bool:
        """Whether the device can never match without a change to labels, tags or the manifest."""
        return any(reason.permanent for reason in self.reasons)


@dataclass(frozen=True)
class TaskResolution:
    """Everything matching found out for one set of requirements.

    ``reasons[i]`` lists every rule ``devices[i]`` failed (empty for an eligible device); devices that
    failed the same rules share one tuple.
    """

    requested: Requirements
    devices: tuple[Device, ...]
    reasons: tuple[tuple[Reason, ...], ...]
    eligible_pools: tuple[str, ...]
    rejected_pools: tuple[PoolVerdict, ...]
    eligible: tuple[Device, ...]
    histogram: tuple[ReasonCount, ...]
    nearest_misses: tuple[DeviceVerdict, ...]
    hints: tuple[Hint, ...]

    @property
    def total_devices(self) -> int:
        """How many devices were considered."""
        return len(self.devices)

    @cached_property
    def pools_by_eligibility(self) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
        """The pools that passed the pool-level filter, split: those with eligible devices, each with how
        many (where this could run), and those whose every device fails (shown apart: none of it can)."""
        per_pool = Counter(device.pool_id for device in self.eligible)
        with_devices = tuple((pool, per_pool[pool]) for pool in self.eligible_pools if per_pool[pool])
        return with_devices, tuple(pool for pool in self.eligible_pools if not per_pool[pool])

    @cached_property
    def rejected(self) -> tuple[DeviceVerdict, ...]:
        """Every rejected device with its reasons, in inventory order."""
        return tuple(
            DeviceVerdict(device, reasons)
            for device, reasons in zip(self.devices, self.reasons, strict=True)
            if reasons
        )

    @property
    def outcome(self) -> Outcome:
        """Eligible now, waiting for a transient reason to clear, or unschedulable."""
        if self.eligible:
            return Outcome.ELIGIBLE
        if any(_distance(reasons)[0] == 0 for reasons in set(self.reasons)):
            return Outcome.WAITING
        return Outcome.UNSCHEDULABLE

    def summary(self) -> str:
        """One line in the manner of Kubernetes: ``0/5000 devices available: 3120 form_factor missing``."""
        line = f"{len(self.eligible)}/{self.total_devices} devices available"
        if self.histogram:
            line += ": " + ", ".join(f"{row.count} {row.rule}" for row in self.histogram)
        return line


def resolve(
    requested: Requirements,
    inventory: Inventory,
    busy: Collection[str] = frozenset(),
    *,
    repository: str | None = None,
    vcpus: int | None = None,
    unreported_fit: bool = False,
    health_check: bool = False,
) -> TaskResolution:
    """Match ``requested`` against every device of ``inventory``; ``busy`` holds leased device ids.

    ``repository`` is the session's ``owner/name``: pools whose ``repositories`` do not admit it are
    rejected. ``None`` (nobody's session, as in ``kerrigan explain`` without ``--repository``) applies no
    pool's list.

    ``vcpus`` is the task's claim: a device whose runner host has fewer allocatable vCPUs (as its agent
    reported them) is rejected. ``None`` (no hosts' reports to check against, as in ``kerrigan explain``)
    checks nothing. A host that has not reported makes a claim above the default wait (*not yet*), unless
    ``unreported_fit``: the dispatcher leaves such a host to its agent, which refuses what it cannot fit.

    ``health_check``: the task is a device's health check, which a ``bad`` device runs (it is what can
    make it ``good`` again): health is not a reason.

    Each rule is checked once per distinct value in the snapshot, not once per device: a rule becomes a
    column of reasons (or ``None``) over the devices, and a device's reasons are its row across them.
    """
    index = inventory.index
    book = ReasonBook()
    ordered = sorted(requested.labels.values(), key=lambda req: not is_pool_scoped(req.key))
    columns: list[list[Reason | None]] = []
    refused = _refused_pools(inventory.pools, repository)
    if refused:
        _add_column(columns, [refused.get(pool_id) for pool_id in index.pools.values], index.pools.codes)
    for req in ordered:
        allowed = req.allowed
        label_column = index.column(req.key)
        _add_column(
            columns,
            [
                book.missing(req.key)
                if value is None
                else None
                if value in allowed
                else book.mismatch(req, value)
                for value in label_column.values
            ],
            label_column.codes,
        )
    for tag_req in requested.tags:
        missing = tag_missing(tag_req.tag)
        _add_column(
            columns,
            [None if tag_req.tag in tags else missing for tags in index.tags.values],
            index.tags.codes,
        )
    _add_column(columns, [state_reason(*value) for value in index.states.values], index.states.codes)
    if not health_check:
        _add_column(columns, [health_reason(h) for h in index.health.values], index.health.codes)
    _add_column(columns, [absent_reason(host) for host in index.absent.values], index.absent.codes)
    _add_column(columns, [reserved_reason(held) for held in index.reserved.values], index.reserved.codes)
    paused = index.paused_hosts
    if paused:
        _add_column(
            columns,
            [host_paused(host, paused[host]) if host in paused else None for host in index.hosts.values],
            index.hosts.codes,
        )
    offline = index.offline_hosts
    if offline:
        _add_column(
            columns,
            [host_offline(host) if host in offline else None for host in index.hosts.values],
            index.hosts.codes,
        )
    if vcpus is not None:
        _add_column(
            columns,
            [
                host_vcpus(host, vcpus, index.host_vcpus.get(host), unreported_fit)
                for host in index.hosts.values
            ],
            index.hosts.codes,
        )
    if busy:
        columns.append([BUSY if device.id in busy else None for device in index.devices])

    if columns:
        # Only distinct rows are kept; zip recycles the rest, so a large lab does not fill the heap
        # with short-lived tuples (and wake the garbage collector) on every resolution.
        reasons = tuple(map(_CompactRows().__getitem__, zip(*columns, strict=True)))
    else:
        reasons = ((),) * len(index.devices)
    eligible = tuple(compress(index.devices, map(operator.not_, reasons)))
    eligible_pools, rejected_pools = _pool_verdicts(ordered, inventory, book, refused)
    return TaskResolution(
        requested=requested,
        devices=index.devices,
        reasons=reasons,
        eligible_pools=eligible_pools,
        rejected_pools=rejected_pools,
        eligible=eligible,
        histogram=reason_histogram(Counter(reasons)),
        nearest_misses=() if eligible else _nearest_misses(index.devices, reasons),
        hints=() if eligible else tuple(_hints(requested, index)),
    )


class _CompactRows(dict[tuple[Reason | None, ...], tuple[Reason, ...]]):
    """A row of reasons-or-None to the reasons alone, each distinct row worked out once."""

    def __missing__(self, row: tuple[Reason | None, ...]) -> tuple[Reason, ...]:
        found = self[row] = tuple(reason for reason in row if reason is not None)
        return found


def _add_column(
    columns: list[list[Reason | None]], verdicts: list[Reason | None], codes: Sequence[int]
) -> None:
    """Spread one rule's verdict per distinct value over the devices (skipped when all pass)."""
    if any(verdict is not None for verdict in verdicts):
        columns.append(list(map(verdicts.__getitem__, codes)))


def _refused_pools(pools: Iterable[Pool], repository: str | None) -> dict[str, Reason]:
    """The pools whose ``repositories`` do not admit ``repository``, each with its reason."""
    if repository is None:
        return {}
    return {pool.id: repository_refused(repository, pool.id) for pool in pools if not pool.admits(repository)}


def _pool_verdicts(
    ordered: Iterable[LabelRequirement],
    inventory: Inventory,
    book: ReasonBook,
    refused: dict[str, Reason],
) -> tuple[tuple[str, ...], tuple[PoolVerdict, ...]]:
    """Pool-level filtering on the repository and the pool-scoped keys."""
    pool_reqs = [(req, req.allowed) for req in ordered if is_pool_scoped(req.key)]
    eligible: list[str] = []
    rejected: list[PoolVerdict] = []
    for pool in inventory.pools:
        labels = inventory.index.pool_labels[pool.id]
        failed: list[Reason] = [refused[pool.id]] if pool.id in refused else []
        for req, allowed in pool_reqs:
            got = labels.get(req.key)
            if got is None:
                failed.append(book.missing(req.key))
            elif got not in allowed:
                failed.append(book.mismatch(req, got))
        if failed:
            rejected.append(PoolVerdict(pool.id, tuple(failed)))
        else:
            eligible.append(pool.id)
    return tuple(eligible), tuple(rejected)


def _distance(reasons: tuple[Reason, ...]) -> tuple[int, int]:
    """How far a device is from matching: rules it can never meet as it is, then all rules."""
    return sum(reason.permanent for reason in reasons), len(reasons)


def _nearest_misses(
    devices: tuple[Device, ...], reasons: tuple[tuple[Reason, ...], ...]
) -> tuple[DeviceVerdict, ...]:
    """The devices closest to matching, in inventory order among equals."""
    distances = {found: _distance(found) for found in set(reasons)}
    counts = Counter(reasons)
    threshold: tuple[int, int] | None = None
    seen = 0
    for found in sorted(distances, key=distances.__getitem__):
        seen += counts[found]
        threshold = distances[found]
        if seen >= NEAREST_MISSES:
            break
    close = [
        (distances[found], position)
        for position, found in enumerate(reasons)
        if threshold is not None and distances[found] <= threshold
    ]
    return tuple(
        DeviceVerdict(devices[position], reasons[position]) for _, position in sorted(close)[:NEAREST_MISSES]
    )


def _hints(requested: Requirements, index: InventoryIndex) -> Iterable[Hint]:
    """Did-you-mean advice for keys, values and tags that no device anywhere has."""
    keys = index.label_keys
    for key, req in requested.labels.items():
        origin = req.origins[0] if req.origins else None
        field, line = (origin.field, origin.line) if origin else (key, 1)
        if key not in keys:
            close = suggest(key, keys)
            message = f"no device has the label {key!r}"
            yield Hint(field, line, message + (f"; did you mean {close!r}?" if close else ""))
            continue
        in_use = {value for value in index.column(key).values if value is not None}
        if in_use.isdisjoint(req.values):
            guesses = [close for value in req.values if (close := suggest(value, in_use))]
            wanted = values_text(req.values) if len(req.values) > 1 else req.values[0]
            message = f"no device has {key}={wanted}"
            if guesses:
                message += f"; did you mean {' or '.join(repr(g) for g in guesses)}?"
            elif len(in_use) <= 10:
                message += f"; values in use: {', '.join(sorted(in_use))}"
            yield Hint(field, line, message)
    tags = index.all_tags
    for tag_req in requested.tags:
        if tag_req.tag not in tags:
            close = suggest(tag_req.tag, tags)
            origin = tag_req.origin
            field, line = (origin.field, origin.line) if origin else ("tags", 1)
            message = f"no device has the tag {tag_req.tag!r}"
            yield Hint(field, line, message + (f"; did you mean {close!r}?" if close else ""))
