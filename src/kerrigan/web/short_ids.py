"""A session's or a reservation's id in a path, as Kerrigan prints it short or whole: the whole id, a 404
when it names none, a 400 listing the ids a prefix begins when it begins several."""

from __future__ import annotations

from aiohttp import web
from sqlalchemy.orm import InstrumentedAttribute

from kerrigan.store.models import ReservationRow, SessionRow
from kerrigan.store.short_ids import AmbiguousIdError, full_id
from kerrigan.web.errors import ApiError
from kerrigan.web.state import DATABASE


async def session_id(request: web.Request, text: str) -> str:
    """The whole id of the session ``text`` names."""
    return await _whole(request, SessionRow.id, text, "session", "session_id")


async def reservation_id(request: web.Request, text: str) -> str:
    """The whole id of the reservation ``text`` names."""
    return await _whole(request, ReservationRow.id, text, "reservation", "reservation_id")


async def _whole(
    request: web.Request, column: InstrumentedAttribute[str], text: str, noun: str, field: str
) -> str:
    async with request.config_dict[DATABASE].sessions() as session:
        try:
            found = await full_id(session, column, text)
        except AmbiguousIdError as exc:
            raise ApiError(400, "ambiguous_id", f"{noun} id {exc}", field) from None
    if found is None:
        raise ApiError(404, "not_found", f"no {noun} {text[:40]!r}")
    return found
