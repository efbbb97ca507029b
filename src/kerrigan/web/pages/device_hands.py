"""A board in a person's hands, on its device page: its power state and its live console.

The power state is what the server knows, read from the store only (the page never waits for an agent):
what the board's agent last said of it and when, or ``unknown`` saying why (never read, no power wiring,
its runner host offline). The person holding its reservation and System Admins see buttons (cycle, on,
off, and *Read it now*, a ``status``) that post, with the CSRF token, to ``POST /devices/{id}/power``
(``action``), the API's ``POST /api/v1/devices/{id}/power`` for a signed-in browser; the page's script
(``device.js``) posts them in place and, for the holder, reads the state once as the page opens.

The live console is shown to the people who may use it (:func:`~kerrigan.core.device_console.console_access`):
the holder and System Admins type, the pool's owners watch read-only; anyone else gets no console, no word
of it and no address of it. ``device.js`` opens the API's console WebSocket with the browser's sign-in
(:mod:`kerrigan.web.socket_auth`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core import device_console, device_power
from kerrigan.core.device_console import Access, console_access
from kerrigan.core.device_power import refusal
from kerrigan.core.roles import Principal
from kerrigan.store.device_requests import device_holder, last_power_reading
from kerrigan.store.inventory import StoredDevice
from kerrigan.store.runners import host_report
from kerrigan.web.api.power import action_of, switch_power
from kerrigan.web.editing import PostedForm
from kerrigan.web.errors import ApiError, error_response
from kerrigan.web.signin import Forbidden, SignInRequired, get_session, redirect

routes = web.RouteTableDef()


@dataclass(frozen=True, slots=True)
class PowerShown:
    """The power state as the page shows it: ``on``, ``off`` or ``unknown``, why, and as of when."""

    state: str
    words: str
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Hands:
    """What the device page shows of the board's power and console to one reader."""

    power: PowerShown
    may_switch: bool  # the buttons: the holder and System Admins, while the board's agent can be asked
    switch_note: str  # why the buttons are not there for someone who may switch ("" when they are)
    ask_now: bool  # the page's script reads the state as it opens (for the holder)
    console: Access | None  # None: no console on the page at all
    console_note: str  # why the console cannot be opened now ("" when it can)


def power_shown(power: str | None, at: datetime | None, *, read: bool, host: str, online: bool) -> PowerShown:
    """The power state as it can honestly be said: ``read`` whether the agent ever said anything of it
    (``power`` None then: no power wiring)."""
    if read and power is None:
        return PowerShown("unknown", "its runner host's devices file gives it no power wiring", at)
    if not online:
        last = f"; last read {power}" if power is not None else ""
        return PowerShown("unknown", f"runner host {host} is offline{last}", at)
    if power is None:
        return PowerShown("unknown", "not read yet")
    return PowerShown(power, "as its switch last read it", at)


async def device_hands(
    session: AsyncSession, principal: Principal | None, stored: StoredDevice, now: datetime
) -> Hands:
    """The power state and, for the people who may use it, the console, of ``stored`` for ``principal``."""
    device, pool = stored.device, stored.pool
    holder = await device_holder(session, device.id, now)
    report = await host_report(session, device.host)
    reading = await last_power_reading(session, device.id)
    online = report is not None and report.online
    capabilities = report.capabilities if report is not None and online else ()
    shown = power_shown(
        reading.power.value if reading is not None and reading.power is not None else None,
        reading.at if reading is not None else None,
        read=reading is not None,
        host=device.host,
        online=online,
    )
    busy = f"job {holder.job} holds it now" if holder.job is not None else ""
    offline = f"runner host {device.host} is offline" if not online else ""
    rights = principal is not None and refusal(principal, device.id, holder) is None
    old = f"the agent of {device.host} is too old to be asked: upgrade it"
    switch_note = busy or offline or ("" if device_power.CAPABILITY in capabilities else old)
    access = console_access(principal, device.id, holder, pool.owners) if principal is not None else None
    console_note = busy or offline or ("" if device_console.CAPABILITY in capabilities else old)
    return Hands(
        power=shown,
        may_switch=rights and not switch_note,
        switch_note=switch_note if rights else "",
        ask_now=rights
        and not switch_note
        and principal is not None
        and holder.login is not None
        and holder.login.lower() == principal.login.lower(),
        console=access if isinstance(access, Access) else None,
        console_note=console_note,
    )


@routes.post("/devices/{device_id}/power")
async def power(request: web.Request) -> web.StreamResponse:
    """Switch or read the board's power (``action``: cycle, on, off, status) from its page: back to the page
    with the state in a notice, or, asked for JSON (the page's script), the API's answer or error."""
    device_id = request.match_info["device_id"]
    as_json = "application/json" in request.headers.get("Accept", "")
    try:
        posted = await PostedForm.read(request)
        action = action_of(posted.text("action"))
        state = await switch_power(request, posted.principal, device_id, action)
    except ApiError as exc:
        if as_json:
            return error_response(exc.status, exc.code, exc.message, exc.field)
        raise
    except Forbidden as exc:
        if as_json:
            return error_response(403, "forbidden", str(exc))
        raise
    except SignInRequired:
        if as_json:
            return error_response(401, "unauthenticated", "sign in again: reload the page")
        raise
    if as_json:
        return web.json_response({"device": device_id, "action": action.value, "state": state})
    (await get_session(request))["notice"] = f"{action.value} of {device_id} done: its power is {state}."
    return redirect(f"/devices/{device_id}#power")
