"""``POST /api/v1/devices/{device_id}/power``: a board's power in the hands of the person holding it
(``{"action": "cycle"|"on"|"off"|"status"}``; docs/api.md, docs/reservations.md ``kerrigan power``).

Who may: the person whose reservation holds the device, and System Admins; anyone else is a 403 naming what
they lack, before anything is stored or reaches the agent. A device a job holds is a 409, as is one whose
host's agent does not speak ``device_power`` or whose devices file gives it no power, and a person's request
while ``MAX_PENDING_PER_PERSON`` of theirs wait for an answer (``too_many``); a host whose agent is offline
is a 503. The request waits in the store until the host's long poll hands it to its agent (who may is
checked again there: a reservation ended meanwhile is a 403, a job that took the device a 409), and this
call waits for the agent's answer (at most :data:`ANSWER_WITHIN_S`: the wiring's ``timeout_s`` is the
agent's, unknown here): the power state after the action, or a 504 and the request marked expired. Every
request that ends is in the audit log (:mod:`kerrigan.store.device_requests`).
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from kerrigan.core.device_power import (
    ANSWER_WITHIN_S,
    CAPABILITY,
    PENDING,
    ActionError,
    PowerAction,
    PowerFailure,
    RequestState,
    pending_refusal,
    read_action,
    refusal,
)
from kerrigan.core.roles import Principal
from kerrigan.store.device_requests import (
    DeviceRequest,
    ask_power,
    device_holder,
    expire,
    get_request,
    pending_of,
)
from kerrigan.store.inventory import NotFoundError, get_device
from kerrigan.store.runners import host_report
from kerrigan.web import bodies
from kerrigan.web.auth import signed_in
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.state import DATABASE, writing

routes = web.RouteTableDef()

ANSWER_POLL_S: Final = 0.05  # how often the store is read for the agent's answer
# The agent's failures as this call answers them: the device's state or wiring (409), the switch (502).
_FAILURES: Final = {
    PowerFailure.NO_POWER: (409, "no_power"),
    PowerFailure.BUSY: (409, "device_busy"),
    PowerFailure.POWER_FAILED: (502, "power_failed"),
    PowerFailure.NOT_HOLDER: (403, "forbidden"),  # their reservation ended before the agent got it
}


@routes.post("/devices/{device_id}/power")
async def device_power(request: web.Request) -> web.Response:
    """Switch or read the device's power: 200 with ``{"device", "action", "state"}`` once its agent did."""
    principal = await signed_in(request)
    body = await bodies.json_object(request, ("action",))
    action = action_of(bodies.required(body, "action"))
    device_id = request.match_info["device_id"]
    state = await switch_power(request, principal, device_id, action)
    return web.json_response({"device": device_id, "action": action.value, "state": state})


def action_of(value: object) -> PowerAction:
    """The action ``value`` names, or a 400 naming the field ``action``."""
    try:
        return read_action(value)
    except ActionError as exc:
        raise bad_request(str(exc), field="action") from None


async def switch_power(
    request: web.Request, principal: Principal, device_id: str, action: PowerAction
) -> str:
    """Ask ``device_id``'s agent for ``action`` as ``principal`` and wait for its answer: the power state
    after it (``on``, ``off``, ``unknown``), or an :class:`ApiError` saying why not (the API's and the device
    page's ``POST /devices/{id}/power`` alike)."""
    database = request.config_dict[DATABASE]
    async with writing(request) as session:
        try:
            host = (await get_device(session, device_id)).device.host
        except NotFoundError:
            raise ApiError(404, "not_found", f"there is no device {device_id[:63]!r}") from None
        holder = await device_holder(session, device_id, database.clock())
        refused = refusal(principal, device_id, holder)
        if refused is not None:
            raise ApiError(
                403,
                "forbidden",
                f"{principal.login} may not switch the power of {device_id}: {refused} (the person holding "
                "its reservation and System Admins may)",
            )
        if holder.job is not None:
            raise ApiError(409, "device_busy", f"job {holder.job} holds {device_id}: its power is the job's")
        report = await host_report(session, host)
        if report is None or not report.online:
            raise ApiError(503, "host_offline", f"the agent of {device_id}'s runner host {host} is offline")
        if CAPABILITY not in report.capabilities:
            raise ApiError(
                409,
                "not_supported",
                f"the agent of {host} does not speak {CAPABILITY}: upgrade it to switch {device_id}'s power",
            )
        too_many = pending_refusal(
            principal.login, await pending_of(session, principal.login, database.clock())
        )
        if too_many is not None:
            raise ApiError(409, "too_many", too_many)
        request_id = await ask_power(
            session, device_id, host, login=principal.login, action=action, now=database.clock()
        )
    done = await _answered(request, request_id)
    if done.state is RequestState.EXPIRED or done.state in PENDING:
        raise ApiError(
            504,
            "no_answer",
            f"the agent of {host} did not answer within {ANSWER_WITHIN_S:g} s; the request is marked expired",
        )
    if done.failure is not None:
        status, code = _FAILURES[done.failure]
        raise ApiError(status, code, done.message or f"{action.value} of {device_id} failed")
    return done.power.value if done.power is not None else "unknown"


async def _answered(request: web.Request, request_id: str) -> DeviceRequest:
    """The request once its agent answered it, or marked expired after :data:`ANSWER_WITHIN_S`."""
    database = request.config_dict[DATABASE]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ANSWER_WITHIN_S
    while True:
        async with database.sessions() as session:
            found = await get_request(session, request_id)
        if found is None:  # deleted under it (a downgrade): as good as never answered
            raise ApiError(504, "no_answer", "the request is gone")
        if found.state not in PENDING:
            return found
        if loop.time() >= deadline:
            break
        await asyncio.sleep(ANSWER_POLL_S)
    async with writing(request) as session:
        expired = await expire(session, request_id, database.clock())
    if expired is not None:
        return expired
    async with database.sessions() as session:  # answered in the last moment
        last = await get_request(session, request_id)
    if last is None:
        raise ApiError(504, "no_answer", "the request is gone")
    return last
