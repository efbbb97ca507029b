"""Page module audit (being written)."""

from __future__ import annotations

from aiohttp import web

routes = web.RouteTableDef()
