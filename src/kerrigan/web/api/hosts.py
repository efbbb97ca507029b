"""``GET /api/v1/hosts`` and ``/hosts/{host_id}``: runner hosts as their agents last reported them.

Resources are keyed by name, as the server's catalog resolved them (seed 001); ``health`` is the agent's
own report: underused reservations and per-repository use over the last 24 hours.
"""

from __future__ import annotations

from aiohttp import web

from kerrigan.store.runners import host_report, host_reports
from kerrigan.web.api.representations import host_json
from kerrigan.web.auth import reader
from kerrigan.web.errors import ApiError
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()


@routes.get("/hosts")
async def host_index(request: web.Request) -> web.Response:
    """Every runner host."""
    await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        reports = await host_reports(session)
    return web.json_response({"hosts": [host_json(report) for report in reports]})


@routes.get("/hosts/{host_id}")
async def host_detail(request: web.Request) -> web.Response:
    """One runner host."""
    await reader(request)
    host_id = request.match_info["host_id"]
    async with request.config_dict[DATABASE].sessions() as session:
        report = await host_report(session, host_id)
    if report is None:
        raise ApiError(404, "not_found", f"no runner host {host_id!r}")
    return web.json_response(host_json(report))
