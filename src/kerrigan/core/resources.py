"""Resource values across a boundary, keyed by name (seed 001).

A runner host reports its resources (vCPUs, ``max_weight``, free disk, ...) to the dispatcher, and the
dispatcher hands claims to runners and values to the API. Every such value travels with the resource's
*name*; the receiver resolves the name through its own :class:`ResourceCatalog`, which gives each
resource a slot in the order the receiver registered it. Nothing assumes the sender numbered resources the
same way. A name the receiver does not know is reported (the caller logs a warning) and skipped, without
touching other values or rejecting the message. Resolution reads the catalog as it is at that moment, so
a resource added or removed at run time is seen by the very next message.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field


class Unit(enum.StrEnum):
    """What a resource's value counts."""

    COUNT = "count"
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource the receiver knows: its name, unit and slot in the receiver's own numbering."""

    name: str
    unit: Unit
    slot: int


@dataclass(frozen=True, slots=True)
class Skipped:
    """A value that was not applied, and why (for a warning in the caller's log)."""

    name: str
    reason: str


class ResourceCatalog:
    """The receiver's own catalog: resource names to slots, in the receiver's registration order."""

    def __init__(self, resources: Iterable[tuple[str, Unit]] = ()) -> None:
        self._by_name: dict[str, Resource] = {}
        self._next_slot = 0
        for name, unit in resources:
            self.add(name, unit)

    def add(self, name: str, unit: Unit = Unit.COUNT) -> Resource:
        """Register a resource (again, if it was known: its slot stays); returns it."""
        known = self._by_name.get(name)
        if known is not None:
            return known
        resource = Resource(name, unit, self._next_slot)
        self._next_slot += 1  # slots are never reused, so a value cannot land on a removed resource's slot
        self._by_name[name] = resource
        return resource

    def remove(self, name: str) -> None:
        """Forget a resource; values sent for it from now on are skipped."""
        self._by_name.pop(name, None)

    def get(self, name: str) -> Resource | None:
        """The resource of that name, now."""
        return self._by_name.get(name)

    def names(self) -> list[str]:
        """Every known name, in slot order."""
        return [resource.name for resource in sorted(self._by_name.values(), key=lambda r: r.slot)]


@dataclass(frozen=True, slots=True)
class ResourceValues:
    """Values held by the receiver, by its own slots (what a scheduler indexes)."""

    by_slot: Mapping[int, int] = field(default_factory=dict)

    def value(self, catalog: ResourceCatalog, name: str) -> int | None:
        """The value of a resource, looked up by name through the receiver's catalog."""
        resource = catalog.get(name)
        return self.by_slot.get(resource.slot) if resource is not None else None

    def named(self, catalog: ResourceCatalog) -> dict[str, int]:
        """The values keyed by name again, as they are sent on (to the API, say)."""
        return {
            name: self.by_slot[resource.slot]
            for name in catalog.names()
            if (resource := catalog.get(name)) is not None and resource.slot in self.by_slot
        }


def _resolve(
    catalog: ResourceCatalog, values: Iterable[tuple[str, object]]
) -> tuple[dict[int, int], list[Skipped]]:
    resolved: dict[int, int] = {}
    skipped: list[Skipped] = []
    for name, value in values:
        resource = catalog.get(name)
        if resource is None:
            skipped.append(Skipped(name, "no such resource in this catalog"))
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            skipped.append(Skipped(name, f"value {value!r} is not a whole number of {resource.unit.value}"))
            continue
        resolved[resource.slot] = value
    return resolved, skipped


def _pairs(values: Mapping[str, object] | Iterable[tuple[str, object]]) -> Iterable[tuple[str, object]]:
    return values.items() if isinstance(values, Mapping) else values


def initial_values(
    catalog: ResourceCatalog, values: Mapping[str, object] | Iterable[tuple[str, object]]
) -> tuple[ResourceValues, list[Skipped]]:
    """The first message (a registration, an initial configuration): name-keyed values to slots."""
    return update_values(ResourceValues(), catalog, values)


def update_values(
    current: ResourceValues,
    catalog: ResourceCatalog,
    values: Mapping[str, object] | Iterable[tuple[str, object]],
) -> tuple[ResourceValues, list[Skipped]]:
    """A later message (a heartbeat): the named values replace the ones held; others are kept.

    The initial path is this same function from nothing, so both give the same state for the same values.
    """
    resolved, skipped = _resolve(catalog, _pairs(values))
    return ResourceValues({**current.by_slot, **resolved}), skipped
