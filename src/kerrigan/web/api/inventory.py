"""``/api/v1/pools`` and ``/api/v1/devices``: read, create, update, delete; labels, tags and states.

Reads carry an ``ETag``; writes honour ``If-Match`` (412 when stale) and answer with the new ``ETag``.
Roles are the seed's: admins edit everything (a pool's ``repositories`` included), pool owners edit labels
and tags of their own pools and the devices in them, everyone else reads. The edits themselves are
:mod:`kerrigan.web.editing`, which the pool and device pages share. A read of a device also says whether
its runner host is online and, while it is not, which jobs held the device when the host was last heard of
(``host_online``, ``host_outage``: :mod:`kerrigan.core.host_outage`); a write's answer leaves them out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar, cast

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.host_outage import HostOutage
from kerrigan.core.inventory import (
    DEVICE_FIELDS,
    POOL_FIELDS,
    Device,
    Pool,
    effective_pool_labels,
    effective_target_labels,
)
from kerrigan.core.roles import Principal, may_administer
from kerrigan.store.host_outages import host_outages
from kerrigan.store.inventory import (
    StoredDevice,
    StoredPool,
    create_device,
    create_pool,
    delete_device,
    delete_pool,
    get_device,
    get_pool,
    list_devices,
    list_pools,
)
from kerrigan.store.label_impact import WINDOW
from kerrigan.web import bodies, editing
from kerrigan.web.api.representations import device_host_json, device_json, pool_json
from kerrigan.web.auth import forbidden, reader, signed_in
from kerrigan.web.errors import bad_request
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE, writing

routes = web.RouteTableDef()


def _with_etag(body: Mapping[str, Any], etag: str, status: int = 200) -> web.Response:
    return web.json_response(body, status=status, headers={"ETag": etag})


def _editor(request: web.Request, session: AsyncSession, principal: Principal) -> editing.Editor:
    return editing.editor(request, session, principal, if_match=True)


class _Versioned(Protocol):
    @property
    def etag(self) -> str: ...


S = TypeVar("S", bound=_Versioned)


def _dry_run(request: web.Request) -> bool:
    """``?dry_run=true``: weigh the change and answer what it would do, changing nothing."""
    value = request.query.get("dry_run")
    if value not in (None, "true", "false"):
        raise bad_request("dry_run is true or false", field="dry_run")
    return value == "true"


async def _edited(
    request: web.Request,
    principal: Principal,
    edit: Callable[[editing.Editor], Awaitable[S]],
    render: Callable[[S], dict[str, Any]],
    read: Callable[[AsyncSession], Awaitable[S]],
) -> web.Response:
    """Make ``edit`` and answer the saved pool or device with its ``ETag``; with ``?dry_run=true``, roll it
    back and answer what it would be and every task of the last days that would lose devices by it, with
    the ``ETag`` of the version it was weighed against (``If-Match`` it to make the change only if nothing
    changed since)."""
    if _dry_run(request):
        weighed_against: list[str] = []

        async def after_reading(editor: editing.Editor) -> S:
            weighed_against.append((await read(editor.session)).etag)
            return await edit(editor)

        weighed, _ = await editing.weigh(
            request, principal, after_reading, keep=lambda _: False, if_match=True
        )
        body = {
            "dry_run": True,
            "would_be": render(cast(S, weighed.saved)),
            "window_days": WINDOW.days,
            "lost": [item.as_dict() for item in weighed.lost],
        }
        return _with_etag(body, weighed_against[0])
    async with writing(request) as session:
        saved = await edit(_editor(request, session, principal))
    return _with_etag(render(saved), saved.etag)


def _pool(stored: StoredPool) -> dict[str, Any]:
    return pool_json(stored)


def _device(stored: StoredDevice) -> dict[str, Any]:
    return device_json(stored)


def _device_host(outages: Mapping[str, HostOutage], stored: StoredDevice) -> dict[str, Any]:
    """A read's ``host_online`` and ``host_outage`` (the jobs that held this device when its host went
    silent)."""
    outage = outages.get(stored.device.host)
    return device_host_json(outage.on(stored.device.id) if outage is not None else None)


def _read_pool(request: web.Request) -> Callable[[AsyncSession], Awaitable[StoredPool]]:
    return lambda session: get_pool(session, request.match_info["pool_id"])


def _read_device(request: web.Request) -> Callable[[AsyncSession], Awaitable[StoredDevice]]:
    return lambda session: get_device(session, request.match_info["device_id"])


def _filters(request: web.Request) -> editing.Filters:
    """``?label=key=value`` (repeatable) and ``?tag=name`` (repeatable), on effective labels and tags."""
    return editing.parse_filters(request.query.getall("label", []), request.query.getall("tag", []))


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
        if wanted.matches(effective_pool_labels(stored.pool), stored.pool.tags)
    ]
    return web.json_response({"pools": body})


@routes.post("/pools")
async def pools_create(request: web.Request) -> web.Response:
    """Create a pool (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "create pools: only System Admins may")
    body = await bodies.json_object(request, (*POOL_FIELDS, "health_check"))
    pool_id = bodies.identifier(bodies.required(body, "id"), "id")
    pool = editing.pool_from(body, Pool(id=pool_id, name=pool_id))
    async with writing(request) as session:
        stored = await create_pool(session, pool, editing.change_by(request, principal))
    response = _with_etag(pool_json(stored), stored.etag, status=201)
    response.headers["Location"] = f"/api/v1/pools/{pool_id}"
    return response


@routes.get("/pools/{pool_id}")
async def pools_read(request: web.Request) -> web.Response:
    """One pool."""
    await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        stored = await get_pool(session, request.match_info["pool_id"])
        states = Counter(d.device.state.value for d in await list_devices(session, stored.pool.id))
    return _with_etag(pool_json(stored, states), stored.etag)


@routes.patch("/pools/{pool_id}")
async def pools_update(request: web.Request) -> web.Response:
    """Change a pool's name, owners, repositories, firmware (admins), labels or tags (admins and owners)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, editing.POOL_PATCH_FIELDS)

    async def edit(editor: editing.Editor) -> StoredPool:
        return await editor.update_pool(request.match_info["pool_id"], body)

    return await _edited(request, principal, edit, _pool, _read_pool(request))


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
            editing.change_by(request, principal),
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


@routes.put("/pools/{pool_id}/labels/{key}")
@routes.delete("/pools/{pool_id}/labels/{key}")
async def pools_label(request: web.Request) -> web.Response:
    """Set a pool label (an empty value removes it) or remove it."""
    principal = await signed_in(request)
    value = await _label_value(request)

    async def edit(editor: editing.Editor) -> StoredPool:
        return await editor.set_pool_label(request.match_info["pool_id"], request.match_info["key"], value)

    return await _edited(request, principal, edit, _pool, _read_pool(request))


@routes.put("/pools/{pool_id}/tags/{tag}")
@routes.delete("/pools/{pool_id}/tags/{tag}")
async def pools_tag(request: web.Request) -> web.Response:
    """Add or remove a pool tag."""
    principal = await signed_in(request)

    async def edit(editor: editing.Editor) -> StoredPool:
        return await editor.set_pool_tag(
            request.match_info["pool_id"], request.match_info["tag"], add=request.method == "PUT"
        )

    return await _edited(request, principal, edit, _pool, _read_pool(request))


# -- devices ---------------------------------------------------------------------------------------


@routes.get("/devices")
async def devices_index(request: web.Request) -> web.Response:
    """Devices, optionally of one pool or state, filtered by effective labels and tags."""
    principal = await reader(request)
    wanted = _filters(request)
    state = request.query.get("state")
    if state is not None:
        bodies.state(state, "state")
    async with request.config_dict[DATABASE].sessions() as session:
        devices = await list_devices(session, request.query.get("pool"))
        outages = await host_outages(session, {stored.device.host for stored in devices})
    outages = await read_access(request, principal).outages(outages)
    body = [
        device_json(stored) | _device_host(outages, stored)
        for stored in devices
        if (state is None or stored.device.state.value == state)
        and wanted.matches(
            effective_target_labels(stored.device, stored.pool), stored.pool.tags | stored.device.tags
        )
    ]
    return web.json_response({"devices": body})


@routes.post("/devices")
async def devices_create(request: web.Request) -> web.Response:
    """Create a device in a pool (admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "create devices: only System Admins may")
    body = await bodies.json_object(request, (*DEVICE_FIELDS, "health_check"))
    device_id = bodies.identifier(bodies.required(body, "id"), "id")
    for name in ("pool", "board", "host"):
        bodies.required(body, name)
    placeholder = Device(device_id, "", "", "devkit", "linux", "")
    device = editing.device_from(body, placeholder)
    async with writing(request) as session:
        await editing.pool_exists(session, device.pool_id)
        stored = await create_device(session, device, editing.change_by(request, principal))
    response = _with_etag(device_json(stored), stored.etag, status=201)
    response.headers["Location"] = f"/api/v1/devices/{device_id}"
    return response


@routes.get("/devices/{device_id}")
async def devices_read(request: web.Request) -> web.Response:
    """One device with its labels by origin."""
    principal = await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        stored = await get_device(session, request.match_info["device_id"])
        outages = await host_outages(session, [stored.device.host])
    outages = await read_access(request, principal).outages(outages)
    return _with_etag(device_json(stored) | _device_host(outages, stored), stored.etag)


@routes.patch("/devices/{device_id}")
async def devices_update(request: web.Request) -> web.Response:
    """Change a device's pool, board, types, host (admins), labels or tags (admins and pool owners)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, editing.DEVICE_PATCH_FIELDS)

    async def edit(editor: editing.Editor) -> StoredDevice:
        return await editor.update_device(request.match_info["device_id"], body)

    return await _edited(request, principal, edit, _device, _read_device(request))


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
            editing.change_by(request, principal),
            request.headers.get("If-Match"),
        )
    return web.Response(status=204)


@routes.put("/devices/{device_id}/labels/{key}")
@routes.delete("/devices/{device_id}/labels/{key}")
async def devices_label(request: web.Request) -> web.Response:
    """Set a device label (an empty value removes it) or remove it."""
    principal = await signed_in(request)
    value = await _label_value(request)

    async def edit(editor: editing.Editor) -> StoredDevice:
        return await editor.set_device_label(
            request.match_info["device_id"], request.match_info["key"], value
        )

    return await _edited(request, principal, edit, _device, _read_device(request))


@routes.put("/devices/{device_id}/tags/{tag}")
@routes.delete("/devices/{device_id}/tags/{tag}")
async def devices_tag(request: web.Request) -> web.Response:
    """Add or remove a device tag."""
    principal = await signed_in(request)

    async def edit(editor: editing.Editor) -> StoredDevice:
        return await editor.set_device_tag(
            request.match_info["device_id"], request.match_info["tag"], add=request.method == "PUT"
        )

    return await _edited(request, principal, edit, _device, _read_device(request))


@routes.put("/devices/{device_id}/state")
async def devices_state(request: web.Request) -> web.Response:
    """Change a device's state with a reason and, for maintenance, an optional ``until`` (admins; the
    pool's owners for available and maintenance)."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, ("state", "reason", "until"))
    state, reason = editing.device_state(bodies.required(body, "state"), body.get("reason", ""))
    async with writing(request) as session:
        editor = _editor(request, session, principal)
        until = editing.state_until(body.get("until"), state, editor.change.at)
        saved = await editor.set_device_state(request.match_info["device_id"], state, reason, until)
    return _with_etag(device_json(saved), saved.etag)


@routes.post("/devices/{device_id}/health-check")
async def devices_health_check(request: web.Request) -> web.Response:
    """Queue the device's health check now (admins and the pool's owners): 202 with its job; 409 when the
    device has none. While one is queued or running, that one is the answer (``queued`` false)."""
    principal = await signed_in(request)
    device_id = request.match_info["device_id"]
    async with writing(request) as session:
        found = await _editor(request, session, principal).check_health(device_id)
    return web.json_response({"device": device_id, "job": found.job_pk, "queued": found.queued}, status=202)
