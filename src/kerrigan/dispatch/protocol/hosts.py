"""What a runner host says of itself: its registration (versions, capabilities, resources, devices) and
its heartbeats, which renew its device leases.

Resource values arrive keyed by name and are resolved through the server's own catalog; unknown names are
logged as warnings and skipped, never failing the message (seed 001).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from aiohttp import web

from kerrigan.core.inventory import effective_target_labels
from kerrigan.core.resources import Skipped, initial_values, update_values
from kerrigan.core.runner_protocol import (
    HELD_WORKSPACES,
    POLL_TIMEOUT_S,
    NoCommonVersionError,
    negotiate,
    server_catalog,
)
from kerrigan.dispatch.protocol.requests import Heartbeat, ProtocolError, Registration, read
from kerrigan.store.database import Database
from kerrigan.store.holds import held_workspaces
from kerrigan.store.inventory import host_devices
from kerrigan.store.jobs.offers import held_jobs, observe_runner_waits
from kerrigan.store.leases import renew_leases
from kerrigan.store.runners import HostReport, host_report, record_report
from kerrigan.store.signals import Topic, mark

log = logging.getLogger(__name__)


class HostReports:
    """``/register`` and ``/heartbeat``, for a host whose token was checked."""

    def __init__(self, database: Database, lease_ttl_s: int) -> None:
        self.database = database
        self.lease_ttl_s = lease_ttl_s
        self.catalog = server_catalog()

    def _resources(
        self, host: str, raw: Mapping[str, Any], known: Mapping[str, int] | None = None
    ) -> tuple[dict[str, int], list[Skipped]]:
        """The host's resources after this message: a heartbeat changes the values it names, keeps others."""
        held, _ = initial_values(self.catalog, known or {})
        values, skipped = update_values(held, self.catalog, raw)
        for item in skipped:
            log.warning("runner host %s: resource %r skipped: %s", host, item.name, item.reason)
        return values.named(self.catalog), skipped

    async def register(self, request: web.Request, host: str) -> web.Response:
        """Negotiate a version and capabilities, and record the host's resources and devices."""
        sent = await read(request, Registration)
        try:
            agreed = negotiate(list(sent.versions), list(sent.capabilities))
        except NoCommonVersionError as exc:
            raise ProtocolError(409, "no_common_version", str(exc), "protocol") from None
        resources, skipped = self._resources(host, sent.resources)
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            report = await record_report(
                session,
                host,
                self.database.clock(),
                resources=resources,
                device_states=dict(sent.devices),
                protocol=agreed.version,
                capabilities=agreed.capabilities,
            )
            mark(session, Topic.DISPATCH)  # a host (back) online: its devices may take work
        async with self.database.sessions() as session:
            driven = await host_devices(session, host)
        return web.json_response(
            _answer(report, skipped)
            | {
                "devices": [
                    {
                        "id": stored.device.id,
                        "board": stored.device.board,
                        "labels": effective_target_labels(stored.device, stored.pool),
                    }
                    for stored in driven
                ],
                "protocol": agreed.version,
                "capabilities": sorted(agreed.capabilities),
                "lease_ttl_s": self.lease_ttl_s,
                "poll_timeout_s": POLL_TIMEOUT_S,
            }
        )

    async def heartbeat(self, request: web.Request, host: str) -> web.Response:
        """Record resources and device states, and renew the host's leases."""
        sent = await read(request, Heartbeat)
        async with self.database.sessions() as session:
            known = await host_report(session, host)
        if known is None or known.protocol is None:
            raise ProtocolError(409, "not_registered", "register before sending heartbeats")
        resources, skipped = self._resources(host, sent.resources, known.resources)
        devices = {**known.device_states, **sent.devices}
        now = self.database.clock()
        async with self.database.writing(), self.database.sessions() as session, session.begin():
            report = await record_report(
                session, host, now, resources=resources, device_states=devices, health=sent.health
            )
            renewed = await renew_leases(session, host, now, timedelta(seconds=self.lease_ttl_s))
            await observe_runner_waits(session, host, dict(sent.waiting), now)
            held = await held_jobs(session, host)
            kept = await held_workspaces(session, host) if HELD_WORKSPACES in report.capabilities else None
        # The jobs the server holds this host to (accepted or running): the agent reconciles against them.
        answer = _answer(report, skipped) | {"leases_renewed": renewed, "jobs": held}
        if kept is not None:  # the jobs whose workspaces a hold keeps here, to an agent that keeps them
            answer["held_workspaces"] = kept
        return web.json_response(answer)


def _answer(report: HostReport, skipped: list[Skipped]) -> dict[str, Any]:
    return {
        "host": report.host,
        "resources": dict(report.resources),
        "skipped": [{"name": item.name, "reason": item.reason} for item in skipped],
    }
