"""A pool's or a device's fields as a request's body gives them (the API's JSON, or what a page's form stands
for), each checked: a rule broken is a 400 naming the field."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.health_checks import (
    HEALTH_CHECK_KEYS,
    HealthCheck,
    HealthCheckError,
    health_check_from_document,
)
from kerrigan.core.instants import EXAMPLE as TIME_EXAMPLE
from kerrigan.core.instants import TimeError, read_time
from kerrigan.core.inventory import (
    MAX_POOL_REPOSITORIES,
    Device,
    DeviceState,
    Firmware,
    Pool,
    RepositoryGlobError,
    validate_repository_glob,
)
from kerrigan.store.inventory import (
    NotFoundError,
    get_pool,
)
from kerrigan.web import bodies
from kerrigan.web.errors import ApiError, bad_request

# -- whole fields from a body ----------------------------------------------------------------------

POOL_PATCH_FIELDS = ("name", "owners", "repositories", "firmware", "labels", "tags", "health_check")
DEVICE_PATCH_FIELDS = (
    "pool",
    "board",
    "target_type",
    "os_type",
    "host",
    "labels",
    "tags",
    "health_check",
)


def repository_globs(value: Any, field: str) -> tuple[str, ...]:
    """A pool's ``repositories``: a list of globs on ``owner/name``, each kept once (ignoring case); the
    error's field is the list or the entry (``repositories[1]``)."""
    if not isinstance(value, list):
        raise bad_request(f"{field} must be a list of owner/name globs", field=field)
    if len(value) > MAX_POOL_REPOSITORIES:
        raise bad_request(f"{field} has {len(value)} globs; at most {MAX_POOL_REPOSITORIES}", field=field)
    kept: dict[str, str] = {}
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise bad_request(f"{field}[{index}] must be a string", field=f"{field}[{index}]")
        try:
            kept.setdefault(validate_repository_glob(item).lower(), item)
        except RepositoryGlobError as exc:
            raise bad_request(str(exc), field=f"{field}[{index}]", code="invalid_repository") from None
    return tuple(kept.values())


def pool_from(body: Mapping[str, Any], pool: Pool) -> Pool:
    """``pool`` with the fields ``body`` gives (the API's JSON, or what a page's form stands for)."""
    changes: dict[str, Any] = {}
    if "name" in body:
        changes["name"] = bodies.string(body["name"], "name")
    if "owners" in body:
        changes["owners"] = bodies.logins(body["owners"], "owners")
    if "repositories" in body:
        changes["repositories"] = repository_globs(body["repositories"], "repositories")
    if "firmware" in body:
        firmware = body["firmware"]
        if not isinstance(firmware, dict) or set(firmware) - {"channel", "base_version"}:
            raise bad_request("firmware must be an object with channel and base_version", field="firmware")
        values = {
            name: None
            if firmware.get(name) is None
            else bodies.label_value(firmware[name], f"firmware.{name}", f"firmware {name}")
            for name in ("channel", "base_version")
        }
        changes["firmware"] = Firmware(values["channel"], values["base_version"])
    if "labels" in body:
        changes["labels"] = bodies.labels(body["labels"], "labels")
    if "tags" in body:
        changes["tags"] = bodies.tags(body["tags"], "tags")
    if "health_check" in body:
        changes["health_check"] = health_check(body["health_check"], "health_check")
    return dataclasses.replace(pool, **changes)


def health_check(value: Any, field: str) -> HealthCheck | None:
    """A pool's or a device's ``health_check``: ``{"run", "every", "timeout_s", "vcpus"}`` (only ``run``
    required), or ``null`` for none; a 400 naming the key that breaks its rule."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request(
            f'{field} must be an object such as {{"run": "/opt/lab/health.sh", "every": "24h"}}, '
            "or null for none",
            field=field,
        )
    # JSON has one kind of number: 600.0 is the integer 600 to a client (and to JSON Schema).
    value = {
        key: int(item) if isinstance(item, float) and item.is_integer() and key != "run" else item
        for key, item in value.items()
    }
    unknown = sorted(set(value) - set(HEALTH_CHECK_KEYS))
    if unknown:
        keys = ", ".join(HEALTH_CHECK_KEYS)
        raise bad_request(
            f"{field} has no key {unknown[0]!r}: it takes {keys}", field=f"{field}.{unknown[0]}"
        )
    if "run" not in value:
        raise bad_request(
            f"{field}.run is required: the command that checks the device", field=f"{field}.run"
        )
    for key in HEALTH_CHECK_KEYS:  # each key alone, so the error names the one that is wrong
        alone = {"run": value["run"]} if key == "run" else {"run": "true", key: value.get(key)}
        if key in value:
            try:
                health_check_from_document(alone)
            except HealthCheckError as exc:
                raise bad_request(f"{field}.{key}: {exc}", field=f"{field}.{key}") from None
    try:
        return health_check_from_document(value)
    except HealthCheckError as exc:
        raise bad_request(f"{field}: {exc}", field=field) from None


def device_from(body: Mapping[str, Any], device: Device) -> Device:
    """``device`` with the fields ``body`` gives."""
    changes: dict[str, Any] = {}
    if "pool" in body:
        changes["pool_id"] = bodies.identifier(body["pool"], "pool")
    for name in ("board", "target_type", "os_type"):
        if name in body:
            changes[name] = bodies.label_value(body[name], name, name)
    if "host" in body:
        changes["host"] = bodies.identifier(body["host"], "host")
    if "state" in body:
        changes["state"] = bodies.state(body["state"], "state")
    if "state_reason" in body:
        reason = body["state_reason"]
        changes["state_reason"] = (
            "" if reason == "" else bodies.string(reason, "state_reason", max_length=500)
        )
    if "labels" in body:
        changes["labels"] = bodies.labels(body["labels"], "labels")
    if "tags" in body:
        changes["tags"] = bodies.tags(body["tags"], "tags")
    if "health_check" in body:
        changes["health_check"] = health_check(body["health_check"], "health_check")
    return dataclasses.replace(device, **changes)


def device_state(state: Any, reason: Any) -> tuple[DeviceState, str]:
    """A state change's state and reason (an empty reason is allowed), checked before anything is read."""
    checked = bodies.state(state, "state")
    if reason != "":
        reason = bodies.string(reason, "reason", max_length=500)
    return checked, reason


def state_until(value: Any, state: DeviceState, now: datetime) -> datetime | None:
    """When a maintenance ends by itself: an ISO 8601 time with its offset (``2026-12-01T18:00:00Z``), in
    the future, and only for maintenance; ``None``/empty for none. A 400 naming ``until`` otherwise."""
    if value is None or value == "":
        return None
    if state is not DeviceState.MAINTENANCE:
        raise bad_request(
            "until is for maintenance only: another state lasts until it is changed", field="until"
        )
    return future_time(value, now, "until")


def future_time(value: Any, now: datetime, field: str) -> datetime:
    """An ISO 8601 time with its offset, later than ``now``; a 400 naming ``field`` otherwise."""
    if not isinstance(value, str):
        raise bad_request(f"{field} must be an ISO 8601 time such as {TIME_EXAMPLE}", field=field)
    try:
        at = read_time(value)
    except TimeError as exc:
        raise bad_request(f"{field} {exc}", field=field) from None
    if at <= now:
        raise bad_request(f"{field} {value[:40]!r} is not in the future", field=field)
    return at


async def pool_exists(session: AsyncSession, pool_id: str) -> None:
    """A pool named in a body must exist: its absence is a 422 naming ``pool`` (the body is well formed but
    names what the lab does not have), not a missing page."""
    try:
        await get_pool(session, pool_id)
    except NotFoundError:
        raise ApiError(422, "unknown_pool", f"there is no pool {pool_id!r}", "pool") from None
