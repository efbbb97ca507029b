"""A resolution as the session and explain pages show it: each task's view, ready to render with the
``session_task.html`` partial, built from the typed :class:`~kerrigan.core.resolution.Resolution` (stored
with a session, or made live by the explain page).

A task shows what was requested, which pools and devices were eligible, the histogram of reasons marked
never or not yet, the nearest misses, and the rejected devices (the first ``REJECTED_SHOWN``, then how many
more) with every reason in a table that sorts and filters (``?q=`` filters on the server over them all, so
it works without JavaScript).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from kerrigan.core.matching import Outcome
from kerrigan.core.outcome_words import outcome_words
from kerrigan.core.resolution import (
    HintRecord,
    HistogramRecord,
    Match,
    RejectedDevice,
    Resolution,
    ResolvedTask,
)
from kerrigan.store.session_pages import DeviceFacts

REJECTED_SHOWN: Final = 1000  # rows of rejected devices a task shows; the filter reaches the others


@dataclass(frozen=True, slots=True)
class ReasonView:
    """One reason a device was rejected; ``never`` unless the reason can clear by itself."""

    text: str
    never: bool


@dataclass(frozen=True, slots=True)
class VerdictView:
    """A rejected device with every reason."""

    device: str
    pool: str
    reasons: tuple[ReasonView, ...]
    never: bool

    @property
    def when(self) -> str:
        """``never`` or ``not yet``, in words."""
        return "never" if self.never else "not yet"

    def matches(self, needle: str) -> bool:
        """Whether ``needle`` (lowercase) is in the row's text, as the in-page filter reads it."""
        texts = (self.device, self.pool, self.when, *(reason.text for reason in self.reasons))
        return any(needle in text.lower() for text in texts)


@dataclass(frozen=True, slots=True)
class HostVerdictView:
    """A runner host a task with ``board: none`` may not run on, with every reason."""

    host: str
    reasons: tuple[ReasonView, ...]
    never: bool

    @property
    def when(self) -> str:
        """``never`` or ``not yet``, in words."""
        return "never" if self.never else "not yet"


@dataclass(frozen=True, slots=True)
class Requested:
    """One requested label, written as the explain text writes it, with its key's description."""

    key: str
    text: str
    description: str | None


@dataclass(frozen=True, slots=True)
class PoolView:
    """An eligible pool and how many of its devices are eligible (None when not known)."""

    id: str
    eligible: int | None


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task's resolution, ready to render."""

    id: str
    line: int | None
    outcome: Outcome | None
    summary: str
    labels: tuple[Requested, ...]
    tags: tuple[str, ...]
    eligible_pools: tuple[PoolView, ...]
    rejected_pools: tuple[tuple[str, tuple[str, ...]], ...]
    selected: tuple[str, ...]
    eligible_devices: tuple[str, ...]
    histogram: tuple[HistogramRecord, ...]
    nearest_misses: tuple[VerdictView, ...]
    hints: tuple[HintRecord, ...]
    rejected: tuple[VerdictView, ...]  # after the filter
    rejected_total: int
    query: str  # the filter applied to ``rejected`` ("" for none)
    rejected_more: int = 0  # rejected devices (after the filter) left off the page: :func:`bounded`
    # A gang task: each role's resolution (a view of its own, ``role`` set), the runner hosts with a
    # device for every role, and why it can never run when no host has.
    roles: tuple[TaskView, ...] = ()
    role: str | None = None
    gang_hosts: tuple[str, ...] = ()
    gang_host_count: int = 0
    gang_never: str | None = None
    # A task with board: none: the runner hosts it may run on, the one it would run on now, and each other
    # host with every reason; ``histogram`` is then the hosts'.
    boardless: bool = False
    hosts_total: int = 0
    hosts_eligible: tuple[str, ...] = ()
    host_selected: str | None = None
    hosts_rejected: tuple[HostVerdictView, ...] = ()

    @property
    def outcome_class(self) -> str:
        """The outcome as the page's CSS names it (``outcome-eligible``); empty when none was recorded."""
        return self.outcome.value if self.outcome is not None else ""

    @property
    def outcome_words(self) -> str:
        """The outcome in words (:mod:`kerrigan.core.outcome_words`, as the check run says it)."""
        if self.outcome is None:
            return ""
        return outcome_words(self.outcome, boardless=self.boardless, never=self.gang_never)

    @property
    def total_devices(self) -> int:
        """How many devices were considered."""
        return len(self.eligible_devices) + self.rejected_total


def label_text(key: str, values: Sequence[str]) -> str:
    """``key=value``, or ``key in [a, b]`` for a list (as ``kerrigan explain`` writes them)."""
    return f"{key}={values[0]}" if len(values) == 1 else f"{key} in [{', '.join(values)}]"


def _verdict(verdict: RejectedDevice, transient: frozenset[str]) -> VerdictView:
    reasons = tuple(
        # A reason that can clear by itself (maintenance, offline, busy) reads the same as its rule; every
        # other reason is a label, a tag or a retired device, which never change without an edit.
        ReasonView(text, text not in transient)
        for text in verdict.reasons
    )
    never = verdict.never if verdict.never is not None else any(reason.never for reason in reasons)
    return VerdictView(verdict.device, verdict.pool, reasons, never)


def _match_view(
    task_id: str,
    line: int | None,
    match: Match,
    *,
    descriptions: Mapping[str, str],
    facts: Mapping[str, DeviceFacts] | None,
    query: str,
) -> TaskView:
    """The view of what a task's (or a role's) requirements matched."""
    labels = tuple(
        Requested(key, label_text(key, requirement.values or ("",)), descriptions.get(key))
        for key, requirement in match.requested.labels.items()
    )
    transient = frozenset(row.reason for row in match.histogram if not row.permanent)
    eligible = match.eligible_devices
    per_pool = Counter(facts[device].pool for device in eligible if facts and device in facts)
    known = facts is not None and all(device in facts for device in eligible)
    rejected = tuple(_verdict(verdict, transient) for verdict in match.rejected_devices)
    needle = query.strip().lower()
    return TaskView(
        id=task_id,
        line=line,
        outcome=match.outcome,
        summary=match.summary,
        labels=labels,
        tags=tuple(tag.tag for tag in match.requested.tags),
        eligible_pools=tuple(
            PoolView(pool, per_pool.get(pool, 0) if known else None) for pool in match.eligible_pools
        ),
        rejected_pools=tuple((pool.pool, pool.reasons) for pool in match.rejected_pools),
        selected=match.selected,
        eligible_devices=eligible,
        histogram=match.histogram,
        nearest_misses=tuple(_verdict(verdict, transient) for verdict in match.nearest_misses),
        hints=match.hints,
        rejected=tuple(verdict for verdict in rejected if verdict.matches(needle)) if needle else rejected,
        rejected_total=len(rejected),
        query=query.strip(),
    )


def task_view(
    task: ResolvedTask, facts: Mapping[str, DeviceFacts] | None = None, query: str = ""
) -> TaskView:
    """A task of a resolution; ``query`` keeps only the rejected devices whose row contains it."""
    descriptions = task.descriptions or {}
    view = _match_view(task.id, task.line, task.match, descriptions=descriptions, facts=facts, query=query)
    roles = tuple(
        replace(
            _match_view(task.id, None, role.match, descriptions={}, facts=facts, query=query), role=role.role
        )
        for role in task.roles
    )
    gang = task.gang
    hosts = task.hosts
    return replace(
        view,
        roles=roles,
        gang_hosts=gang.hosts if gang else (),
        gang_host_count=gang.host_count if gang else 0,
        gang_never=gang.never if gang else None,
        boardless=hosts is not None,
        # A boardless task's histogram is its runner hosts' (their rows name no values they had instead).
        histogram=tuple(replace(row, got=()) for row in hosts.histogram) if hosts else view.histogram,
        hosts_total=hosts.total if hosts else 0,
        hosts_eligible=hosts.eligible if hosts else (),
        host_selected=hosts.selected if hosts else None,
        hosts_rejected=tuple(
            # The host's reasons are one host's: a verdict that can clear by itself has none that cannot.
            HostVerdictView(
                host.host, tuple(ReasonView(text, host.never) for text in host.reasons), host.never
            )
            for host in hosts.rejected
        )
        if hosts
        else (),
    )


def bounded(view: TaskView, limit: int = REJECTED_SHOWN) -> TaskView:
    """``view`` with at most ``limit`` rejected devices, the first ones, and how many more there are: a lab
    of 10,000 devices would otherwise make a page of 4 MB. The filter (``?q=``) searches them all."""
    if view.roles:
        view = replace(view, roles=tuple(bounded(role, limit) for role in view.roles))
    if len(view.rejected) <= limit:
        return view
    return replace(view, rejected=view.rejected[:limit], rejected_more=len(view.rejected) - limit)


def named_devices(resolution: Resolution) -> set[str]:
    """The devices whose facts the page shows: the selected and the eligible ones (a gang's roles' too)."""
    named: set[str] = set()
    for match in resolution.matches():
        named.update(match.selected)
        named.update(match.eligible_devices)
    return named
