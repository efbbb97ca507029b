"""The aiohttp application factory: configuration in, application out; nothing happens at import time."""

from __future__ import annotations

from collections.abc import AsyncIterator

from aiohttp import web
from sqlalchemy import text

from kerrigan.config import Settings
from kerrigan.store.database import Clock, Database, check_schema, utc_now
from kerrigan.web.api import create_api
from kerrigan.web.state import DATABASE, SETTINGS


def create_app(settings: Settings, *, clock: Clock = utc_now) -> web.Application:
    """The whole Kerrigan server for ``settings``; the database opens (and is checked) on start-up."""
    app = web.Application()
    app[SETTINGS] = settings

    async def database_ctx(app: web.Application) -> AsyncIterator[None]:
        database = Database.connect(settings.database_url, clock)
        try:
            await check_schema(database.engine)
            app[DATABASE] = database
            yield
        finally:
            await database.close()

    app.cleanup_ctx.append(database_ctx)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.add_subapp("/api/v1", create_api())
    return app


async def _healthz(request: web.Request) -> web.Response:
    """The process is up."""
    return web.json_response({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    """The database answers."""
    try:
        async with request.app[DATABASE].engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except Exception as exc:
        return web.json_response({"status": "unavailable", "reason": str(exc)}, status=503)
    return web.json_response({"status": "ok"})
