"""``/health``: the lab at a glance, for lab admins and pool owners.

Per pool: its devices by state and health, how much of the last 7 days they ran jobs, and the devices that
ran none; the health checks broken now, for the pools' owners (a check that cannot run leaves the devices'
health alone); the devices whose health is bad and why; the suspect devices with their numbers
(:mod:`kerrigan.store.suspects`). Readers read it.
"""

from __future__ import annotations

from aiohttp import web

from kerrigan.core.lifecycle import JobState
from kerrigan.store.lab_health import WINDOW, broken_checks, health_checks, lab_health
from kerrigan.store.suspects import tracker_of
from kerrigan.web.pages.rendering import render
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()


@routes.get("/health")
async def health_page(request: web.Request) -> web.Response:
    """Devices by state and health per pool, utilisation, idle devices, bad and suspect devices."""
    await page_reader(request)
    database = request.config_dict[DATABASE]
    now = database.clock()
    async with database.sessions() as session:
        pools = await lab_health(session, now)
        checks = await health_checks(session, now)
        broken = await broken_checks(session, now)
        found = await tracker_of(database.signals).suspects(session, now)
    suspects = sorted(found.values(), key=lambda suspect: (suspect.device, suspect.task))
    return await render(
        request,
        "health.html",
        {
            "now": now,
            "pools": pools,
            "suspects": suspects,
            "days": WINDOW.days,
            "checks": checks,
            "broken_checks": broken,
            "failed_checks": [check for check in checks if check.state is not JobState.SUCCEEDED],
        },
    )
