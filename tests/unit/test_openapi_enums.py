"""The API document's enums are core's: each property and filter that names a state, class, reason or
outcome core has an enum for lists exactly that enum's values."""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any, Final

from kerrigan.core.device_power import PowerAction, PowerState
from kerrigan.core.device_status import Health
from kerrigan.core.inventory import DeviceState, LabelSource
from kerrigan.core.inventory_diff import ChangeKind
from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState, SessionState
from kerrigan.core.matching import Outcome
from kerrigan.core.reservations import EndReason, ReservationState
from kerrigan.web.api.openapi import document

# (where, property or parameter) -> core's enum; ``where`` is a component schema's name, or a path for
# its query parameters.
MIRRORS: Final[dict[tuple[str, str], type[enum.Enum]]] = {
    ("Labels", "source"): LabelSource,
    ("Device", "state"): DeviceState,
    ("DeviceCreate", "state"): DeviceState,
    ("DeviceState", "state"): DeviceState,
    ("Device", "health"): Health,
    ("AuditEntry", "action"): ChangeKind,
    ("Reservation", "state"): ReservationState,
    ("Reservation", "end_reason"): EndReason,
    ("Job", "state"): JobState,
    ("Job", "failure_class"): FailureClass,
    ("StrandedJob", "state"): JobState,
    ("Session", "state"): SessionState,
    ("Session", "conclusion"): Conclusion,
    ("Cancelled", "state"): SessionState,
    ("Cancelled", "conclusion"): Conclusion,
    ("ExplainTask", "outcome"): Outcome,
    ("/devices", "state"): DeviceState,
    ("PowerRequest", "action"): PowerAction,
    ("DevicePower", "action"): PowerAction,
    ("DevicePower", "state"): PowerState,
    ("/sessions", "state"): SessionState,
    ("/sessions", "conclusion"): Conclusion,
}
# Properties named like a core enum's whose values are not one: a runner host's pause (a host is active or
# paused by a person; core has no enum of it).
NOT_CORE: Final = {("HostState", "state")}


def _enums(node: Any, where: str, name: str = "") -> Iterator[tuple[str, str, list[Any]]]:
    """Every (schema, property, enum) under ``node``; nested properties keep their schema's name."""
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            yield where, name, node["enum"]
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for prop, schema in value.items():
                    yield from _enums(schema, where, prop)
            elif key != "enum":
                yield from _enums(value, where, name)
    elif isinstance(node, list):
        for item in node:
            yield from _enums(item, where, name)


def _query_enums(paths: dict[str, Any]) -> Iterator[tuple[str, str, list[Any]]]:
    for path, operations in paths.items():
        for operation in operations.values():
            for parameter in operation.get("parameters", ()) if isinstance(operation, dict) else ():
                schema = parameter.get("schema", {})
                if parameter.get("in") == "query" and isinstance(schema.get("enum"), list):
                    yield path, parameter["name"], schema["enum"]


def _expected(kind: type[enum.Enum], listed: list[Any]) -> list[Any]:
    values = [member.value for member in kind]
    return [None, *values] if None in listed else values


def test_every_enum_that_mirrors_core_lists_cores_values() -> None:
    built = document()
    seen: set[tuple[str, str]] = set()
    for where, schema in built["components"]["schemas"].items():
        for owner, prop, listed in _enums(schema, where):
            key = (owner, prop)
            if key in MIRRORS:
                seen.add(key)
                assert listed == _expected(MIRRORS[key], listed), key
            elif prop in {"state", "conclusion", "health", "end_reason", "failure_class", "outcome"}:
                assert key in NOT_CORE, f"{key} lists {listed}: build it from core's enum (fields.enum_of)"
    for path, name, listed in _query_enums(built["paths"]):
        key = (path, name)
        if key in MIRRORS:
            seen.add(key)
            assert listed == _expected(MIRRORS[key], listed), key
        elif name in {"state", "conclusion"}:
            raise AssertionError(f"{key} lists {listed}: build it from core's enum (fields.enum_of)")
    assert seen == set(MIRRORS)  # every mirror named here is in the document


def test_job_states_include_waiting_and_skipped() -> None:
    listed = document()["components"]["schemas"]["Job"]["properties"]["state"]["enum"]
    assert {"waiting", "skipped"} <= set(listed)
