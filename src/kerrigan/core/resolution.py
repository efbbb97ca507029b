"""A session's resolution as it was stored, typed: the ``kerrigan explain`` document (docs/explain.md) of its
manifest when it was resolved, or a health check's request.

:meth:`Resolution.from_document` is the one reading of the stored document and :meth:`Resolution.to_document`
the one writing of it; every reader takes the typed object. Reading is tolerant: a document an older
Kerrigan stored may lack keys (each then reads as none), and a per-device list the store could not expand
(:mod:`kerrigan.core.diagnostics_store`) reads as empty, so one damaged row costs its device table, not its
page. A key the document lacks is absent, not an error: ``outcome`` reads as ``None``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from kerrigan.core.health_checks import (
    HEALTH_CHECK_KEYS,
    HealthCheck,
    HealthCheckError,
    health_check_from_document,
)
from kerrigan.core.matching import Outcome
from kerrigan.core.requirements import Requirements

__all__ = [
    "BOARD_NONE",
    "EMPTY",
    "GangRecord",
    "HealthCheckRecord",
    "HintRecord",
    "HistogramRecord",
    "HostRejection",
    "HostsRecord",
    "Match",
    "PoolRejection",
    "ProblemRecord",
    "RejectedDevice",
    "Resolution",
    "ResolvedTask",
    "RoleMatch",
]

BOARD_NONE: Final = "none"  # a task's ``board`` in the document when it holds no device


# -- tolerant reading of JSON values (the only place a stored resolution's keys are read) ---------------


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str:
    return "" if value is None else str(value)


def _strs(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in _list(value))


def _optional_str(value: object) -> str | None:
    return str(value) if value else None


def _outcome(value: object) -> Outcome | None:
    return Outcome(value) if isinstance(value, str) and value in _OUTCOMES else None


_OUTCOMES: Final = frozenset(outcome.value for outcome in Outcome)


# -- the parts -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProblemRecord:
    """A manifest error or warning, in its file at its line (an older document may lack the place)."""

    path: str
    line: int | None
    column: int | None
    field: str
    message: str

    @classmethod
    def from_document(cls, raw: object) -> ProblemRecord:
        """One of the document's ``errors`` or ``warnings``."""
        body = _dict(raw)
        return cls(
            _str(body.get("path")),
            _int(body.get("line")),
            _int(body.get("column")),
            _str(body.get("field")),
            _str(body.get("message")),
        )

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain`` writes it."""
        return {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "field": self.field,
            "message": self.message,
        }


class RejectedDevice(NamedTuple):
    """A device turned away with every reason; ``never`` as recorded (None: an older document said not).

    A named tuple, not a dataclass: a resolution holds one per device of the lab for each task, and reading
    10,000 of them should cost little more than expanding them did."""

    device: str
    pool: str
    reasons: tuple[str, ...]
    never: bool | None = None

    @classmethod
    def from_document(cls, raw: object) -> RejectedDevice:
        """One of ``rejected_devices`` or ``nearest_misses``."""
        body = _dict(raw)
        never = body.get("never")
        return cls(
            _str(body.get("device")),
            _str(body.get("pool")),
            _strs(body.get("reasons")),
            never if isinstance(never, bool) else None,
        )

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain`` writes it (its keys in that order: the store compacts it by them)."""
        body: dict[str, object] = {"device": self.device, "pool": self.pool, "reasons": list(self.reasons)}
        if self.never is not None:
            body["never"] = self.never
        return body


def _rejected(raw: object) -> tuple[RejectedDevice, ...]:
    """``rejected_devices`` or ``nearest_misses``: each device as ``kerrigan explain`` writes it read
    straight (devices rejected for the same reasons share one tuple of them), any other entry tolerantly."""
    shared: dict[tuple[str, ...], tuple[str, ...]] = {}
    out = []
    for entry in _list(raw):
        if type(entry) is dict and entry.keys() == _VERDICT_KEYS:
            device, pool, reasons, never = entry["device"], entry["pool"], entry["reasons"], entry["never"]
            if type(device) is str and type(pool) is str and type(reasons) is list and type(never) is bool:
                texts = tuple(reasons)
                known = shared.get(texts)
                if known is None and all(type(text) is str for text in texts):
                    known = shared[texts] = texts
                if known is not None:
                    out.append(RejectedDevice(device, pool, known, never))
                    continue
        out.append(RejectedDevice.from_document(entry))
    return tuple(out)


_VERDICT_KEYS: Final = {"device": None, "pool": None, "reasons": None, "never": None}.keys()


@dataclass(frozen=True, slots=True)
class HistogramRecord:
    """How many devices (or runner hosts) failed one rule, never or not yet, and the values they had."""

    reason: str
    kind: str
    count: int
    permanent: bool
    got: tuple[tuple[str, int], ...] = ()

    @classmethod
    def from_document(cls, raw: object) -> HistogramRecord:
        """One row of a ``histogram``."""
        body = _dict(raw)
        return cls(
            _str(body.get("reason")),
            _str(body.get("kind")),
            _int(body.get("count")) or 0,
            bool(body.get("permanent")),
            tuple((str(value), _int(count) or 0) for value, count in _dict(body.get("got")).items()),
        )

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain`` writes it."""
        return {
            "reason": self.reason,
            "kind": self.kind,
            "count": self.count,
            "permanent": self.permanent,
            "got": dict(self.got),
        }


@dataclass(frozen=True, slots=True)
class PoolRejection:
    """A pool turned away, with the pool-scoped rules it failed."""

    pool: str
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HintRecord:
    """Did-you-mean advice on a requested key, value or tag, at its manifest line."""

    field: str
    line: int | None
    message: str

    @classmethod
    def from_document(cls, raw: object) -> HintRecord:
        """One of ``hints``."""
        body = _dict(raw)
        return cls(_str(body.get("field")), _int(body.get("line")), _str(body.get("message")))

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain`` writes it."""
        return {"field": self.field, "line": self.line, "message": self.message}


def _requirements(raw: object) -> Requirements:
    body = _dict(raw)
    return Requirements.from_dict(
        {"labels": _dict(body.get("labels")), "tags": [str(tag) for tag in _list(body.get("tags"))]}
    )


@dataclass(frozen=True, slots=True)
class Match:
    """What matching found for a task's (or a gang role's) requirements against the devices, as recorded:
    the part of the document a task and each role of a gang share."""

    requested: Requirements = field(default_factory=Requirements)
    outcome: Outcome | None = None
    summary: str = ""
    eligible_pools: tuple[str, ...] = ()
    rejected_pools: tuple[PoolRejection, ...] = ()
    eligible_devices: tuple[str, ...] = ()
    rejected_devices: tuple[RejectedDevice, ...] = ()
    histogram: tuple[HistogramRecord, ...] = ()
    nearest_misses: tuple[RejectedDevice, ...] = ()
    hints: tuple[HintRecord, ...] = ()
    selected: tuple[str, ...] = ()

    @classmethod
    def from_document(cls, body: Mapping[str, Any]) -> Match:
        """The matching keys of a task or a role."""
        return cls(
            requested=_requirements(body.get("requested")),
            outcome=_outcome(body.get("outcome")),
            summary=_str(body.get("summary")),
            eligible_pools=_strs(body.get("eligible_pools")),
            rejected_pools=tuple(
                PoolRejection(_str(pool.get("pool")), _strs(pool.get("reasons")))
                for pool in map(_dict, _list(body.get("rejected_pools")))
            ),
            eligible_devices=_strs(body.get("eligible_devices")),
            rejected_devices=_rejected(body.get("rejected_devices")),
            histogram=tuple(map(HistogramRecord.from_document, _list(body.get("histogram")))),
            nearest_misses=_rejected(body.get("nearest_misses")),
            hints=tuple(map(HintRecord.from_document, _list(body.get("hints")))),
            selected=_strs(body.get("selected")),
        )

    def to_document(self) -> dict[str, object]:
        """The matching keys, as ``kerrigan explain`` writes them."""
        return {
            "requested": self.requested.as_dict(),
            "outcome": self.outcome.value if self.outcome is not None else None,
            "summary": self.summary,
            "eligible_pools": list(self.eligible_pools),
            "rejected_pools": [
                {"pool": pool.pool, "reasons": list(pool.reasons)} for pool in self.rejected_pools
            ],
            "eligible_devices": list(self.eligible_devices),
            "rejected_devices": [verdict.to_document() for verdict in self.rejected_devices],
            "histogram": [row.to_document() for row in self.histogram],
            "nearest_misses": [verdict.to_document() for verdict in self.nearest_misses],
            "hints": [hint.to_document() for hint in self.hints],
            "selected": list(self.selected),
        }


@dataclass(frozen=True, slots=True)
class RoleMatch:
    """One role of a gang task and how its requirements matched."""

    role: str
    match: Match


@dataclass(frozen=True, slots=True)
class GangRecord:
    """A gang task's runner hosts with a device for every role (the first few, and how many), and why it
    can never run when none has."""

    hosts: tuple[str, ...] = ()
    host_count: int = 0
    never: str | None = None


@dataclass(frozen=True, slots=True)
class HostRejection:
    """A runner host a task with ``board: none`` may not run on, with every reason."""

    host: str
    reasons: tuple[str, ...]
    never: bool


@dataclass(frozen=True, slots=True)
class HostsRecord:
    """A task with ``board: none``: the runner hosts considered, those it may run on, the one it would run
    on then, and why each other may not."""

    total: int = 0
    eligible: tuple[str, ...] = ()
    rejected: tuple[HostRejection, ...] = ()
    histogram: tuple[HistogramRecord, ...] = ()
    selected: str | None = None

    @classmethod
    def from_document(cls, raw: object) -> HostsRecord:
        """A task's ``hosts``."""
        body = _dict(raw)
        return cls(
            _int(body.get("total")) or 0,
            _strs(body.get("eligible")),
            tuple(
                HostRejection(_str(host.get("host")), _strs(host.get("reasons")), bool(host.get("never")))
                for host in map(_dict, _list(body.get("rejected")))
            ),
            tuple(map(HistogramRecord.from_document, _list(body.get("histogram")))),
            _optional_str(body.get("selected")),
        )

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain`` writes it."""
        return {
            "total": self.total,
            "eligible": list(self.eligible),
            "rejected": [
                {"host": host.host, "reasons": list(host.reasons), "never": host.never}
                for host in self.rejected
            ],
            "histogram": [row.to_document() for row in self.histogram],
            "selected": self.selected,
        }


@dataclass(frozen=True, slots=True)
class ResolvedTask:
    """One task of the manifest as it resolved: its own outcome and summary (a gang's verdict, a boardless
    task's runner hosts'), what its devices matched (``match``; for a gang the role that held it back most),
    and for a gang each role (``roles``, ``gang``), for ``board: none`` its runner hosts (``hosts``)."""

    id: str
    line: int | None = None
    match: Match = field(default_factory=Match)
    roles: tuple[RoleMatch, ...] = ()
    gang: GangRecord | None = None
    hosts: HostsRecord | None = None
    descriptions: Mapping[str, str] | None = None  # the approved label keys' own, of those it requested

    @property
    def outcome(self) -> Outcome | None:
        """Whether it could run: now, later, or never with the inventory then (None: not recorded)."""
        return self.match.outcome

    @property
    def boardless(self) -> bool:
        """Whether it holds no device (``board: none``)."""
        return self.hosts is not None

    def matches(self) -> Iterator[Match]:
        """Its own match, then each gang role's."""
        yield self.match
        for role in self.roles:
            yield role.match

    @classmethod
    def from_document(cls, raw: object) -> ResolvedTask:
        """One of the document's ``tasks``."""
        body = _dict(raw)
        gang = _dict(body.get("gang")) if "gang" in body else None
        descriptions = body.get("descriptions")
        return cls(
            id=_str(body.get("id")),
            line=_int(body.get("line")),
            match=Match.from_document(body),
            roles=tuple(
                RoleMatch(_str(role.get("role")), Match.from_document(role))
                for role in map(_dict, _list(body.get("roles")))
            ),
            gang=None
            if gang is None
            else GangRecord(
                _strs(gang.get("hosts")), _int(gang.get("host_count")) or 0, _optional_str(gang.get("never"))
            ),
            hosts=HostsRecord.from_document(body.get("hosts")) if body.get("board") == BOARD_NONE else None,
            descriptions={str(key): _str(text) for key, text in _dict(descriptions).items()}
            if isinstance(descriptions, dict)
            else None,
        )

    def to_document(self) -> dict[str, object]:
        """As ``kerrigan explain --format json`` writes it."""
        body: dict[str, object] = {"id": self.id, "line": self.line, **self.match.to_document()}
        if self.roles or self.gang is not None:
            body["roles"] = [{"role": role.role, **role.match.to_document()} for role in self.roles]
        if self.gang is not None:
            body["gang"] = {
                "hosts": list(self.gang.hosts),
                "host_count": self.gang.host_count,
                "never": self.gang.never,
            }
        if self.hosts is not None:
            body["board"] = BOARD_NONE
            body["hosts"] = self.hosts.to_document()
        if self.descriptions is not None:
            body["descriptions"] = dict(self.descriptions)
        return body


@dataclass(frozen=True, slots=True)
class HealthCheckRecord:
    """A health-check session's request: the device, what asked for the check, and the check run."""

    device: str
    why: str
    check: HealthCheck | None  # None: a document whose check no longer reads as one

    @classmethod
    def from_document(cls, raw: object) -> HealthCheckRecord:
        """The document's ``health_check``."""
        body = _dict(raw)
        try:
            check: HealthCheck | None = health_check_from_document(
                {key: body[key] for key in HEALTH_CHECK_KEYS if key in body}
            )
        except HealthCheckError:
            check = None
        return cls(_str(body.get("device")), _str(body.get("why")), check)

    def to_document(self) -> dict[str, object]:
        """As the health-check queue stores it."""
        return {"device": self.device, "why": self.why, **(self.check.as_document() if self.check else {})}


# -- the whole ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resolution:
    """A session's stored resolution: the manifest's problems and every task as it resolved (empty until
    it is resolved, and while it waits for approval), or a health check's request."""

    workflow: str | None = None
    file: str | None = None
    errors: tuple[ProblemRecord, ...] = ()
    warnings: tuple[ProblemRecord, ...] = ()
    repository: str | None = None
    repositories_not_checked: tuple[str, ...] = ()
    tasks: tuple[ResolvedTask, ...] = ()
    health_check: HealthCheckRecord | None = None

    @property
    def recorded(self) -> bool:
        """Whether anything was recorded (a session not resolved yet, or waiting for approval, has not)."""
        return self != EMPTY

    def matches(self) -> Iterator[Match]:
        """Every task's match and each gang role's: the tasks plus their roles, walked once here."""
        for task in self.tasks:
            yield from task.matches()

    def task(self, task_id: str) -> ResolvedTask | None:
        """The task of that id, if it was resolved."""
        return next((task for task in self.tasks if task.id == task_id), None)

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> Resolution:
        """The resolution a stored document holds (its per-device lists expanded by the store first)."""
        if not document:
            return EMPTY
        health_check = document.get("health_check")
        return cls(
            workflow=_optional_str(document.get("workflow")),
            file=_optional_str(document.get("file")),
            errors=tuple(map(ProblemRecord.from_document, _list(document.get("errors")))),
            warnings=tuple(map(ProblemRecord.from_document, _list(document.get("warnings")))),
            repository=_optional_str(document.get("repository")),
            repositories_not_checked=_strs(document.get("repositories_not_checked")),
            tasks=tuple(map(ResolvedTask.from_document, _list(document.get("tasks")))),
            health_check=HealthCheckRecord.from_document(health_check) if health_check is not None else None,
        )

    def to_document(self) -> dict[str, object]:
        """The document to store: the ``kerrigan explain`` JSON of a resolved manifest (``{}`` when nothing
        was recorded), with a health check's request under ``health_check``."""
        if not self.recorded:
            return {}
        document: dict[str, object] = {}
        if self.health_check is None or self.workflow or self.file or self.errors or self.tasks:
            document = {
                "workflow": self.workflow,
                "file": self.file,
                "errors": [problem.to_document() for problem in self.errors],
                "warnings": [problem.to_document() for problem in self.warnings],
                "repository": self.repository,
                "repositories_not_checked": list(self.repositories_not_checked),
                "tasks": [task.to_document() for task in self.tasks],
            }
        if self.health_check is not None:
            document["health_check"] = self.health_check.to_document()
        return document


EMPTY: Final = Resolution()
"""Nothing recorded: a session not resolved yet, or waiting for approval."""
