"""``GET /api/v1/hosts`` and ``/hosts/{host_id}``: runner hosts as their agents last reported them; and
``PUT /hosts/{host_id}/state``: pause a host (its devices get no new jobs; running ones finish) or resume it.

Resources are keyed by name, as the server's catalog resolved them (seed 001); ``health`` is the agent's
own report: underused reservations and per-repository use over the last 24 hours (only the lines of
repositories the caller may read: :mod:`kerrigan.web.reading`); ``pause`` who paused it, why, since and until
when.
"""

from __future__ import annotations

from aiohttp import web

from kerrigan.core.device_status import HostPause
from kerrigan.core.roles import may_administer
from kerrigan.store.runners import host_report, host_reports, set_pause
from kerrigan.web import bodies, editing
from kerrigan.web.api.representations import host_json
from kerrigan.web.auth import forbidden, reader, signed_in
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE, writing

routes = web.RouteTableDef()


@routes.get("/hosts")
async def host_index(request: web.Request) -> web.Response:
    """Every runner host."""
    principal = await reader(request)
    async with request.config_dict[DATABASE].sessions() as session:
        reports = await host_reports(session)
    reports = await read_access(request, principal).hosts(reports)
    return web.json_response({"hosts": [host_json(report) for report in reports]})


@routes.get("/hosts/{host_id}")
async def host_detail(request: web.Request) -> web.Response:
    """One runner host."""
    principal = await reader(request)
    host_id = request.match_info["host_id"]
    async with request.config_dict[DATABASE].sessions() as session:
        report = await host_report(session, host_id)
    if report is None:
        raise ApiError(404, "not_found", f"no runner host {host_id!r}")
    [shown] = await read_access(request, principal).hosts([report])
    return web.json_response(host_json(shown))


HOST_STATES = ("active", "paused")
REASON_MAX = 500


def pause_reason(value: object) -> str:
    """A pause's reason: empty, or 1-500 printable characters (the API's field and the page's alike)."""
    return "" if value == "" else bodies.string(value, "reason", max_length=REASON_MAX)


@routes.put("/hosts/{host_id}/state")
async def host_state(request: web.Request) -> web.Response:
    """Pause the host with a reason and an optional ``until``, or make it active again (System Admins)."""
    principal = await signed_in(request)
    if not may_administer(principal):
        raise forbidden(principal, "pause or resume runner hosts: only System Admins may")
    body = await bodies.json_object(request, ("state", "reason", "until"))
    state = bodies.required(body, "state")
    if state not in HOST_STATES:
        raise bad_request(f"state must be one of {', '.join(HOST_STATES)}", field="state")
    reason = pause_reason(body.get("reason", ""))
    host_id = request.match_info["host_id"]
    async with writing(request) as session:
        change = editing.change_by(request, principal)
        pause = None
        if state == "paused":
            until = body.get("until")
            at = editing.future_time(until, change.at, "until") if until not in (None, "") else None
            pause = HostPause(reason, principal.login, change.at, at)
        elif body.get("until") not in (None, ""):
            raise bad_request("until is for a pause only", field="until")
        report = await set_pause(session, host_id, pause, change)
    if report is None:
        raise ApiError(404, "not_found", f"no runner host {host_id[:63]!r}")
    return web.json_response(host_json(report))
