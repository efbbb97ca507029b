"""Typed keys for what the web application holds."""

from __future__ import annotations

from aiohttp import web

from kerrigan.config import Settings
from kerrigan.store.database import Database

DATABASE = web.AppKey("database", Database)
SETTINGS = web.AppKey("settings", Settings)
