"""Why a device or a runner host is rejected: each rule's reason, worded as the seed words them and marked
permanent ("never") or transient ("not yet"), and the histogram of reasons a resolution reports."""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass
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
from kerrigan.core.inventory import DeviceState
from kerrigan.core.labels import is_pool_scoped
from kerrigan.core.requirements import LabelRequirement


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


def values_text(values: tuple[str, ...]) -> str:
    """Values as a list in a reason: ``[a, b]``."""
    return f"[{', '.join(values)}]"


class ReasonBook:
    """Makes each distinct reason once per resolution."""

    def __init__(self) -> None:
        self._mismatch: dict[tuple[str, str], Reason] = {}
        self._missing: dict[str, Reason] = {}

    def missing(self, key: str) -> Reason:
        """A requested label key the device does not have."""
        reason = self._missing.get(key)
        if reason is None:
            text = f"{key} missing"
            reason = Reason(ReasonKind.LABEL_MISSING, key, text, text, permanent=True)
            self._missing[key] = reason
        return reason

    def mismatch(self, requirement: LabelRequirement, got: str) -> Reason:
        """A label with another value than the requirement allows."""
        cache_key = (requirement.key, got)
        reason = self._mismatch.get(cache_key)
        if reason is None:
            key, values = requirement.key, requirement.values
            if is_pool_scoped(key):
                wanted = values[0] if len(values) == 1 else f"any of {values_text(values)}"
                rule = f"{key} did not match {wanted}"
                text = f"{key}={got} did not match {wanted}"
            else:
                wanted = values[0] if len(values) == 1 else f"one of {values_text(values)}"
                rule = f"{key} expected {wanted}"
                text = f"{rule}, got {got}"
            reason = Reason(ReasonKind.LABEL_MISMATCH, key, text, rule, permanent=True, got=got)
            self._mismatch[cache_key] = reason
        return reason


def tag_missing(tag: str) -> Reason:
    """A requested tag the device does not have."""
    text = f"tag {tag} missing"
    return Reason(ReasonKind.TAG_MISSING, tag, text, text, permanent=True)


_STATE_RULES: Final = {
    DeviceState.MAINTENANCE: ("device in maintenance", False),
    DeviceState.OFFLINE: ("device offline", False),
    DeviceState.RETIRED: ("device retired", True),
}


def state_reason(state: DeviceState, note: StateNote | None) -> Reason | None:
    """Why a device in ``state`` takes no job, with who set it, since and until when, and why."""
    rule = _STATE_RULES.get(state)
    if rule is None:
        return None
    text = state_text(state.value, note or NO_NOTE)
    return Reason(ReasonKind.DEVICE_STATE, state.value, text, rule[0], rule[1])


def health_reason(health: DeviceHealth | None) -> Reason | None:
    """Why a device whose health is bad takes no job (None: its health lets it)."""
    if health is None or health.eligible:
        return None
    return Reason(
        ReasonKind.DEVICE_HEALTH, health.health.value, health_text(health), "device health bad", False
    )


def absent_reason(host: str | None) -> Reason | None:
    """Why a device its runner host ``host`` does not find takes no job (None: present)."""
    if host is None:  # present
        return None
    text = absent_text(host)
    return Reason(ReasonKind.DEVICE_ABSENT, host, text, "device absent from its runner host", False)


def reserved_reason(held: DeviceReservation | None) -> Reason | None:
    """Why a device a person holds takes no job (None: nobody holds it)."""
    if held is None:
        return None
    return Reason(ReasonKind.DEVICE_RESERVED, held.login, str(held), "device reserved", False)


def host_paused(host: str, pause: HostPause) -> Reason:
    """A paused runner host, with who paused it and why."""
    return Reason(ReasonKind.HOST_PAUSED, host, pause_text(host, pause), f"runner host {host} paused", False)


BUSY = Reason(ReasonKind.DEVICE_BUSY, "busy", "device busy", "device busy", permanent=False)


def host_offline(host: str) -> Reason:
    """An offline runner host."""
    text = f"runner host {host} offline"
    return Reason(ReasonKind.HOST_OFFLINE, host, text, text, permanent=False)


def host_vcpus(host: str, claim: int, allocatable: int | None, unreported_fit: bool = False) -> Reason | None:
    """The reason ``host`` gives a claim of ``claim`` vCPUs, or None when the claim fits it.

    A host that has not reported is taken to fit the default claim (every task without ``vcpus`` makes
    it), so a lab whose agents have not connected yet still has its ordinary tasks ready; a larger claim
    waits for the report."""
    if allocatable is None:
        return None if claim <= DEFAULT_CLAIM or unreported_fit else unreported_cpus(host)
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


def reason_histogram(per_row: Counter[tuple[Reason, ...]]) -> tuple[ReasonCount, ...]:
    """Devices (or hosts) counted by the rule they failed, most first, with the values they had instead."""
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


def unreported_cpus(host: str) -> Reason:
    """A runner host that has not reported its CPUs yet, for a claim larger than the default."""
    text = f"runner host {host} has not reported its CPUs"
    return Reason(ReasonKind.HOST_VCPUS, host, text, text, permanent=False)
