"""``/api/v1/label-keys``: the registry of approved label keys and their descriptions (admins edit)."""

from __future__ import annotations

from aiohttp import web

from kerrigan.core.labels import LabelError, validate_user_key
from kerrigan.core.roles import may_administer
from kerrigan.store.audit import Change
from kerrigan.store.label_keys import delete_label_key, label_keys, put_label_key
from kerrigan.web import bodies
from kerrigan.web.auth import forbidden, reader, signed_in
from kerrigan.web.errors import bad_request
from kerrigan.web.state import DATABASE, writing

routes = web.RouteTableDef()


def _key(request: web.Request) -> str:
    try:
        return validate_user_key(request.match_info["key"])
    except LabelError as exc:
        raise bad_request(str(exc), field="key", code="invalid_label") from None


@routes.get("/label-keys")
async def keys_index(request: web.Request) -> web.Response:
    """Every approved key; while the list is empty, any valid key may be used."""
    await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        keys = await label_keys(session)
    return web.json_response({"label_keys": [{"key": k, "description": d} for k, d in keys.items()]})


@routes.put("/label-keys/{key}")
async def keys_put(request: web.Request) -> web.Response:
    """Approve a key with a description, or change its description."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "approve label keys: only System Admins may")
    key = _key(request)
    body = await bodies.json_object(request, ("description",))
    description = bodies.string(bodies.required(body, "description"), "description", max_length=500)
    database = request.config_dict[DATABASE]
    async with writing(request) as session:
        created = await put_label_key(session, key, description, Change(principal.login, database.clock()))
    return web.json_response({"key": key, "description": description}, status=201 if created else 200)


@routes.delete("/label-keys/{key}")
async def keys_delete(request: web.Request) -> web.Response:
    """Withdraw a key from the registry; labels that use it stay."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "withdraw label keys: only System Admins may")
    key = _key(request)
    database = request.config_dict[DATABASE]
    async with writing(request) as session:
        await delete_label_key(session, key, Change(principal.login, database.clock()))
    return web.Response(status=204)
