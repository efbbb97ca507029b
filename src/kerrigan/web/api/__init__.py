"""The REST API under ``/api/v1/`` (docs/api.md, and ``/api/v1/openapi.json`` describing it)."""

from __future__ import annotations

from aiohttp import web

from kerrigan.web.api import (
    audit,
    cancel,
    console,
    explain,
    history,
    holds,
    hosts,
    inventory,
    openapi,
    power,
    registry,
    reservations,
    secrets,
    shell,
)
from kerrigan.web.errors import json_errors


def create_api() -> web.Application:
    """The API as a sub-application, mounted at ``/api/v1`` by the application factory."""
    api = web.Application(middlewares=[json_errors])
    for module in (
        inventory,
        explain,
        registry,
        audit,
        hosts,
        history,
        cancel,
        secrets,
        reservations,
        holds,
        power,
        console,
        shell,
        openapi,
    ):
        api.add_routes(module.routes)
    return api
