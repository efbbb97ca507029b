"""A person's requests of a device's power: the long poll hands them to the device's host
(``device_requests``, to a host that announced ``device_power``), and its agent answers each here."""

from __future__ import annotations

from aiohttp import web

from kerrigan.dispatch.protocol.requests import DevicePowerAnswer, ProtocolError, read
from kerrigan.store.database import Database
from kerrigan.store.device_requests import PowerAnswer, answer


class DeviceRequestsCall:
    """``/device-requests/{request_id}``, for a host whose token was checked."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def record(self, request: web.Request, host: str) -> web.Response:
        """``{"state"}`` (the power state after the action) or ``{"failure", "message"}``: the outcome of a
        request this host was handed; ``{"recorded": false}`` when it is not this host's or has ended (the
        person stopped waiting)."""
        request_id = request.match_info["request_id"]
        if not (len(request_id) == 36 and request_id.isascii()):
            raise ProtocolError(404, "not_found", "no such device request")
        sent = await read(request, DevicePowerAnswer)
        answered = PowerAnswer(sent.state, sent.failure, sent.message)
        database = self.database
        async with database.writing(), database.sessions() as session, session.begin():
            recorded = await answer(session, host, request_id, answered, database.clock())
        return web.json_response({"recorded": recorded})
