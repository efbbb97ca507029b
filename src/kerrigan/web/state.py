"""Typed keys for what the web application holds."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.config import Settings
from kerrigan.store.database import Database

DATABASE = web.AppKey("database", Database)
SETTINGS = web.AppKey("settings", Settings)


@contextlib.asynccontextmanager
async def writing(request: web.Request) -> AsyncIterator[AsyncSession]:
    """A session in a transaction for one write. On SQLite writes take turns: two edits at once then both
    apply, one after the other, as they do on PostgreSQL (where the row is locked)."""
    database = request.config_dict[DATABASE]
    async with database.writing(), database.sessions() as session, session.begin():
        yield session
