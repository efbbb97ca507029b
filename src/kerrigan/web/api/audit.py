"""``GET /api/v1/audit``: who changed what, newest first, filterable by pool, device and user."""

from __future__ import annotations

import re

from aiohttp import web

from kerrigan.store.audit import list_audit
from kerrigan.web.api.representations import audit_json
from kerrigan.web.auth import reader
from kerrigan.web.errors import bad_request
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()


@routes.get("/audit")
async def audit_index(request: web.Request) -> web.Response:
    """``?pool=``, ``?device=``, ``?actor=`` and ``?limit=`` (1-1000, default 200)."""
    principal = await reader(request)
    limit_text = request.query.get("limit", "200")
    if re.fullmatch(r"[0-9]{1,4}", limit_text) is None or not 1 <= int(limit_text) <= 1000:
        raise bad_request("limit must be a whole number from 1 to 1000", field="limit")
    async with request.config_dict[DATABASE].sessions() as session:
        entries = await list_audit(
            session,
            pool_id=request.query.get("pool"),
            device_id=request.query.get("device"),
            actor=request.query.get("actor"),
            limit=int(limit_text),
        )
    entries = await read_access(request, principal).audit(entries)
    return web.json_response({"entries": [audit_json(entry) for entry in entries]})
