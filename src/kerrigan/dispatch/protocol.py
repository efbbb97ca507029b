"""The runner protocol's server side (``/api/runner/v1/``): registration and heartbeats.

Each runner host authenticates with its own bearer token (``kerrigan runners create HOST``). Resource
values arrive keyed by name and are resolved through the server's own catalog; unknown names are logged as
warnings and skipped, never failing the message (seed 001). A heartbeat renews the host's device leases.
"""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from typing import Any

from aiohttp import web

from kerrigan.core.resources import Skipped, initial_values
from kerrigan.core.runner_protocol import (
    LEASE_TTL_S,
    POLL_TIMEOUT_S,
    NoCommonVersionError,
    negotiate,
    server_catalog,
)
from kerrigan.store.database import Database
from kerrigan.store.leases import renew_leases
from kerrigan.store.runners import HostReport, host_for_token, host_report, record_report

log = logging.getLogger(__name__)

DEVICE_STATES = frozenset({"present", "missing", "error"})


class ProtocolError(Exception):
    """A request the runner must change; answered with the JSON error shape the API uses."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def _error(exc: ProtocolError) -> web.Response:
    body = {"error": {"code": exc.code, "message": exc.message, "field": exc.field}}
    return web.json_response(body, status=exc.status)


class RunnerProtocol:
    """Handlers for the runner protocol, bound to a database."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.catalog = server_catalog()

    def routes(self) -> list[web.RouteDef]:
        """The routes, to add under ``/api/runner/v1``."""
        return [
            web.post("/api/runner/v1/register", self.register),
            web.post("/api/runner/v1/heartbeat", self.heartbeat),
        ]

    async def _host(self, request: web.Request) -> str:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ProtocolError(
                401, "unauthenticated", "send the host's token as 'Authorization: Bearer <token>'"
            )
        async with self.database.sessions() as session:
            host = await host_for_token(session, token.strip())
        if host is None:
            raise ProtocolError(
                401, "unauthenticated", "unknown runner token: run `kerrigan runners create HOST`"
            )
        return host

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = json.loads(await request.read())
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object") from None
        if not isinstance(body, dict):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object")
        return body

    def _resources(self, host: str, body: dict[str, Any]) -> tuple[dict[str, int], list[Skipped]]:
        raw = body.get("resources", {})
        if not isinstance(raw, dict):
            raise ProtocolError(400, "invalid", "resources must be an object of name: value", "resources")
        values, skipped = initial_values(self.catalog, raw)
        for item in skipped:
            log.warning("runner host %s: resource %r skipped: %s", host, item.name, item.reason)
        return values.named(self.catalog), skipped

    @staticmethod
    def _devices(body: dict[str, Any]) -> dict[str, str]:
        raw = body.get("devices", {})
        if not isinstance(raw, dict) or not all(
            isinstance(k, str) and v in DEVICE_STATES for k, v in raw.items()
        ):
            raise ProtocolError(
                400, "invalid", f"devices must map device ids to one of {sorted(DEVICE_STATES)}", "devices"
            )
        return dict(raw)

    async def register(self, request: web.Request) -> web.Response:
        """Negotiate a version and capabilities, and record the host's resources and devices."""
        try:
            host = await self._host(request)
            body = await self._body(request)
            versions = body.get("protocol", [])
            capabilities = body.get("capabilities", [])
            if not isinstance(versions, list) or not all(isinstance(v, int) for v in versions):
                raise ProtocolError(
                    400, "invalid", "protocol must list the versions the runner speaks", "protocol"
                )
            if not isinstance(capabilities, list) or not all(isinstance(c, str) for c in capabilities):
                raise ProtocolError(400, "invalid", "capabilities must be a list of names", "capabilities")
            try:
                agreed = negotiate(versions, capabilities)
            except NoCommonVersionError as exc:
                raise ProtocolError(409, "no_common_version", str(exc), "protocol") from None
            resources, skipped = self._resources(host, body)
            devices = self._devices(body)
            async with self.database.sessions() as session, session.begin():
                report = await record_report(
                    session,
                    host,
                    self.database.clock(),
                    resources=resources,
                    device_states=devices,
                    protocol=agreed.version,
                    capabilities=agreed.capabilities,
                )
        except ProtocolError as exc:
            return _error(exc)
        return web.json_response(
            self._answer(report, skipped)
            | {
                "protocol": agreed.version,
                "capabilities": sorted(agreed.capabilities),
                "lease_ttl_s": LEASE_TTL_S,
                "poll_timeout_s": POLL_TIMEOUT_S,
            }
        )

    async def heartbeat(self, request: web.Request) -> web.Response:
        """Record resources and device states, and renew the host's leases."""
        try:
            host = await self._host(request)
            body = await self._body(request)
            async with self.database.sessions() as session:
                known = await host_report(session, host)
            if known is None or known.protocol is None:
                raise ProtocolError(409, "not_registered", "register before sending heartbeats")
            resources, skipped = self._resources(host, body)
            devices = self._devices(body)
            now = self.database.clock()
            async with self.database.sessions() as session, session.begin():
                report = await record_report(session, host, now, resources=resources, device_states=devices)
                renewed = await renew_leases(session, host, now, timedelta(seconds=LEASE_TTL_S))
        except ProtocolError as exc:
            return _error(exc)
        return web.json_response(self._answer(report, skipped) | {"leases_renewed": renewed})

    @staticmethod
    def _answer(report: HostReport, skipped: list[Skipped]) -> dict[str, Any]:
        return {
            "host": report.host,
            "resources": dict(report.resources),
            "skipped": [{"name": item.name, "reason": item.reason} for item in skipped],
        }
