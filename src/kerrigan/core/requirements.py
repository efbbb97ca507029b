"""What a task asks of a device: labels (each allowed one of some values) and tags.

Task requirements refine the session's: tags add up, and a key set in both places allows only the values
both allow. An empty intersection is a conflict naming both places.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Origin:
    """Where in a manifest a requirement was written."""

    field: str
    line: int

    def __str__(self) -> str:
        return f"{self.field} (line {self.line})"


@dataclass(frozen=True, slots=True)
class LabelRequirement:
    """``key`` must equal one of ``values`` (a single value is a list of one)."""

    key: str
    values: tuple[str, ...]
    origins: tuple[Origin, ...] = ()

    @property
    def allowed(self) -> frozenset[str]:
        """The allowed values as a set."""
        return frozenset(self.values)


@dataclass(frozen=True, slots=True)
class TagRequirement:
    """``tag`` must be present on the device."""

    tag: str
    origin: Origin | None = None


@dataclass(frozen=True, slots=True)
class Requirements:
    """Labels and tags a device must have; label keys are unique and in the order written."""

    labels: Mapping[str, LabelRequirement] = field(default_factory=dict)
    tags: tuple[TagRequirement, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """The ``requested`` object of ``kerrigan explain`` JSON."""
        return {
            "labels": {key: list(req.values) for key, req in self.labels.items()},
            "tags": [req.tag for req in self.tags],
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Requirements:
        """Requirements as :meth:`as_dict` records them (a resolution's ``requested``, a job's)."""
        labels = {
            key: LabelRequirement(key, (values,) if isinstance(values, str) else tuple(values))
            for key, values in record.get("labels", {}).items()
        }
        return cls(labels, tuple(TagRequirement(tag) for tag in record.get("tags", [])))


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two places ask for the same key with no value in common."""

    key: str
    session: LabelRequirement
    task: LabelRequirement

    def message(self) -> str:
        """Names both places and both value sets."""
        return (
            f"label {self.key!r} cannot be satisfied: {_where(self.session)} allows "
            f"{_values(self.session.values)} but {_where(self.task)} allows "
            f"{_values(self.task.values)}; no value is in both"
        )


def _where(req: LabelRequirement) -> str:
    return " and ".join(str(origin) for origin in req.origins) or "the manifest"


def _values(values: tuple[str, ...]) -> str:
    return values[0] if len(values) == 1 else f"[{', '.join(values)}]"


def refine(session: Requirements, task: Requirements) -> tuple[Requirements, list[Conflict]]:
    """The task's requirements on top of the session's, and every conflict between them."""
    labels = dict(session.labels)
    conflicts: list[Conflict] = []
    for key, asked in task.labels.items():
        existing = labels.get(key)
        if existing is None:
            labels[key] = asked
            continue
        allowed = asked.allowed
        common = tuple(value for value in existing.values if value in allowed)
        if not common:
            conflicts.append(Conflict(key, existing, asked))
            continue
        labels[key] = LabelRequirement(key, common, existing.origins + asked.origins)
    tags = list(session.tags)
    seen = {req.tag for req in tags}
    for req in task.tags:
        if req.tag not in seen:
            seen.add(req.tag)
            tags.append(req)
    return Requirements(labels, tuple(tags)), conflicts
