"""The devices-file settings of a device a person's reservation holds: the long poll asks a host for them
(``settings_for``) while the reservation holds the device, and the host sends them here."""

from __future__ import annotations

from aiohttp import web

from kerrigan.dispatch.protocol.requests import HolderSettings, ProtocolError, read
from kerrigan.store.database import Database
from kerrigan.store.reservations import record_holder_settings


class HolderSettingsCall:
    """``/reservations/{reservation_id}/settings``, for a host whose token was checked."""

    def __init__(self, database: Database) -> None:
        self.database = database

    async def record(self, request: web.Request, host: str) -> web.Response:
        """``{"device", "settings"}``: the devices-file settings of a device this host drives, for the person
        whose reservation holds it; ``{"recorded": false}`` when that reservation holds it no longer."""
        reservation_id = request.match_info["reservation_id"]
        if not (len(reservation_id) == 36 and reservation_id.isascii()):
            raise ProtocolError(404, "not_found", "no such reservation")
        sent = await read(request, HolderSettings)
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            recorded = await record_holder_settings(session, host, reservation_id, sent.device, sent.settings)
        return web.json_response({"recorded": recorded})
