"""The long poll: the jobs offered to a host, the jobs it is asked to cancel or withdraw, the devices
whose settings a reservation's holder waits for and a person's requests of a device's power; held open
until there is one, or the wait is over.

A dispatch round of this process that leases to a host, or a commit here that asks a runner to stop a job,
answers the host's waiting polls at once; the check every :data:`POLL_INTERVAL_S` is for what another
process does.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from kerrigan.core.device_console import ACTION as CONSOLE_ACTION
from kerrigan.core.device_console import CAPABILITY as DEVICE_CONSOLE
from kerrigan.core.device_power import CAPABILITY as DEVICE_POWER
from kerrigan.core.inventory import effective_target_labels
from kerrigan.core.manifest import Priority
from kerrigan.core.runner_protocol import JOB_SHELL, POLL_TIMEOUT_S
from kerrigan.dispatch.dispatcher import listen_for_leases
from kerrigan.dispatch.protocol.requests import ProtocolError
from kerrigan.store.consoles import ConsoleSession
from kerrigan.store.database import Database
from kerrigan.store.device_requests import DeviceRequest, requests_waiting, take_requests
from kerrigan.store.inventory import StoredDevice, host_devices
from kerrigan.store.jobs.offers import Offer, RunnerRequests, offers, runner_requests
from kerrigan.store.reservations import settings_wanted
from kerrigan.store.runners import host_report
from kerrigan.store.signals import Topic

# How often a waiting long poll looks at the database itself: for what another process did (a replica's
# lease, a cancel taken by a worker process). What this process does wakes the poll at once.
POLL_INTERVAL_S = 1.0


class Polls:
    """``/poll``, and the long polls waiting now, by host."""

    def __init__(self, database: Database, admins: frozenset[str] = frozenset()) -> None:
        self.database = database
        self.admins = admins  # KERRIGAN_ADMINS, lower case: a power request is checked again as it is taken
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._stopping = False
        # Through a weak reference: the listener lives as long as the database, and must not keep these
        # polls (and with them the database, the listener's own key) alive.
        polls = weakref.ref(self)

        def leased(hosts: frozenset[str]) -> None:
            alive = polls()
            if alive is not None:
                alive.wake(hosts)

        def asked() -> None:
            alive = polls()
            if alive is not None:
                alive.wake(frozenset(alive._waiting))

        def console_asked(host: str) -> None:
            alive = polls()
            if alive is not None:
                alive.wake(frozenset({host}))

        listen_for_leases(database, leased)
        database.signals.listen(Topic.RUNNER_REQUESTS, asked)
        database.consoles.requested.append(console_asked)
        database.shells.requested.append(console_asked)

    def wake(self, hosts: frozenset[str]) -> None:
        """Wake the waiting long polls of ``hosts``: they have new offers (or requests to stop a job)."""
        for host in hosts:
            for event in self._waiting.get(host, ()):
                event.set()

    async def stop(self, app: web.Application | None = None) -> None:
        """The server is stopping: answer every waiting long poll now (with what it has, usually nothing)
        rather than hold the shutdown for up to :data:`POLL_TIMEOUT_S`; the agents poll another replica,
        or this one once it is back."""
        self._stopping = True
        for waiting in list(self._waiting.values()):
            for woken in list(waiting):
                woken.set()

    async def poll(self, request: web.Request, host: str) -> web.Response:
        """Offered jobs for this host, waiting up to ``?wait=`` seconds (at most the poll timeout) for one."""
        wait_text = request.query.get("wait", "0")
        if not wait_text.isascii() or not wait_text.isdigit() or len(wait_text) > 6:
            raise ProtocolError(400, "invalid", "wait must be whole seconds", "wait")
        deadline = asyncio.get_running_loop().time() + min(int(wait_text), POLL_TIMEOUT_S)
        async with self.database.sessions() as session:
            known = await host_report(session, host)
        # A feature is used only when both sides announced it at registration.
        capabilities = known.capabilities if known is not None else frozenset()
        woken = asyncio.Event()
        waiting = self._waiting.setdefault(host, set())
        waiting.add(woken)
        wanted: list[tuple[str, str]] = []
        powers = False
        try:
            while True:
                woken.clear()  # before reading: a lease made meanwhile means read again at once
                async with self.database.sessions() as session:
                    found = await offers(session, host)
                    requests = await runner_requests(session, host)
                    if "withdraw" not in capabilities:
                        requests = RunnerRequests(cancel=requests.cancel)
                    if "holder_settings" in capabilities:
                        wanted = await settings_wanted(session, host)
                    if DEVICE_POWER in capabilities:
                        powers = await requests_waiting(session, host, self.database.clock())
                people = self._people_waiting(host, capabilities)
                if found or requests.cancel or requests.withdraw or wanted or powers or people:
                    break
                if self._stopping or asyncio.get_running_loop().time() >= deadline:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), POLL_INTERVAL_S)
        finally:
            waiting.discard(woken)
            if not waiting:
                self._waiting.pop(host, None)
        taken: list[DeviceRequest] = []
        if powers:  # handed to this poll alone: another poll of the host finds them taken
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                taken = await take_requests(session, host, self.database.clock(), self.admins)
        devices: dict[str, StoredDevice] = {}
        if found:  # read once the long poll is over, not on each of its rounds
            async with self.database.sessions() as session:
                devices = {stored.device.id: stored for stored in await host_devices(session, host)}
        answer: dict[str, Any] = {
            "offers": [_offer_json(offer, devices, capabilities) for offer in found],
            "cancel": list(requests.cancel),
            "withdraw": list(requests.withdraw),
        }
        if "holder_settings" in capabilities:
            # Reservations just granted a device of this host: the settings its devices file shows their
            # person, asked for while the reservation holds it and never before.
            answer["settings_for"] = [
                {"reservation": reservation, "device": device} for reservation, device in wanted
            ]
        if DEVICE_POWER in capabilities or DEVICE_CONSOLE in capabilities:
            # A person's consoles (store.consoles) are this process's: handed by this poll alone.
            answer["device_requests"] = _device_requests(
                taken, self.database.consoles.take(host) if DEVICE_CONSOLE in capabilities else []
            )
        return web.json_response(answer | self._job_shells(host, capabilities))

    def _people_waiting(self, host: str, capabilities: frozenset[str]) -> bool:
        """Whether a person's console or shell waits for ``host``'s agent (in this process)."""
        consoles = DEVICE_CONSOLE in capabilities and self.database.consoles.waiting(host)
        return consoles or (JOB_SHELL in capabilities and self.database.shells.waiting(host))

    def _job_shells(self, host: str, capabilities: frozenset[str]) -> dict[str, Any]:
        """A person's shells in held jobs' sandboxes (web.api.shell), this process's as consoles are (the
        session's key is the job's id): the agent connects to job-shells/{id}."""
        if JOB_SHELL not in capabilities:
            return {}
        taken = self.database.shells.take(host)
        return {"job_shells": [{"id": asked.id, "job": asked.device_id} for asked in taken]}


def _device_requests(taken: list[DeviceRequest], watched: list[ConsoleSession]) -> list[dict[str, str]]:
    """A person's requests of a device's power (core.device_power: answered at device-requests/{id}) and
    console (core.device_console: its agent connects to device-requests/{id}/console)."""
    powers = [{"id": asked.id, "device": asked.device_id, "action": asked.action.value} for asked in taken]
    consoles = [{"id": asked.id, "device": asked.device_id, "action": CONSOLE_ACTION} for asked in watched]
    return powers + consoles


def _offer_json(
    offer: Offer, devices: Mapping[str, StoredDevice], capabilities: frozenset[str]
) -> dict[str, Any]:
    extra = {"gate": offer.priority is Priority.GATE} if "gate_jobs" in capabilities else {}
    # A job that holds no device (board: none) is offered with none: "device" and "board" are null.
    device = devices.get(offer.device_id) if offer.device_id is not None else None
    return extra | {
        "id": offer.job_id,
        "session": offer.session_id,
        "task": offer.spec.task_id,
        "device": offer.device_id,
        "board": device.device.board if device else None,
        "labels": effective_target_labels(device.device, device.pool) if device else {},
        "repository": offer.repository,
        "sha": offer.head_sha,
        "workflow_run_id": offer.workflow_run_id,
        "command": offer.spec.command,
        "env": dict(offer.spec.env),
        "results": list(offer.spec.results),
        "secrets": list(offer.spec.secrets),  # names: the values come with the accept
        # Whether the job may have secrets: the devices file's secret_env goes only to those that may.
        "secrets_allowed": offer.secrets_allowed,
        "artifacts": dict(offer.spec.artifacts),
        "claim": {"vcpus": offer.spec.vcpus},
        "timeout_s": offer.spec.timeout_s,
        # The task's power: "cycle" its wired boards before it (the default), or "keep" one that is on.
        "power": offer.spec.power.value,
        "queue_wait_remaining_s": max(0.0, offer.queue_wait_limit_s - offer.queue_wait_s),
        # A gang's devices by role (its first is "device" above); empty for a job of one device.
        "devices": [_role_json(role, devices.get(device_id), device_id) for role, device_id in offer.roles],
    }


def _role_json(role: str, device: StoredDevice | None, device_id: str) -> dict[str, Any]:
    return {
        "role": role,
        "id": device_id,
        "board": device.device.board if device else None,
        "labels": effective_target_labels(device.device, device.pool) if device else {},
    }
