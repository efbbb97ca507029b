"""The runner protocol's server side (``/api/runner/v1/``): registration, heartbeats, offers, job life.

Each runner host authenticates with its own bearer token (``kerrigan runners create HOST``). Resource
values arrive keyed by name and are resolved through the server's own catalog; unknown names are logged as
warnings and skipped, never failing the message (seed 001). A heartbeat renews the host's device leases.

A runner host is not trusted to send anything at all: a call carries at most ``MAX_BODY_BYTES`` (413 past
it), and every field is range-checked (:mod:`kerrigan.core.runner_fields`) before anything is stored, a
field out of range answered 400 naming it, the job left as it was. A job's output is stored up to
``output_max_bytes`` (``KERRIGAN_OUTPUT_MAX_BYTES``); the answer to the chunk that crosses it, and to every
later one, carries ``"output_cut": true`` so the runner stops sending.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol

import structlog
from aiohttp import web
from cachetools import TTLCache
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core import runner_fields as fields
from kerrigan.core.cpus import parse_cpu_list
from kerrigan.core.github_retry import retry_after
from kerrigan.core.inventory import effective_target_labels
from kerrigan.core.lifecycle import TransitionError
from kerrigan.core.resources import Skipped, initial_values, update_values
from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES, MAX_BODY_BYTES, FieldError, size_text
from kerrigan.core.runner_protocol import (
    LEASE_TTL_S,
    POLL_TIMEOUT_S,
    JobCredentials,
    NoCommonVersionError,
    negotiate,
    server_catalog,
)
from kerrigan.dispatch.dispatcher import listen_for_leases
from kerrigan.store import jobs
from kerrigan.store.check_runs import output_arrived
from kerrigan.store.database import Database
from kerrigan.store.inventory import StoredDevice, host_devices
from kerrigan.store.leases import renew_leases
from kerrigan.store.reservations import record_holder_settings, settings_wanted
from kerrigan.store.runners import (
    HostReport,
    host_for_token,
    host_report,
    note_token_use,
    record_report,
    token_use_due,
)
from kerrigan.store.secrets import JobSecrets, hand_secrets
from kerrigan.store.signals import Topic, mark

log = logging.getLogger(__name__)

DEVICE_STATES = frozenset({"present", "missing", "error"})
REFUSALS = frozenset({"runner_full", "runner_disk_full", "invalid_claim"})
# How often a waiting long poll looks at the database itself: for what another process did (a replica's
# lease, a cancel taken by a worker process). What this process does wakes the poll at once.
POLL_INTERVAL_S = 1.0


def _offer_json(
    offer: jobs.Offer, devices: Mapping[str, StoredDevice], capabilities: frozenset[str]
) -> dict[str, Any]:
    extra = {"gate": offer.priority == "gate"} if "gate_jobs" in capabilities else {}
    # A job that holds no device (board: none) is offered with none: "device" and "board" are null.
    device = devices.get(offer.device_id) if offer.device_id is not None else None
    return extra | {
        "id": offer.job_id,
        "session": offer.session_id,
        "task": offer.task_id,
        "device": offer.device_id,
        "board": device.device.board if device else None,
        "labels": effective_target_labels(device.device, device.pool) if device else {},
        "repository": offer.repository,
        "sha": offer.head_sha,
        "workflow_run_id": offer.workflow_run_id,
        "command": offer.command,
        "env": dict(offer.env),
        "results": list(offer.results),
        "secrets": list(offer.secrets),  # names: the values come with the accept
        # Whether the job may have secrets: the devices file's secret_env goes only to those that may.
        "secrets_allowed": offer.secrets_allowed,
        "artifacts": dict(offer.artifacts),
        "claim": {"vcpus": offer.vcpus},
        "timeout_s": offer.timeout_s,
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


class ProtocolError(Exception):
    """A request the runner must change; answered with the JSON error shape the API uses."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


def _invalid(exc: FieldError) -> ProtocolError:
    return ProtocolError(400, "invalid", exc.message, exc.field)


async def read_bounded(request: web.Request, limit: int, too_large: ProtocolError) -> bytes:
    """The request's body, or ``too_large`` raised as soon as it is known to be over ``limit`` bytes: from
    its ``Content-Length``, or (a chunked body names none) counted as it comes."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large
    data = bytearray()
    async for piece in request.content.iter_chunked(256 * 1024):
        data += piece
        if len(data) > limit:
            raise too_large
    return bytes(data)


def error_response(exc: ProtocolError) -> web.Response:
    """The JSON error a protocol call answers."""
    body = {"error": {"code": exc.code, "message": exc.message, "field": exc.field}}
    return web.json_response(body, status=exc.status)


Credentials = Callable[[int, str], Awaitable[JobCredentials]]
MINT_RETRY_S = 20.0  # how long an accept keeps minting its token through GitHub's transient errors


class Answer(Protocol):
    """What GitHub answered to a failed mint (see ``kerrigan.github.client.GitHubAnswer``)."""

    @property
    def status(self) -> int | None: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def message(self) -> str: ...


class MintFailedError(Exception):
    """GitHub would not mint the job's token in time; the accept is answered 503 and the runner retries."""


class RunnerProtocol:
    """Handlers for the runner protocol, bound to a database.

    Job transitions are the store's (their session and check run follow in the same transaction);
    ``credentials`` mints the repository-scoped token an accepted job fetches its source with (the app
    wires the GitHub App), once per acceptance: a repeated accept gets the same token.
    """

    def __init__(
        self,
        database: Database,
        lease_ttl_s: int = LEASE_TTL_S,
        *,
        mint_retry_s: float = MINT_RETRY_S,
        mint_backoff_s: float = 0.5,
        output_max_bytes: int = DEFAULT_OUTPUT_MAX_BYTES,
        secrets_keys: tuple[str, ...] = (),
    ) -> None:
        self.database = database
        self.secrets_keys = secrets_keys  # KERRIGAN_SECRETS_KEY: what opens the secrets jobs are handed
        self.lease_ttl_s = lease_ttl_s
        self.output_max_bytes = output_max_bytes
        self.catalog = server_catalog()
        self.credentials: Credentials | None = None
        self.answer_of: Callable[[BaseException], Answer | None] = lambda _exc: None
        self.mint_retry_s = mint_retry_s
        self.mint_backoff_s = mint_backoff_s
        # job id -> (installation, the token minted when it was accepted): tokens live an hour
        self._minted: TTLCache[str, tuple[int, JobCredentials]] = TTLCache(maxsize=10_000, ttl=50 * 60)
        # Told the installation of each job token the runner revokes when its job ends (the app counts the
        # runner's DELETE in that installation's GitHub budget, which the server's own requests share).
        self.revoking: Callable[[int], None] | None = None
        # The long polls waiting now, by host: a dispatch round here that leases to a host, or a commit here
        # that asks a runner to stop a job, answers them at once; the check every POLL_INTERVAL_S stays for
        # what another process does.
        self._waiting_polls: dict[str, set[asyncio.Event]] = {}
        self._stopping = False
        # Through a weak reference: the listener lives as long as the database, and must not keep this
        # protocol (and with it the database, the listener's own key) alive.
        protocol = weakref.ref(self)

        def leased(hosts: frozenset[str]) -> None:
            alive = protocol()
            if alive is not None:
                alive._leased(hosts)

        def asked() -> None:
            alive = protocol()
            if alive is not None:
                alive._leased(frozenset(alive._waiting_polls))

        listen_for_leases(database, leased)
        database.signals.listen(Topic.RUNNER_REQUESTS, asked)

    def _leased(self, hosts: frozenset[str]) -> None:
        """Wake the waiting long polls of ``hosts``: they have new offers (or requests to stop a job)."""
        for host in hosts:
            for event in self._waiting_polls.get(host, ()):
                event.set()

    async def stop_polls(self, app: web.Application | None = None) -> None:
        """The server is stopping: answer every waiting long poll now (with what it has, usually nothing)
        rather than hold the shutdown for up to :data:`POLL_TIMEOUT_S`; the agents poll another replica,
        or this one once it is back."""
        self._stopping = True
        for waiting in list(self._waiting_polls.values()):
            for woken in list(waiting):
                woken.set()

    def routes(self) -> list[web.RouteDef]:
        """The routes, to add under ``/api/runner/v1``."""
        return [
            web.post("/api/runner/v1/register", self.register),
            web.post("/api/runner/v1/heartbeat", self.heartbeat),
            web.get("/api/runner/v1/poll", self.poll),
            web.post("/api/runner/v1/jobs/{job_id}/accept", self.accept),
            web.post("/api/runner/v1/jobs/{job_id}/refuse", self.refuse),
            web.post("/api/runner/v1/jobs/{job_id}/start", self.start),
            web.post("/api/runner/v1/jobs/{job_id}/output", self.output),
            web.post("/api/runner/v1/jobs/{job_id}/finish", self.finish),
            web.post("/api/runner/v1/jobs/{job_id}/withdrawn", self.withdrawn),
            web.post("/api/runner/v1/reservations/{reservation_id}/settings", self.holder_settings),
        ]

    async def host_of(self, request: web.Request) -> str:
        """The runner host whose token the request carries, or a 401."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise ProtocolError(
                401, "unauthenticated", "send the host's token as 'Authorization: Bearer <token>'"
            )
        # Asked of the database on every call (one indexed read): a token revoked or rotated by
        # `kerrigan runners`, in whatever process, is refused at once.
        async with self.database.sessions() as session:
            holder = await host_for_token(session, token.strip())
        if holder is None:
            raise ProtocolError(
                401,
                "unauthenticated",
                "this runner token was revoked, replaced or never made: `kerrigan runners rotate HOST` on "
                "the server makes a new one",
            )
        now = self.database.clock()
        if token_use_due(holder, now):
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                await note_token_use(session, token.strip(), now)
        structlog.contextvars.bind_contextvars(runner_host=holder.host)
        return holder.host

    async def _body(self, request: web.Request) -> dict[str, Any]:
        """The JSON object sent, read no further than ``MAX_BODY_BYTES``, with valid text and numbers."""
        too_large = ProtocolError(
            413,
            "too_large",
            f"a runner protocol call carries at most {size_text(MAX_BODY_BYTES)} ({MAX_BODY_BYTES} bytes)",
        )
        raw = await read_bounded(request, MAX_BODY_BYTES, too_large)
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object") from None
        if not isinstance(body, dict):
            raise ProtocolError(400, "invalid_json", "the body is not a JSON object")
        try:
            fields.check_document(body)
        except FieldError as exc:
            raise _invalid(exc) from None
        return body

    @staticmethod
    def job_id_of(request: web.Request) -> str:
        """The job id in the path, in the database's range (a 404 is for ids that could exist)."""
        try:
            job_id = str(fields.job_id(request.match_info["job_id"]))
        except FieldError as exc:
            raise _invalid(exc) from None
        structlog.contextvars.bind_contextvars(job_id=job_id)
        return job_id

    def _resources(
        self, host: str, body: dict[str, Any], known: Mapping[str, int] | None = None
    ) -> tuple[dict[str, int], list[Skipped]]:
        """The host's resources after this message: a heartbeat changes the values it names, keeps others."""
        raw = body.get("resources", {})
        if not isinstance(raw, dict):
            raise ProtocolError(400, "invalid", "resources must be an object of name: value", "resources")
        try:
            fields.sized(raw, "resources", 256)
            for name, value in raw.items():
                if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                    # other kinds of value are skipped, as ever
                    fields.whole(value, f"resources.{name}", high=fields.MAX_RESOURCE)
        except FieldError as exc:
            raise _invalid(exc) from None
        held, _ = initial_values(self.catalog, known or {})
        values, skipped = update_values(held, self.catalog, raw)
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
        try:
            fields.sized(raw, "devices")
        except FieldError as exc:
            raise _invalid(exc) from None
        return dict(raw)

    async def register(self, request: web.Request) -> web.Response:
        """Negotiate a version and capabilities, and record the host's resources and devices."""
        try:
            host = await self.host_of(request)
            body = await self._body(request)
            versions = body.get("protocol", [])
            capabilities = body.get("capabilities", [])
            if (
                not isinstance(versions, list)
                or len(versions) > 16
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in versions)
                or not all(1 <= v <= fields.MAX_ID for v in versions)
            ):
                raise ProtocolError(
                    400, "invalid", "protocol must list the versions the runner speaks", "protocol"
                )
            if (
                not isinstance(capabilities, list)
                or len(capabilities) > 64
                or not all(isinstance(c, str) and 0 < len(c) <= fields.MAX_NAME for c in capabilities)
            ):
                raise ProtocolError(400, "invalid", "capabilities must be a list of names", "capabilities")
            try:
                agreed = negotiate(versions, capabilities)
            except NoCommonVersionError as exc:
                raise ProtocolError(409, "no_common_version", str(exc), "protocol") from None
            resources, skipped = self._resources(host, body)
            devices = self._devices(body)
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                report = await record_report(
                    session,
                    host,
                    self.database.clock(),
                    resources=resources,
                    device_states=devices,
                    protocol=agreed.version,
                    capabilities=agreed.capabilities,
                )
                mark(session, Topic.DISPATCH)  # a host (back) online: its devices may take work
        except ProtocolError as exc:
            return error_response(exc)
        async with self.database.sessions() as session:
            driven = await host_devices(session, host)
        return web.json_response(
            self._answer(report, skipped)
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

    async def heartbeat(self, request: web.Request) -> web.Response:
        """Record resources and device states, and renew the host's leases."""
        try:
            host = await self.host_of(request)
            body = await self._body(request)
            async with self.database.sessions() as session:
                known = await host_report(session, host)
            if known is None or known.protocol is None:
                raise ProtocolError(409, "not_registered", "register before sending heartbeats")
            resources, skipped = self._resources(host, body, known.resources)
            devices = {**known.device_states, **self._devices(body)}
            waiting = body.get("waiting", {})
            if not isinstance(waiting, dict) or not all(
                isinstance(ms, int) and not isinstance(ms, bool) and 0 <= ms <= fields.MAX_COUNT
                for ms in waiting.values()
            ):
                raise ProtocolError(
                    400, "invalid", "waiting maps job ids to milliseconds waited on the host", "waiting"
                )
            try:
                fields.sized(waiting, "waiting")
                waiting = {str(fields.job_id(job)): ms for job, ms in waiting.items()}
            except FieldError as exc:
                raise ProtocolError(400, "invalid", f"waiting: {exc.message}", "waiting") from None
            health = body.get("health")
            if health is not None and not isinstance(health, dict):
                raise ProtocolError(400, "invalid", "health must be an object", "health")
            now = self.database.clock()
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                report = await record_report(
                    session, host, now, resources=resources, device_states=devices, health=health
                )
                renewed = await renew_leases(session, host, now, timedelta(seconds=self.lease_ttl_s))
                await jobs.observe_runner_waits(session, host, waiting, now)
                held = await jobs.held_jobs(session, host)
        except ProtocolError as exc:
            return error_response(exc)
        # The jobs the server holds this host to (accepted or running): the agent reconciles against them.
        return web.json_response(self._answer(report, skipped) | {"leases_renewed": renewed, "jobs": held})

    async def poll(self, request: web.Request) -> web.Response:
        """Offered jobs for this host, waiting up to ``?wait=`` seconds (at most the poll timeout) for one."""
        try:
            host = await self.host_of(request)
            wait_text = request.query.get("wait", "0")
            if not wait_text.isascii() or not wait_text.isdigit() or len(wait_text) > 6:
                raise ProtocolError(400, "invalid", "wait must be whole seconds", "wait")
            deadline = asyncio.get_running_loop().time() + min(int(wait_text), POLL_TIMEOUT_S)
            async with self.database.sessions() as session:
                known = await host_report(session, host)
            # A feature is used only when both sides announced it at registration.
            capabilities = known.capabilities if known is not None else frozenset()
            woken = asyncio.Event()
            waiting = self._waiting_polls.setdefault(host, set())
            waiting.add(woken)
            wanted: list[tuple[str, str]] = []
            try:
                while True:
                    woken.clear()  # before reading: a lease made meanwhile means read again at once
                    async with self.database.sessions() as session:
                        found = await jobs.offers(session, host)
                        requests = await jobs.runner_requests(session, host)
                        if "withdraw" not in capabilities:
                            requests = jobs.RunnerRequests(cancel=requests.cancel)
                        if "holder_settings" in capabilities:
                            wanted = await settings_wanted(session, host)
                    if found or requests.cancel or requests.withdraw or wanted:
                        break
                    if self._stopping or asyncio.get_running_loop().time() >= deadline:
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(woken.wait(), POLL_INTERVAL_S)
            finally:
                waiting.discard(woken)
                if not waiting:
                    self._waiting_polls.pop(host, None)
        except ProtocolError as exc:
            return error_response(exc)
        devices: dict[str, StoredDevice] = {}
        if found:  # read once the long poll is over, not on each of its rounds
            async with self.database.sessions() as session:
                devices = {stored.device.id: stored for stored in await host_devices(session, host)}
        offers = [_offer_json(offer, devices, capabilities) for offer in found]
        answer: dict[str, Any] = {
            "offers": offers,
            "cancel": list(requests.cancel),
            "withdraw": list(requests.withdraw),
        }
        if "holder_settings" in capabilities:
            # Reservations just granted a device of this host: the settings its devices file shows their
            # person, asked for while the reservation holds it and never before.
            answer["settings_for"] = [
                {"reservation": reservation, "device": device} for reservation, device in wanted
            ]
        return web.json_response(answer)

    async def holder_settings(self, request: web.Request) -> web.Response:
        """``{"device", "settings"}``: the devices-file settings of a device this host drives, for the person
        whose reservation holds it; ``{"recorded": false}`` when that reservation holds it no longer."""
        try:
            host = await self.host_of(request)
            reservation_id = request.match_info["reservation_id"]
            if not (len(reservation_id) == 36 and reservation_id.isascii()):
                raise ProtocolError(404, "not_found", "no such reservation")
            body = await self._body(request)
            try:
                device = fields.text(body.get("device"), "device", fields.MAX_NAME)
                settings = fields.settings(body.get("settings"))
            except FieldError as exc:
                raise _invalid(exc) from None
            async with self.database.writing(), self.database.sessions() as session, session.begin():
                recorded = await record_holder_settings(session, host, reservation_id, device, settings)
        except ProtocolError as exc:
            return error_response(exc)
        return web.json_response({"recorded": recorded})

    async def _credentials(self, job_id: str) -> JobCredentials | None:
        """The token for the job's repository, minted when the runner first accepts it and handed again to a
        repeated accept. GitHub's transient errors are retried with its backoff for ``mint_retry_s``; then
        :class:`MintFailedError` (the runner retries its accept). A permanent refusal gives no token: the
        runner then fails the job rather than run stale files."""
        if self.credentials is None:
            return None
        cached = self._minted.get(job_id)
        if cached is not None:
            return cached[1]
        async with self.database.sessions() as session:
            found = await jobs.job_repository(session, job_id)
        if found is None:
            return None
        installation_id, repository = found
        if installation_id is None or not repository:  # a health check: no repository, so no token
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.mint_retry_s
        attempt = 0
        while True:
            attempt += 1
            try:
                minted = await self.credentials(installation_id, repository)
            except Exception as exc:
                answer = self.answer_of(exc)
                retry = (
                    retry_after(
                        answer.status,
                        answer.headers,
                        answer.message,
                        attempt,
                        time.time(),
                        base_s=self.mint_backoff_s,
                    )
                    if answer is not None
                    else None
                )
                if retry is None:
                    log.exception("could not mint a token for %s (job %s)", repository, job_id)
                    return None
                if loop.time() + retry.delay_s > deadline:
                    raise MintFailedError(
                        f"GitHub did not mint a token for {repository}: {retry.reason}"
                    ) from exc
                log.warning(
                    "minting a token for %s (job %s): %s; again in %.1f s",
                    repository,
                    job_id,
                    retry.reason,
                    retry.delay_s,
                )
                await asyncio.sleep(retry.delay_s)
                continue
            self._minted[job_id] = (installation_id, minted)
            return minted

    def forget_token(self, job_id: str) -> None:
        """The job ended: its token is not handed out again, and the runner revokes it."""
        minted = self._minted.pop(job_id, None)
        if minted is not None and self.revoking is not None:
            self.revoking(minted[0])

    async def _transition(
        self,
        request: web.Request,
        change: Callable[[AsyncSession, str, str], Awaitable[jobs.Transition]],
        more: Callable[[], Mapping[str, Any]] | None = None,
    ) -> web.Response:
        try:
            host = await self.host_of(request)
            job_id = self.job_id_of(request)
            try:
                async with self.database.writing(), self.database.sessions() as session, session.begin():
                    done = await change(session, job_id, host)
            except jobs.NotYoursError as exc:
                raise ProtocolError(404, "not_found", str(exc)) from None
            except TransitionError as exc:
                raise ProtocolError(409, "invalid_transition", str(exc)) from None
        except ProtocolError as exc:
            return error_response(exc)
        if done.state in jobs.ENDED:
            self.forget_token(job_id)
        # "Already decided" is an answer: a repeated call gets the state it left, with changed false.
        answer: dict[str, Any] = {"job": job_id, "state": done.state.value, "changed": done.changed}
        if done.state is jobs.JobState.ACCEPTED and request.path.endswith("/accept"):
            try:
                credentials = await self._credentials(job_id)
            except MintFailedError as exc:
                return error_response(ProtocolError(503, "github_unavailable", str(exc)))
            answer["github"] = credentials.as_dict() if credentials else None
        if more is not None:
            answer |= more()
        return web.json_response(answer)

    async def accept(self, request: web.Request) -> web.Response:
        """The runner takes an offered job; the answer carries the token to fetch its repository with and
        the secrets the job names (``secrets``; ``secrets_withheld`` names those a fork's session does not
        get). A secret that cannot be handed ends the job before it starts (the answer says so)."""
        handed: list[JobSecrets] = []

        async def change(session: AsyncSession, job_id: str, host: str) -> jobs.Transition:
            at = self.database.clock()
            done = await jobs.accept(session, job_id, host, at)
            if done.state not in (jobs.JobState.ACCEPTED, jobs.JobState.RUNNING):
                return done
            secrets = await hand_secrets(session, job_id, host, at, keys=self.secrets_keys)
            if secrets.refused:
                return jobs.Transition(jobs.JobState.REFUSED_BEFORE_START, changed=True)
            handed.append(secrets)
            return done

        def more() -> dict[str, Any]:
            if not handed or not (handed[0].values or handed[0].withheld):
                return {}
            return {"secrets": dict(handed[0].values), "secrets_withheld": list(handed[0].withheld)}

        return await self._transition(request, change, more)

    async def start(self, request: web.Request) -> web.Response:
        """The job's command started; ``{"cpus": "2-3"}`` names the CPUs it is pinned to."""
        try:
            body = await self._body(request) if request.can_read_body else {}
            cpus = body.get("cpus")
            if cpus is not None:
                try:
                    parse_cpu_list(fields.text(cpus, "cpus", 500))
                except ValueError:
                    raise ProtocolError(
                        400, "invalid", "cpus is a kernel CPU list such as '2-3,6'", "cpus"
                    ) from None
        except ProtocolError as exc:
            return error_response(exc)
        return await self._transition(
            request, lambda session, job, host: jobs.start(session, job, host, self.database.clock(), cpus)
        )

    async def withdrawn(self, request: web.Request) -> web.Response:
        """The runner withdrew a job it had not started, as asked: it ends ``queue_wait_exceeded``."""
        return await self._transition(
            request, lambda session, job, host: jobs.withdrawn(session, job, host, self.database.clock())
        )

    async def refuse(self, request: web.Request) -> web.Response:
        """The runner cannot take the job, with a typed reason."""
        try:
            body = await self._body(request)
            reason = body.get("reason")
            if reason not in REFUSALS:
                raise ProtocolError(400, "invalid", f"reason must be one of {sorted(REFUSALS)}", "reason")
            detail = body.get("detail", "")
            if reason == "runner_disk_full":
                free, floor = body.get("free_bytes"), body.get("floor_bytes")
                if not isinstance(free, int) or not isinstance(floor, int):
                    raise ProtocolError(
                        400, "invalid", "runner_disk_full carries free_bytes and floor_bytes", "free_bytes"
                    )
                try:
                    fields.whole(free, "free_bytes", high=fields.MAX_RESOURCE)
                    fields.whole(floor, "floor_bytes", high=fields.MAX_RESOURCE)
                except FieldError as exc:
                    raise _invalid(exc) from None
                detail = f"{free} bytes free, floor {floor} bytes"
            if not isinstance(detail, str):
                raise ProtocolError(400, "invalid", "detail must be text", "detail")
            try:
                fields.text(detail, "detail")
            except FieldError as exc:
                raise _invalid(exc) from None
            retry = body.get("retry", True)
            if not isinstance(retry, bool):
                raise ProtocolError(400, "invalid", "retry must be true or false", "retry")
        except ProtocolError as exc:
            return error_response(exc)
        return await self._transition(
            request,
            lambda session, job, host: jobs.refuse(
                session, job, host, self.database.clock(), reason=str(reason), detail=detail, retry=retry
            ),
        )

    async def output(self, request: web.Request) -> web.Response:
        """A numbered chunk of the job's output; a repeat is acknowledged, a gap answered with 409."""
        try:
            host = await self.host_of(request)
            body = await self._body(request)
            job_id = self.job_id_of(request)
            seq, offset, data = body.get("seq"), body.get("offset"), body.get("data")
            truncated = body.get("truncated_before_seq")
            if not isinstance(seq, int) or not isinstance(offset, int) or not isinstance(data, str):
                raise ProtocolError(400, "invalid", "a chunk is {seq, offset, data}", "seq")
            if truncated is not None and not isinstance(truncated, int):
                raise ProtocolError(
                    400, "invalid", "truncated_before_seq is a chunk number", "truncated_before_seq"
                )
            try:
                fields.sequence(seq)
                fields.whole(offset, "offset")
                fields.chunk_data(data)
                if truncated is not None:
                    fields.sequence(truncated, "truncated_before_seq")
            except FieldError as exc:
                raise _invalid(exc) from None
            if truncated is not None:
                async with self.database.sessions() as session:
                    known = await host_report(session, host)
                if known is None or "log_pages" not in known.capabilities:
                    raise ProtocolError(
                        400,
                        "not_negotiated",
                        "truncated_before_seq needs the log_pages capability, announced at registration",
                        "truncated_before_seq",
                    )
            try:
                async with self.database.writing(), self.database.sessions() as session, session.begin():
                    appended = await jobs.append_output(
                        session,
                        job_id,
                        host,
                        seq=seq,
                        byte_offset=offset,
                        data=data,
                        truncated_before_seq=truncated,
                        max_bytes=self.output_max_bytes,
                        at=self.database.clock(),
                    )
                    if appended.next_seq == seq + 1:  # this chunk is stored: its check run may show it
                        await output_arrived(session, int(job_id), self.database.clock())
            except jobs.NotYoursError as exc:
                raise ProtocolError(404, "not_found", str(exc)) from None
            except jobs.LogGapError as exc:
                return web.json_response(
                    {
                        "error": {"code": "gap", "message": str(exc), "field": "seq"},
                        "next_seq": exc.expected_seq,
                    },
                    status=409,
                )
        except ProtocolError as exc:
            return error_response(exc)
        if appended.cut:  # the runner stops sending: nothing more of this job's output is stored
            return web.json_response({"next_seq": appended.next_seq, "output_cut": True})
        return web.json_response({"next_seq": appended.next_seq})

    async def finish(self, request: web.Request) -> web.Response:
        """The job ended with an exit status (and accounting, when the runner has it)."""
        try:
            body = await self._body(request)
            status = body.get("exit_status")
            accounting = body.get("accounting")
            outcome = body.get("outcome")
            if not isinstance(status, int) or isinstance(status, bool):
                raise ProtocolError(400, "invalid", "exit_status must be a whole number", "exit_status")
            if accounting is not None and not isinstance(accounting, dict):
                raise ProtocolError(400, "invalid", "accounting must be an object", "accounting")
            try:
                fields.exit_status(status)
                if accounting is not None:
                    fields.figures(accounting, "accounting")
            except FieldError as exc:
                raise _invalid(exc) from None
            if outcome is not None and outcome not in jobs.OUTCOMES:
                raise ProtocolError(
                    400, "invalid", f"outcome must be one of {sorted(jobs.OUTCOMES)}", "outcome"
                )
        except ProtocolError as exc:
            return error_response(exc)
        return await self._transition(
            request,
            lambda session, job, host: jobs.finish(
                session,
                job,
                host,
                self.database.clock(),
                exit_status=status,
                accounting=accounting,
                outcome=outcome,
            ),
        )

    @staticmethod
    def _answer(report: HostReport, skipped: list[Skipped]) -> dict[str, Any]:
        return {
            "host": report.host,
            "resources": dict(report.resources),
            "skipped": [{"name": item.name, "reason": item.reason} for item in skipped],
        }
