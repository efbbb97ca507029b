"""Reservations: a board for a person, in the same queue as CI (DESIGN.md, "Reservations").

A person asks for a device by labels and tags (or one device by id) for a duration, optionally waiting up
to ``wait_s`` for one to free. The request is read here (:func:`read_request`: every field checked, the
first problem named by its field), resolved like a task's requirements, and queued between gate work and
normal work. Once granted, the device is leased to the person until the reservation ends: its duration
runs out, or the person, the device's pool owners or an admin release it. It never preempts a running job.

Everything here is pure; :mod:`kerrigan.store.reservations` applies it in transactions.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from kerrigan.core.device_status import DeviceReservation
from kerrigan.core.labels import (
    LabelError,
    is_valid_name,
    validate_requested_key,
    validate_tag,
    validate_value,
)
from kerrigan.core.printable import is_printable
from kerrigan.core.requirements import LabelRequirement, Origin, Requirements, TagRequirement
from kerrigan.core.roles import Principal

DEFAULT_MAX_S: Final = 8 * 3600  # KERRIGAN_RESERVATION_MAX_S
DEFAULT_PER_USER: Final = 2  # KERRIGAN_RESERVATIONS_PER_USER
MAX_WAIT_S: Final = 24 * 3600
# A reservation that may not wait (wait_s 0) still has this long for the dispatcher's next rounds (it is
# woken at once, and decides within one): then, no device free, it ends.
FIRST_ROUNDS_S: Final = 5
MAX_NOTE: Final = 200
MAX_LABELS: Final = 32
MAX_TAGS: Final = 32
REQUEST_KEYS: Final = ("id", "labels", "tags", "device", "duration_s", "wait_s", "note")
_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class ReservationState(enum.StrEnum):
    """Where a reservation stands."""

    WAITING = "waiting"  # queued for a device
    ACTIVE = "active"  # its device is leased to the person
    ENDED = "ended"


class EndReason(enum.StrEnum):
    """Why a reservation ended."""

    RELEASED = "released"  # the person, a pool owner or an admin released it (or withdrew it, waiting)
    EXPIRED = "expired"  # its duration ran out
    WAIT_EXPIRED = "wait_expired"  # no device freed within its wait


class RequestError(ValueError):
    """A request that cannot be queued: the field it names and why (answered 400, nothing queued)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message = field, message


@dataclass(frozen=True, slots=True)
class ReservationRequest:
    """What a person asked for, checked."""

    requirements: Requirements
    duration_s: int
    device: str | None = None
    wait_s: int = 0  # 0: granted by the next rounds (FIRST_ROUNDS_S) or not at all
    id: str | None = None  # the client's own id for it (a UUID), so it can withdraw what it asked for

    @property
    def waits_s(self) -> int:
        """How long it stays queued for a device at most."""
        return max(self.wait_s, FIRST_ROUNDS_S)

    note: str = ""


def read_request(body: object, *, max_s: int = DEFAULT_MAX_S) -> ReservationRequest:
    """A request body (``POST /api/v1/reservations``) read and checked; :class:`RequestError` names the
    first field that is wrong."""
    if not isinstance(body, Mapping):
        raise RequestError("body", "must be a JSON object")
    unknown = sorted(str(key) for key in body if key not in REQUEST_KEYS)
    if unknown:
        raise RequestError(unknown[0], f"unknown field; expected {', '.join(REQUEST_KEYS)}")
    labels = _labels(body.get("labels"))
    tags = _tags(body.get("tags"))
    device = body.get("device")
    if device is not None and (not isinstance(device, str) or not is_valid_name(device)):
        raise RequestError("device", "must be a device id (lowercase letters, digits, '.', '_' and '-')")
    if device is None and not labels and not tags:
        raise RequestError("labels", "give labels, tags or a device: a reservation must ask for something")
    duration = _seconds(body.get("duration_s"), "duration_s", required=True)
    if not 1 <= duration <= max_s:
        raise RequestError(
            "duration_s", f"must be 1 to {max_s} seconds (KERRIGAN_RESERVATION_MAX_S), not {duration}"
        )
    wait = _seconds(body.get("wait_s"), "wait_s", required=False)
    if not 0 <= wait <= MAX_WAIT_S:
        raise RequestError("wait_s", f"must be 0 to {MAX_WAIT_S} seconds, not {wait}")
    note = body.get("note", "")
    if not isinstance(note, str) or len(note) > MAX_NOTE or not is_printable(note):
        raise RequestError("note", f"must be at most {MAX_NOTE} printable characters on one line")
    chosen = body.get("id")
    if chosen is not None and (not isinstance(chosen, str) or _UUID.fullmatch(chosen) is None):
        raise RequestError("id", "must be a UUID in lowercase (the client's own id for the reservation)")
    return ReservationRequest(
        Requirements(labels, tags), duration, device=device, wait_s=wait, note=note.strip(), id=chosen
    )


def _seconds(value: object, field: str, *, required: bool) -> int:
    if value is None:
        if required:
            raise RequestError(field, "is required: a whole number of seconds")
        return 0
    return whole_seconds(value, field)


def whole_seconds(value: object, field: str) -> int:
    """A whole JSON number (``60`` or ``60.0``, as JSON Schema's integer), or :class:`RequestError`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(field, f"must be a whole number of seconds, not {value!r}")
    return value


def _labels(value: object) -> dict[str, LabelRequirement]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RequestError("labels", "must be an object of label keys to a value or a list of values")
    if len(value) > MAX_LABELS:
        raise RequestError("labels", f"at most {MAX_LABELS} labels")
    labels: dict[str, LabelRequirement] = {}
    for raw, values in value.items():
        field = f"labels.{str(raw)[:64]}"
        try:
            key = validate_requested_key(str(raw))
            allowed = [values] if isinstance(values, str) else values
            if not isinstance(allowed, list) or not allowed or not all(isinstance(v, str) for v in allowed):
                raise RequestError(field, "must be a value or a non-empty list of values")
            checked = tuple(dict.fromkeys(validate_value(v, key=key) for v in allowed))
        except LabelError as exc:
            raise RequestError(field, str(exc)) from None
        if key in labels:
            raise RequestError(field, f"label {key!r} is given twice (keys are case-insensitive)")
        labels[key] = LabelRequirement(key, checked, (Origin(field, 0),))
    return labels


def _tags(value: object) -> tuple[TagRequirement, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(tag, str) for tag in items):
        raise RequestError("tags", "must be a tag or a list of tags")
    if len(items) > MAX_TAGS:
        raise RequestError("tags", f"at most {MAX_TAGS} tags")
    tags: dict[str, TagRequirement] = {}
    for index, text in enumerate(items):
        try:
            tag = validate_tag(text)
        except LabelError as exc:
            raise RequestError(f"tags[{index}]", str(exc)) from None
        tags.setdefault(tag, TagRequirement(tag, Origin(f"tags[{index}]", 0)))
    return tuple(tags.values())


def reserved_text(login: str, until: datetime, note: str) -> str:
    """A reserved device's reason, *not yet*: ``device reserved by hubot until 2026-12-01 12:30: UART
    bring-up``."""
    return str(DeviceReservation(login, until, note))


def may_end(principal: Principal, holder: str, pool_owners: frozenset[str]) -> bool:
    """Release (or extend) a reservation held by ``holder``: the person, the owners of its device's pool
    (lowercase logins) and admins. A waiting reservation has no device: its person and admins."""
    login = principal.login.lower()
    return principal.admin or login == holder.lower() or login in pool_owners


def over_limit(active: int, per_user: int = DEFAULT_PER_USER) -> str | None:
    """Why a person holding (or waiting for) ``active`` reservations may not ask for one more."""
    if active >= per_user:
        return (
            f"you hold or wait for {active} reservations; at most {per_user} at once "
            "(KERRIGAN_RESERVATIONS_PER_USER): release one first"
        )
    return None
