"""``/api/v1/pools`` and ``/api/v1/devices``: read, create, update, delete; labels, tags and states.

Reads carry an ``ETag``; writes honour ``If-Match`` (412 when stale) and answer with the new ``ETag``.
Roles are the seed's: admins edit everything, pool owners edit labels and tags of their own pools and the
devices in them, everyone else reads.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory import (
    DEVICE_FIELDS,
    POOL_FIELDS,
    Device,
    Firmware,
    Pool,
    effective_pool_labels,
    effective_target_labels,
)
from kerrigan.core.labels import LabelError, validate_tag
from kerrigan.core.roles import Principal, UnapprovedKeyError, check_label, may_administer, may_edit_labels
from kerrigan.store.audit import Change
from kerrigan.store.inventory import (
    NotFoundError,
    StoredDevice,
    create_device,
    create_pool,
    delete_device,
    delete_pool,
    get_device,
    get_pool,
    list_devices,
    list_pools,
    save_device,
    save_pool,
)
from kerrigan.store.label_keys import label_keys
from kerrigan.web.api import bodies
from kerrigan.web.api.representations import device_json, pool_json
from kerrigan.web.auth import forbidden, reader, signed_in
from kerrigan.web.errors import bad_request
from kerrigan.web.state import DATABASE, writing

routes = web.RouteTableDef()


_POOL_PATCH_FIELDS = ("name", "owners", "firmware", "labels", "tags")

_DEVICE_PATCH_FIELDS = ("pool", "board", "target_type", "os_type", "host", "labels", "tags")
_LABEL_FIELDS = {"labels", "tags"}


def _change(request: web.Request, principal: Principal) -> Change:
    return Change(principal.login, request.config_dict[DATABASE].clock())


def _with_etag(body: Mapping[str, Any], etag: str, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers={"ETag": etag})


# -- filters ---------------------------------------------------------------------------------------


def _filters(request: web.Request) -> tuple[dict[str, str], frozenset[str]]:
    """``?label=key=value`` (repeatable) and ``?tag=name`` (repeatable), on effective labels and tags."""
    labels: dict[str, str] = {}
    for item in request.query.getall("label", []):
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise bad_request(f"label filter {item!r} must look like key=value", field="label")
        labels[key.lower()] = value
    try:
        tags = frozenset(validate_tag(tag) for tag in request.query.getall("tag", []))
    except LabelError as exc:
        raise bad_request(str(exc), field="tag") from None
    return labels, tags


def _matches(
    labels: Mapping[str, str], tags: Iterable[str], wanted: tuple[dict[str, str], frozenset[str]]
) -> bool:
    want_labels, want_tags = wanted
    return all(labels.get(k) == v for k, v in want_labels.items()) and want_tags <= frozenset(tags)


# -- pools -----------------------------------------------------------------------------------------


@routes.get("/pools")
async def pools_index(request: web.Request) -> web.Response:
    """Pools, filtered by effective labels and tags, with device counts by state."""
    await reader(request)
    wanted = _filters(request)
    async with request.config_dict[DATABASE].sessions() as session:
        pools = await list_pools(session)
        devices = await list_devices(session)
    states: dict[str, Counter[str]] = {}
    for stored in devices:
        states.setdefault(stored.device.pool_id, Counter())[stored.device.state.value] += 1
    body = [
        pool_json(stored, states.get(stored.pool.id, Counter()))
        for stored in pools
        if _matches(effective_pool_labels(stored.pool), stored.pool.tags, wanted)
    ]
    return web.json_response({"pools": body})


@routes.post("/pools")
async def pools_create(request: web.Request) -> web.Response:
    """Create a pool (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "create pools: only System Admins may")
    body = await bodies.json_object(request, POOL_FIELDS)
    pool_id = bodies.identifier(bodies.required(body, "id"), "id")
    pool = _pool_from(body, Pool(id=pool_id, name=pool_id))
    async with writing(request) as session:
        stored = await create_pool(session, pool, _change(request, principal))
    response = _with_etag(pool_json(stored), stored.etag, status=201)
    response.headers["Location"] = f"/api/v1/pools/{pool_id}"
    return response


def _pool_from(body: Mapping[str, Any], pool: Pool) -> Pool:
    changes: dict[str, Any] = {}
    if "name" in body:
        changes["name"] = bodies.string(body["name"], "name")
    if "owners" in body:
        changes["owners"] = bodies.logins(body["owners"], "owners")
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
    return dataclasses.replace(pool, **changes)


@routes.get("/pools/{pool_id}")
async def pools_read(request: web.Request) -> web.Response:
    """One pool."""
    await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        stored = await get_pool(session, request.match_info["pool_id"])
        states = Counter(d.device.state.value for d in await list_devices(session, stored.pool.id))
    return _with_etag(pool_json(stored, states), stored.etag)


async def _approved_check(
    session: AsyncSession,
    principal: Principal,
    before: Mapping[str, str],
    after: Mapping[str, str],
    field: str,
) -> None:
    """Keys added or changed must be approved once the registry has entries (admins excepted)."""
    approved = await label_keys(session)
    for key, value in after.items():
        if before.get(key) != value:
            try:
                check_label(key, value, approved=approved, principal=principal)
            except LabelError as exc:
                raise bad_request(str(exc), field=f"{field}.{key}", code="unapproved_key") from None


def _check_edit(principal: Principal, pool: Pool, fields: Iterable[str], what: str) -> None:
    """Owners of ``pool`` edit only labels and tags of ``what`` (the pool or one of its devices)."""
    fields = set(fields)
    if not may_edit_labels(principal, pool):
        raise forbidden(principal, f"edit {what}: only System Admins and owners of pool {pool.id} may")
    if fields - _LABEL_FIELDS and not may_administer(principal):
        names = ", ".join(sorted(fields - _LABEL_FIELDS))
        raise forbidden(principal, f"change {names} of {what}: owners edit only labels and tags")


def _check_pool_edit(principal: Principal, pool: Pool, fields: Iterable[str]) -> None:
    _check_edit(principal, pool, fields, f"pool {pool.id}")


@routes.patch("/pools/{pool_id}")
async def pools_update(request: web.Request) -> web.Response:
    """Change a pool's name, owners, firmware (admins), labels or tags (admins and owners)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, _POOL_PATCH_FIELDS)
    async with writing(request) as session:
        stored = await get_pool(session, request.match_info["pool_id"], lock=True)
        _check_pool_edit(principal, stored.pool, body)
        pool = _pool_from(body, stored.pool)
        await _approved_check(session, principal, stored.pool.labels, pool.labels, "labels")
        saved = await save_pool(session, pool, _change(request, principal), request.headers.get("If-Match"))
    return _with_etag(pool_json(saved), saved.etag)


@routes.delete("/pools/{pool_id}")
async def pools_delete(request: web.Request) -> web.Response:
    """Delete an empty pool (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "delete pools: only System Admins may")
    async with writing(request) as session:
        await delete_pool(
            session,
            request.match_info["pool_id"],
            _change(request, principal),
            request.headers.get("If-Match"),
        )
    return web.Response(status=204)


async def _label_value(request: web.Request) -> str:
    if request.method == "DELETE":
        return ""
    body = await bodies.json_object(request, ("value",))
    value = bodies.required(body, "value")
    if not isinstance(value, str):
        raise bad_request("value must be a string (an empty one removes the label)", field="value")
    return value


def _edited_labels(
    labels: Mapping[str, str], key: str, value: str, approved: Mapping[str, str], principal: Principal
) -> dict[str, str]:
    try:
        normalised, checked = check_label(key, value, approved=approved, principal=principal)
    except LabelError as exc:
        code = "unapproved_key" if isinstance(exc, UnapprovedKeyError) else "invalid_label"
        raise bad_request(str(exc), field=exc.subject, code=code) from None
    edited = dict(labels)
    if checked is None:
        edited.pop(normalised, None)
    else:
        edited[normalised] = checked
    return edited


def _edited_tags(tags: frozenset[str], tag: str, add: bool) -> frozenset[str]:
    try:
        checked = validate_tag(tag)
    except LabelError as exc:
        raise bad_request(str(exc), field="tag", code="invalid_tag") from None
    return tags | {checked} if add else tags - {checked}


@routes.put("/pools/{pool_id}/labels/{key}")
@routes.delete("/pools/{pool_id}/labels/{key}")
async def pools_label(request: web.Request) -> web.Response:
    """Set a pool label (an empty value removes it) or remove it."""
    principal = await signed_in(request)
    value = await _label_value(request)
    async with writing(request) as session:
        stored = await get_pool(session, request.match_info["pool_id"], lock=True)
        _check_pool_edit(principal, stored.pool, ["labels"])
        labels = _edited_labels(
            stored.pool.labels, request.match_info["key"], value, await label_keys(session), principal
        )
        saved = await save_pool(
            session,
            dataclasses.replace(stored.pool, labels=labels),
            _change(request, principal),
            request.headers.get("If-Match"),
        )
    return _with_etag(pool_json(saved), saved.etag)


@routes.put("/pools/{pool_id}/tags/{tag}")
@routes.delete("/pools/{pool_id}/tags/{tag}")
async def pools_tag(request: web.Request) -> web.Response:
    """Add or remove a pool tag."""
    principal = await signed_in(request)
    async with writing(request) as session:
        stored = await get_pool(session, request.match_info["pool_id"], lock=True)
        _check_pool_edit(principal, stored.pool, ["tags"])
        tags = _edited_tags(stored.pool.tags, request.match_info["tag"], request.method == "PUT")
        saved = await save_pool(
            session,
            dataclasses.replace(stored.pool, tags=tags),
            _change(request, principal),
            request.headers.get("If-Match"),
        )
    return _with_etag(pool_json(saved), saved.etag)


# -- devices ---------------------------------------------------------------------------------------


@routes.get("/devices")
async def devices_index(request: web.Request) -> web.Response:
    """Devices, optionally of one pool or state, filtered by effective labels and tags."""
    await reader(request)
    wanted = _filters(request)
    state = request.query.get("state")
    if state is not None:
        bodies.state(state, "state")
    async with request.config_dict[DATABASE].sessions() as session:
        devices = await list_devices(session, request.query.get("pool"))
    body = [
        device_json(stored)
        for stored in devices
        if (state is None or stored.device.state.value == state)
        and _matches(
            effective_target_labels(stored.device, stored.pool), stored.pool.tags | stored.device.tags, wanted
        )
    ]
    return web.json_response({"devices": body})


def _device_from(body: Mapping[str, Any], device: Device) -> Device:
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
    return dataclasses.replace(device, **changes)


async def _pool_exists(session: AsyncSession, pool_id: str) -> None:
    """A pool named in a body must exist: its absence is the body's mistake (400), not a missing page."""
    try:
        await get_pool(session, pool_id)
    except NotFoundError:
        raise bad_request(f"there is no pool {pool_id!r}", field="pool") from None


@routes.post("/devices")
async def devices_create(request: web.Request) -> web.Response:
    """Create a device in a pool (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "create devices: only System Admins may")
    body = await bodies.json_object(request, DEVICE_FIELDS)
    device_id = bodies.identifier(bodies.required(body, "id"), "id")
    for name in ("pool", "board", "host"):
        bodies.required(body, name)
    placeholder = Device(device_id, "", "", "devkit", "linux", "")
    device = _device_from(body, placeholder)
    async with writing(request) as session:
        await _pool_exists(session, device.pool_id)
        stored = await create_device(session, device, _change(request, principal))
    response = _with_etag(device_json(stored), stored.etag, status=201)
    response.headers["Location"] = f"/api/v1/devices/{device_id}"
    return response


@routes.get("/devices/{device_id}")
async def devices_read(request: web.Request) -> web.Response:
    """One device with its labels by origin."""
    await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        stored = await get_device(session, request.match_info["device_id"])
    return _with_etag(device_json(stored), stored.etag)


def _check_device_edit(principal: Principal, stored: StoredDevice, fields: Iterable[str]) -> None:
    _check_edit(principal, stored.pool, fields, f"device {stored.device.id}")


async def _save_device(
    request: web.Request, principal: Principal, device: Device, session: AsyncSession
) -> StoredDevice:
    return await save_device(session, device, _change(request, principal), request.headers.get("If-Match"))


@routes.patch("/devices/{device_id}")
async def devices_update(request: web.Request) -> web.Response:
    """Change a device's pool, board, types, host (admins), labels or tags (admins and pool owners)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, _DEVICE_PATCH_FIELDS)
    async with writing(request) as session:
        stored = await get_device(session, request.match_info["device_id"], lock=True)
        _check_device_edit(principal, stored, body)
        device = _device_from(body, stored.device)
        if device.pool_id != stored.device.pool_id:
            await _pool_exists(session, device.pool_id)
        await _approved_check(session, principal, stored.device.labels, device.labels, "labels")
        saved = await _save_device(request, principal, device, session)
    return _with_etag(device_json(saved), saved.etag)


@routes.delete("/devices/{device_id}")
async def devices_delete(request: web.Request) -> web.Response:
    """Delete a device (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "delete devices: only System Admins may")
    async with writing(request) as session:
        await delete_device(
            session,
            request.match_info["device_id"],
            _change(request, principal),
            request.headers.get("If-Match"),
        )
    return web.Response(status=204)


@routes.put("/devices/{device_id}/labels/{key}")
@routes.delete("/devices/{device_id}/labels/{key}")
async def devices_label(request: web.Request) -> web.Response:
    """Set a device label (an empty value removes it) or remove it."""
    principal = await signed_in(request)
    value = await _label_value(request)
    async with writing(request) as session:
        stored = await get_device(session, request.match_info["device_id"], lock=True)
        _check_device_edit(principal, stored, ["labels"])
        labels = _edited_labels(
            stored.device.labels, request.match_info["key"], value, await label_keys(session), principal
        )
        saved = await _save_device(
            request, principal, dataclasses.replace(stored.device, labels=labels), session
        )
    return _with_etag(device_json(saved), saved.etag)


@routes.put("/devices/{device_id}/tags/{tag}")
@routes.delete("/devices/{device_id}/tags/{tag}")
async def devices_tag(request: web.Request) -> web.Response:
    """Add or remove a device tag."""
    principal = await signed_in(request)
    async with writing(request) as session:
        stored = await get_device(session, request.match_info["device_id"], lock=True)
        _check_device_edit(principal, stored, ["tags"])
        tags = _edited_tags(stored.device.tags, request.match_info["tag"], request.method == "PUT")
        saved = await _save_device(request, principal, dataclasses.replace(stored.device, tags=tags), session)
    return _with_etag(device_json(saved), saved.etag)


@routes.put("/devices/{device_id}/state")
async def devices_state(request: web.Request) -> web.Response:
    """Change a device's state with a reason (admins)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, ("state", "reason"))
    state = bodies.state(bodies.required(body, "state"), "state")
    reason = body.get("reason", "")
    if reason != "":
        reason = bodies.string(reason, "reason", max_length=500)
    async with writing(request) as session:
        stored = await get_device(session, request.match_info["device_id"], lock=True)
        if not may_administer(principal):
            raise forbidden(
                principal, f"change the state of device {stored.device.id}: only System Admins may"
            )
        device = dataclasses.replace(stored.device, state=state, state_reason=reason)
        saved = await _save_device(request, principal, device, session)
    return _with_etag(device_json(saved), saved.etag)
