"""Matching a task with ``board: none`` against the runner hosts: by the same rules where they apply
(``kerrigan.host``, the host online and not paused, its vCPUs) and by the pools of the host's boards for
the repository."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from kerrigan.core.inventory import Inventory, RunnerHost
from kerrigan.core.labels import HOST_KEY
from kerrigan.core.matching.reasons import (
    Hint,
    Outcome,
    Reason,
    ReasonBook,
    ReasonCount,
    ReasonKind,
    host_offline,
    host_paused,
    host_vcpus,
    reason_histogram,
    unreported_cpus,
    values_text,
)
from kerrigan.core.requirements import LabelRequirement, Requirements
from kerrigan.core.yamlsource import suggest

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
    book = ReasonBook()
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
            found.append(host_paused(host.id, host.pause))
        if not host.up:
            found.append(host_offline(host.id))
        if vcpus is not None:
            small = unreported_cpus(host.id) if host.vcpus is None else host_vcpus(host.id, vcpus, host.vcpus)
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
        histogram=reason_histogram(Counter(reasons)),
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
    wanted = values_text(asked.values) if len(asked.values) > 1 else asked.values[0]
    message = f"no runner host is {wanted}"
    if guesses:
        message += f"; did you mean {' or '.join(repr(g) for g in guesses)}?"
    elif len(known) <= 10:
        message += f"; runner hosts: {', '.join(sorted(known)) or 'none'}"
    yield Hint(field, line, message)
