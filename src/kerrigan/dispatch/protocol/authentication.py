"""Which runner host a call comes from: its bearer token (``kerrigan runners create HOST``), or a 401.

The token is looked up in the database on every call (one indexed read of its hash, no cache): a token
revoked or rotated by ``kerrigan runners``, in whatever process, is refused at once. Its last use is written
at most once a minute.
"""

from __future__ import annotations

import structlog
from aiohttp import web

from kerrigan.dispatch.protocol.requests import ProtocolError
from kerrigan.store.database import Database
from kerrigan.store.runners import host_for_token, note_token_use, token_use_due


async def host_of(database: Database, request: web.Request) -> str:
    """The runner host whose token the request carries, or a 401; nothing of the body is read."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise ProtocolError(
            401, "unauthenticated", "send the host's token as 'Authorization: Bearer <token>'"
        )
    async with database.sessions() as session:
        holder = await host_for_token(session, token.strip())
    if holder is None:
        raise ProtocolError(
            401,
            "unauthenticated",
            "this runner token was revoked, replaced or never made: `kerrigan runners rotate HOST` on "
            "the server makes a new one",
        )
    now = database.clock()
    if token_use_due(holder, now):
        async with database.writing(), database.sessions() as session, session.begin():
            await note_token_use(session, token.strip(), now)
    structlog.contextvars.bind_contextvars(runner_host=holder.host)
    return holder.host
