"""Matching a task's requirements against an inventory snapshot, with every reason for every rejection.

A device is eligible when every requested label matches, every requested tag is present, it is
``available``, its runner host is online and it is not busy. Pools are filtered first on the pool-scoped
keys (``kerrigan.pool_*``, ``kerrigan.firmware_*``); a device in a rejected pool carries its pool's reasons
too, so each device's list is complete.

A pool that lists ``repositories`` admits only the sessions of those repositories: given the session's
repository, every other pool is rejected (``repository octo/other may not use pool lab-a``), and so is each of
its devices. Without a repository (``kerrigan explain`` with no ``--repository``) the lists are not applied.

Given the task's vCPU claim, a device whose runner host has fewer allocatable vCPUs than that is rejected
too: never once the host has reported its CPUs, not yet before (its agent reports them when it connects;
until then a host is taken to fit the default claim of 2).

A task with ``board: none`` holds no device: :func:`resolve_hosts` matches it against the runner hosts
instead, by the same rules where they apply (``kerrigan.host``, the host online and not paused, its vCPUs),
and by the pools of the host's boards for the repository: a host whose every board is in pools the
repository may not use refuses it too, so no repository runs code on a host it could not have run a boarded
job on.

Reasons are worded as the seed words them and marked permanent ("never": labels, tags, a retired device, a
pool the repository may not use, a host too small for the claim) or transient ("not yet": maintenance,
offline, health bad, absent from its runner host, host offline or paused, a host that has not reported its
CPUs, busy). A state's reason says who set it, since and until when, and why (:mod:`.device_status`).
"""

from __future__ import annotations

import enum
import operator
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import compress
from typing import Final

from kerrigan.core.device_status import (
    NO_NOTE,
    DeviceHealth,
    DeviceReservation,
    HostPause,
    StateNote,
    absent_text,
    health_text,
    pause_text,
    state_text,
)
from kerrigan.core.host_capacity import DEFAULT_CLAIM
from kerrigan.core.inventory import Device, DeviceState, Inventory, InventoryIndex, Pool, RunnerHost
from kerrigan.core.labels import HOST_KEY, is_pool_scoped
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
    HOST_PAUSED = "host_paused"
    DEVICE_HEALTH = "device_health"
    DEVICE_ABSENT = "device_absent"
    DEVICE_RESERVED = "device_reserved"
    DEVICE_BUSY = "device_busy"
    REPOSITORY_REFUSED = "repository_refused"
    HOST_VCPUS = "host_vcpus"
    HOST_REFUSED = "host_refused"  # a boardless task's repository may use none of the host's pools


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


_STATE_RULES: Final = {
    DeviceState.MAINTENANCE: ("device in maintenance", False),
    DeviceState.OFFLINE: ("device offline", False),
    DeviceState.RETIRED: ("device retired", True),
}


def _state_reason(state: DeviceState, note: StateNote | None) -> Reason | None:
    """Why a device in ``state`` takes no job, with who set it, since and until when, and why."""
    rule = _STATE_RULES.get(state)
    if rule is None:
        return None
    text = state_text(state.value, note or NO_NOTE)
    return Reason(ReasonKind.DEVICE_STATE, state.value, text, rule[0], rule[1])


def _health_reason(health: DeviceHealth | None) -> Reason | None:
    if health is None or health.eligible:
        return None
    return Reason(
        ReasonKind.DEVICE_HEALTH, health.health.value, health_text(health), "device health bad", False
    )


def _absent_reason(host: str | None) -> Reason | None:
    if host is None:  # present
        return None
    text = absent_text(host)
    return Reason(ReasonKind.DEVICE_ABSENT, host, text, "device absent from its runner host", False)


def _reserved_reason(held: DeviceReservation | None) -> Reason | None:
    if held is None:
        return None
    return Reason(ReasonKind.DEVICE_RESERVED, held.login, str(held), "device reserved", False)


def _host_paused(host: str, pause: HostPause) -> Reason:
    return Reason(ReasonKind.HOST_PAUSED, host, pause_text(host, pause), f"runner host {host} paused", False)


_BUSY = Reason(ReasonKind.DEVICE_BUSY, "busy", "device busy", "device busy", permanent=False)


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
    book = _ReasonBook()
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
        missing = _tag_missing(tag_req.tag)
        _add_column(
            columns,
            [None if tag_req.tag in tags else missing for tags in index.tags.values],
            index.tags.codes,
        )
    _add_column(columns, [_state_reason(*value) for value in index.states.values], index.states.codes)
    if not health_check:
        _add_column(columns, [_health_reason(h) for h in index.health.values], index.health.codes)
    _add_column(columns, [_absent_reason(host) for host in index.absent.values], index.absent.codes)
    _add_column(columns, [_reserved_reason(held) for held in index.reserved.values], index.reserved.codes)
    paused = index.paused_hosts
    if paused:
        _add_column(
            columns,
            [_host_paused(host, paused[host]) if host in paused else None for host in index.hosts.values],
            index.hosts.codes,
        )
    offline = index.offline_hosts
    if offline:
        _add_column(
            columns,
            [_host_offline(host) if host in offline else None for host in index.hosts.values],
            index.hosts.codes,
        )
    if vcpus is not None:
        _add_column(
            columns,
            [
                _host_vcpus(host, vcpus, index.host_vcpus.get(host), unreported_fit)
                for host in index.hosts.values
            ],
            index.hosts.codes,
        )
    if busy:
        columns.append([_BUSY if device.id in busy else None for device in index.devices])

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
        histogram=_histogram(Counter(reasons)),
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


def _host_offline(host: str) -> Reason:
    text = f"runner host {host} offline"
    return Reason(ReasonKind.HOST_OFFLINE, host, text, text, permanent=False)


def _host_vcpus(
    host: str, claim: int, allocatable: int | None, unreported_fit: bool = False
) -> Reason | None:
    """The reason ``host`` gives a claim of ``claim`` vCPUs, or None when the claim fits it.

    A host that has not reported is taken to fit the default claim (every task without ``vcpus`` makes
    it), so a lab whose agents have not connected yet still has its ordinary tasks ready; a larger claim
    waits for the report."""
    if allocatable is None:
        return None if claim <= DEFAULT_CLAIM or unreported_fit else _unreported(host)
    if claim <= allocatable:
        return None
    text = f"needs {claim} vCPU{'s' if claim != 1 else ''}; runner host {host} has {allocatable} allocatable"
    return Reason(ReasonKind.HOST_VCPUS, host, text, text, permanent=True)


def repository_refused(repository: str, pool_id: str) -> Reason:
    """The reason a pool's ``repositories`` gives a session of ``repository``."""
    return Reason(
        ReasonKind.REPOSITORY_REFUSED,
        pool_id,
        f"repository {repository} may not use pool {pool_id}",
        f"repository {repository} may not use their pool",
        permanent=True,
        got=pool_id,
    )


def _refused_pools(pools: Iterable[Pool], repository: str | None) -> dict[str, Reason]:
    """The pools whose ``repositories`` do not admit ``repository``, each with its reason."""
    if repository is None:
        return {}
    return {pool.id: repository_refused(repository, pool.id) for pool in pools if not pool.admits(repository)}


def _pool_verdicts(
    ordered: Iterable[LabelRequirement],
    inventory: Inventory,
    book: _ReasonBook,
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


def _histogram(per_row: Counter[tuple[Reason, ...]]) -> tuple[ReasonCount, ...]:
    per_reason: Counter[Reason] = Counter()
    for found, count in per_row.items():
        for reason in found:
            per_reason[reason] += count
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
            wanted = _values(req.values) if len(req.values) > 1 else req.values[0]
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


# -- a task that holds no device (``board: none``) -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HostVerdict:
    """A rejected runner host and every rule it failed."""

    host: str
    reasons: tuple[Reason, ...]

    @property
    def never(self) -> bool:
        """Whether the host can never run the task without a change to the manifest or the lab."""
        return any(reason.permanent for reason in self.reasons)


@dataclass(frozen=True)
class HostResolution:
    """Everything matching found out for a task with ``board: none``: the runner hosts it may run on.

    ``reasons[i]`` lists every rule ``hosts[i]`` failed (empty for an eligible host).
    """

    requested: Requirements
    hosts: tuple[str, ...]
    reasons: tuple[tuple[Reason, ...], ...]
    eligible: tuple[str, ...]
    histogram: tuple[ReasonCount, ...]
    hints: tuple[Hint, ...]

    @property
    def total_hosts(self) -> int:
        """How many runner hosts were considered."""
        return len(self.hosts)

    @cached_property
    def rejected(self) -> tuple[HostVerdict, ...]:
        """Every rejected host with its reasons, in id order."""
        pairs = zip(self.hosts, self.reasons, strict=True)
        return tuple(HostVerdict(host, reasons) for host, reasons in pairs if reasons)

    @property
    def outcome(self) -> Outcome:
        """Eligible now, waiting for a host to come back (online, resumed, reporting), or unschedulable."""
        if self.eligible:
            return Outcome.ELIGIBLE
        if any(not verdict.never for verdict in self.rejected):
            return Outcome.WAITING
        return Outcome.UNSCHEDULABLE

    def summary(self) -> str:
        """``1/4 runner hosts available: 2 kerrigan.host expected lab-a-01, 1 runner host lab-b-01 offline``
        (each rule with how many hosts failed it)."""
        line = f"{len(self.eligible)}/{self.total_hosts} runner hosts available"
        if self.histogram:
            line += ": " + ", ".join(f"{row.count} {row.rule}" for row in self.histogram)
        return line


def _unreported(host: str) -> Reason:
    text = f"runner host {host} has not reported its CPUs"
    return Reason(ReasonKind.HOST_VCPUS, host, text, text, permanent=False)


def host_refused(repository: str, host: str) -> Reason:
    """The reason a runner host gives a boardless job of ``repository`` when none of its pools admits it."""
    return Reason(
        ReasonKind.HOST_REFUSED,
        host,
        f"repository {repository} may not use runner host {host} (none of its pools admits it)",
        f"repository {repository} may not use their runner host",
        permanent=True,
        got=host,
    )


def resolve_hosts(
    requested: Requirements,
    inventory: Inventory,
    *,
    repository: str | None = None,
    vcpus: int | None = None,
) -> HostResolution:
    """Match a boardless task's ``requested`` (``kerrigan.host``, or nothing) against every runner host of
    ``inventory``; ``repository`` as for :func:`resolve`.

    A host drives boards of some pools: when ``repository`` may use none of them, the host refuses it (a
    host that drives no board refuses nobody). ``vcpus`` is the task's claim: a host whose agent reported
    fewer allocatable vCPUs can never run it, and one whose agent has not reported its CPUs yet cannot run
    it yet, whatever the claim: the job runs on the host itself, and a host no agent has spoken for (one an
    inventory names, say) would only hold it until its lease ran out. ``None`` checks nothing (``kerrigan
    explain`` without the hosts' reports).
    """
    book = _ReasonBook()
    hosts = inventory.runner_hosts
    asked = requested.labels.get(HOST_KEY)
    pools = inventory.pools_by_id
    host_pools = inventory.host_pools
    rows = []
    for host in hosts:
        found: list[Reason] = []
        if (
            repository is not None
            and host.id in host_pools
            and not any(pools[pool].admits(repository) for pool in host_pools[host.id] if pool in pools)
        ):
            found.append(host_refused(repository, host.id))
        if asked is not None and host.id not in asked.allowed:
            found.append(book.mismatch(asked, host.id))
        if host.pause is not None:
            found.append(_host_paused(host.id, host.pause))
        if not host.up:
            found.append(_host_offline(host.id))
        if vcpus is not None:
            small = _unreported(host.id) if host.vcpus is None else _host_vcpus(host.id, vcpus, host.vcpus)
            if small is not None:
                found.append(small)
        rows.append(tuple(found))
    reasons = tuple(rows)
    eligible = tuple(host.id for host, found in zip(hosts, reasons, strict=True) if not found)
    return HostResolution(
        requested=requested,
        hosts=tuple(host.id for host in hosts),
        reasons=reasons,
        eligible=eligible,
        histogram=_histogram(Counter(reasons)),
        hints=() if eligible or asked is None else tuple(_host_hints(asked, hosts)),
    )


def _host_hints(asked: LabelRequirement, hosts: Iterable[RunnerHost]) -> Iterable[Hint]:
    """Did-you-mean advice for a requested ``kerrigan.host`` that is no runner host's."""
    known = {host.id for host in hosts}
    if not known.isdisjoint(asked.values):
        return
    origin = asked.origins[0] if asked.origins else None
    field, line = (origin.field, origin.line) if origin else (HOST_KEY, 1)
    guesses = [close for value in asked.values if (close := suggest(value, known))]
    wanted = _values(asked.values) if len(asked.values) > 1 else asked.values[0]
    message = f"no runner host is {wanted}"
    if guesses:
        message += f"; did you mean {' or '.join(repr(g) for g in guesses)}?"
    elif len(known) <= 10:
        message += f"; runner hosts: {', '.join(sorted(known)) or 'none'}"
    yield Hint(field, line, message)
