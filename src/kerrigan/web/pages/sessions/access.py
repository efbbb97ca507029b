"""Who reads a session's pages: a reader of its repository (:mod:`kerrigan.web.reading`); one who may not
read it finds it not there, in the same words as a session that does not exist."""

from __future__ import annotations

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.roles import Principal
from kerrigan.core.sessions import Session
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.session_pages import session_repository
from kerrigan.store.sessions import get_session
from kerrigan.web.errors import ApiError
from kerrigan.web.reading import read_access
from kerrigan.web.state import DATABASE


def _no_session(session_id: str) -> ApiError:
    return ApiError(404, "not_found", f"There is no session {session_id}.")


async def readable_session(request: web.Request, principal: Principal | None, session_id: str) -> None:
    """The 404 page naming the session, unless it exists and the reader may read its repository
    (:mod:`kerrigan.web.reading`: one they may not read is not there for them, in the same words)."""
    async with request.config_dict[DATABASE].sessions() as db:
        repository = await session_repository(db, session_id)
    if repository is None:
        raise _no_session(session_id)
    await read_access(request, principal).check(repository, _no_session(session_id))


async def session_or_404(db: AsyncSession, session_id: str) -> Session:
    """The session (its repository checked first by :func:`readable_session`), or the 404 page."""
    try:
        return await get_session(db, session_id)
    except NotFoundError:
        raise _no_session(session_id) from None
