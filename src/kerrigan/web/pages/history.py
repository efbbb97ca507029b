"""``/sessions`` and ``/devices``: what ran, where and when.

``/sessions`` takes the API's filters (repository, branch, workflow, state, conclusion, device, since) as a
plain GET form and pages with next and previous links carrying the API's cursors; a bad filter is shown
next to the form with status 400. It lists only the sessions of repositories the reader may read
(:mod:`kerrigan.web.reading`). ``/devices`` lists every device with its state, the job it runs now, its
last job and its pass rate over the last 7 days (a job of a repository the reader may not read without its
repository, session or task). A device whose runner host is offline says so in its state ("available, host
offline" in the warning colour) and, under *Running now*, names the jobs that held it when the host went
silent: they may still run there until its agent restarts, even once the server ended them ``runner_lost``.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any, Final
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDict

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.store.history import JobEntry, device_summaries, list_sessions
from kerrigan.store.host_outages import host_outages
from kerrigan.store.inventory import load_inventory
from kerrigan.store.suspects import tracker_of
from kerrigan.web.api.history import SESSION_FILTERS, read_query
from kerrigan.web.errors import ApiError
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import HIDDEN, hide_job, read_access
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

PASS_RATE_WINDOW: Final = timedelta(days=7)
DEFAULT_PAGE: Final = 50


def duration(seconds: float | None) -> str:
    """``1h 02m``, ``3m 05s``, ``42s``; empty while unknown."""
    if seconds is None:
        return ""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _link(filters: dict[str, str], limit: str, cursor: str | None) -> str | None:
    if cursor is None:
        return None
    kept = {name: value for name, value in filters.items() if value}
    if limit:
        kept["limit"] = limit
    return "/sessions?" + urlencode({**kept, "cursor": cursor})


@routes.get("/sessions")
async def sessions_page(request: web.Request) -> web.Response:
    """Sessions newest first, filtered by the form, paged."""
    principal = await page_reader(request)
    shown = {name: request.query.get(name, "").strip() for name in SESSION_FILTERS}
    limit = request.query.get("limit", "").strip()
    context: dict[str, Any] = {
        "filters": shown,
        "limit": limit,
        "states": [state.value for state in SessionState],
        "conclusions": [conclusion.value for conclusion in Conclusion],
        "sessions": [],
        "next_url": None,
        "previous_url": None,
        "error": None,
        "error_field": None,
        "duration": duration,
        "unanswered": 0,
    }
    given = MultiDict((name, value.strip()) for name, value in request.query.items())
    try:
        query = read_query(given, "sessions", SESSION_FILTERS)
    except ApiError as error:
        context["error"], context["error_field"] = error.message, error.field
        return await render(request, "sessions.html", context, status=400)
    access = read_access(request, principal)
    filters = replace(query.filters, readable=await access.all_readable(query.filters.repository))
    async with request.config_dict[DATABASE].sessions() as session:
        page = await list_sessions(
            session, filters, limit=query.limit, after=query.after, before=query.before
        )
    context["unanswered"] = len(access.unanswered(access.answers))
    context["sessions"] = page.items
    context["next_url"] = _link(shown, limit, query.cursor(page.next))
    context["previous_url"] = _link(shown, limit, query.cursor(page.previous, backwards=True))
    return await render(request, "sessions.html", context)


@routes.get("/devices")
async def devices_page(request: web.Request) -> web.Response:
    """Every device: state, health, current job, last job, pass rate over 7 days, and the tasks it is
    suspect for."""
    principal = await page_reader(request)
    database = request.config_dict[DATABASE]
    async with database.sessions() as session:
        devices = await device_summaries(session, database.clock() - PASS_RATE_WINDOW)
        inventory = await load_inventory(session)
        found = await tracker_of(database.signals).suspects(session, database.clock())
        outages = await host_outages(session)
    suspects: dict[str, list[str]] = {}
    for suspect in found.values():
        suspects.setdefault(suspect.device, []).append(suspect.sentence())
    health = {device.id: device.health for device in inventory.devices}
    readable = await read_access(request, principal).readable(
        job.repository for device in devices for job in (device.current, device.last) if job is not None
    )

    def seen(job: JobEntry | None) -> JobEntry | None:
        return job if job is None or job.repository in readable else hide_job(job)

    devices = [replace(device, current=seen(device.current), last=seen(device.last)) for device in devices]
    outages = await read_access(request, principal).outages(outages)
    context = {
        "devices": devices,
        "suspects": suspects,
        "health": health,
        "hidden": HIDDEN,
        # Devices whose runner host is offline: the host's outage with the jobs that held each one then.
        "outages": {
            device.id: outages[device.host].on(device.id) for device in devices if device.host in outages
        },
    }
    return await render(request, "devices.html", context)
