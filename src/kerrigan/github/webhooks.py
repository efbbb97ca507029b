"""``POST /webhooks/github``: verify, store, answer 202; then process from the store.

The answer never waits for GitHub or the inventory: a valid delivery is stored and answered at once. A
worker takes stored deliveries one at a time (a claim in the database, renewed while it works), routes
them, and marks them done, so a crash or restart resumes what was pending and nothing is lost or done
twice. A repeated ``X-GitHub-Delivery`` is answered 200 and not stored again.

A signed body that is not a GitHub payload (not UTF-8, not JSON, nested deeper than :data:`MAX_DEPTH`, not
an object) is answered 202 and stored as failed with the reason; a payload that lacks a field a route needs
fails in the worker with :class:`~kerrigan.github.payload.PayloadError`. Neither is retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Final

import structlog
from aiohttp import web
from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.github.payload import Payload, PayloadError
from kerrigan.github.sessions import GitHubApp
from kerrigan.metrics import WEBHOOK_ACK, WEBHOOK_DELIVERIES
from kerrigan.store.database import Database
from kerrigan.store.deliveries import (
    Claim,
    Delivery,
    NewDelivery,
    claim_delivery,
    current_claim,
    fail_delivery,
    finish_delivery,
    gives_up,
    record_deliveries,
    renew_claim,
)

log = logging.getLogger(__name__)

SIGNATURE_HEADER: Final = "X-Hub-Signature-256"
MAX_BODY: Final = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
BUSY_WINDOW_S: Final = 0.05
PAUSE_S: Final = 0.02
MAX_DEFER_S: Final = 1.0
MAX_DEPTH: Final = 64  # GitHub's payloads nest a dozen levels at most
MAX_KEPT: Final = 64 * 1024  # of a body that is not a payload, the part kept to look at
_EVENT: Final = re.compile(r"[a-z_]{1,64}")
# The events the metrics name; any other (the header is not covered by the signature) counts as ``other``,
# so no sender can grow the number of series.
COUNTED_EVENTS: Final = frozenset(
    {
        "check_run",
        "check_suite",
        "installation",
        "installation_repositories",
        "issue_comment",
        "merge_group",
        "ping",
        "pull_request",
        "push",
        "workflow_run",
    }
)


def counted_event(event: str) -> str:
    """``event`` as the metrics name it: itself if Kerrigan subscribes to it, else ``other``."""
    return event if event in COUNTED_EVENTS else "other"


_DELIVERY_ID: Final = re.compile(r"[!-~]{1,64}")  # a GUID from GitHub; printable ASCII at least


def sign(secret: str, body: bytes) -> str:
    """The ``X-Hub-Signature-256`` value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the SHA-256 HMAC of ``body`` (constant-time; SHA-1 signatures are refused)."""
    if not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign(secret, body), header.strip())


_CODES: Final = {400: "bad_request", 401: "bad_signature", 413: "too_large", 503: "not_configured"}


def _error(status: int, message: str) -> web.Response:
    return web.json_response(
        {"error": {"code": _CODES[status], "message": message, "field": None}}, status=status
    )


class WebhookReceiver:
    """The aiohttp handler for GitHub's deliveries."""

    def __init__(
        self,
        database: Database,
        secret: str | None,
        wake: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.database = database
        self.secret = secret
        self.wake = wake
        self._clock = clock
        self._last_delivery = float("-inf")
        self._waiting: list[tuple[NewDelivery, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def _store(self, delivery: NewDelivery) -> bool:
        """Store a delivery; whether it was new.

        Deliveries that arrive while a write is under way are stored together in the next one (group
        commit): under load, one insert and one commit serve many webhooks.
        """
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting.append((delivery, future))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, []
            try:
                async with self.database.writing(), self.database.engine.begin() as connection:
                    new = await record_deliveries(connection, [delivery for delivery, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for delivery, future in batch:
                if not future.done():
                    # The same id twice in one batch: the first is the new one, the second a redelivery.
                    future.set_result(delivery.delivery_id in new)
                    new.discard(delivery.delivery_id)

    def busy(self) -> bool:
        """Whether a delivery arrived within the last :data:`BUSY_WINDOW_S`."""
        return self._clock() - self._last_delivery < BUSY_WINDOW_S

    async def handle(self, request: web.Request) -> web.Response:
        """Verify the signature, store the delivery, answer 202 (200 for a redelivery or a ping); the time
        to a signed delivery's answer is :data:`~kerrigan.metrics.WEBHOOK_ACK`."""
        started = time.perf_counter()
        answer = await self._answer(request)
        if answer.status < 300:
            WEBHOOK_ACK.observe(time.perf_counter() - started)
        return answer

    async def _answer(self, request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_BODY:
            return _error(413, "deliveries are at most 25 MB")
        body = await request.read()
        if not self.secret:
            return _error(503, "KERRIGAN_WEBHOOK_SECRET is not set: deliveries cannot be verified")
        if not verify(self.secret, body, request.headers.get(SIGNATURE_HEADER)):
            return _error(401, f"missing or wrong {SIGNATURE_HEADER} (an HMAC-SHA256 of the body)")
        self._last_delivery = self._clock()  # only signed deliveries make the worker defer
        event = request.headers.get("X-GitHub-Event", "")
        delivery_id = request.headers.get("X-GitHub-Delivery", "")
        if _EVENT.fullmatch(event) is None or _DELIVERY_ID.fullmatch(delivery_id) is None:
            return _error(400, "X-GitHub-Event and X-GitHub-Delivery are required")
        # The request's lines, its access line among them, name the delivery.
        structlog.contextvars.bind_contextvars(delivery_id=delivery_id, github_event=event)
        try:
            payload, action = read_payload(body)
        except PayloadError as exc:
            # GitHub signed it, so it came from GitHub (or whoever holds the secret): answering with an
            # error would only invite a redelivery of the same body. It is recorded as failed, reason and all.
            return await self._refuse(event, delivery_id, body, str(exc))
        if event == "ping":
            return web.json_response({"status": "pong", "zen": payload.get("zen")})
        delivery = NewDelivery(delivery_id, event, action, body.decode("utf-8"), self.database.clock())
        stored = await self._store(delivery)
        if not stored:
            return web.json_response({"status": "already received", "delivery": delivery_id}, status=200)
        self.wake()
        return web.json_response({"status": "accepted", "delivery": delivery_id}, status=202)

    async def _refuse(self, event: str, delivery_id: str, body: bytes, reason: str) -> web.Response:
        log.warning(
            "delivery %s (%s) is not a GitHub payload: %s; recorded as failed", delivery_id, event, reason
        )
        # Enough of the body to see what it was, as text the database takes.
        shown = body[:MAX_KEPT].decode("utf-8", "replace").replace("\x00", "\ufffd")
        if await self._store(NewDelivery(delivery_id, event, None, shown, self.database.clock(), reason)):
            WEBHOOK_DELIVERIES.labels(counted_event(event), "failed").inc()  # no attempt can use it
        return web.json_response({"status": "failed", "delivery": delivery_id, "reason": reason}, status=202)


def read_payload(body: bytes) -> tuple[dict[str, Any], str | None]:
    """A delivery's body as a JSON object, and its ``action``; :class:`PayloadError` for a body that is not a
    GitHub payload (not UTF-8, not JSON, nested deeper than :data:`MAX_DEPTH`, not an object)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PayloadError(f"the body is not UTF-8 (byte {exc.start})") from None
    if nesting_exceeds(text, MAX_DEPTH):
        raise PayloadError(f"the body is nested deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(text)
    except ValueError as exc:  # JSONDecodeError, and integers of more than 4,300 digits
        raise PayloadError(f"the body is not JSON: {exc}") from None
    payload = Payload(data)  # raises for anything but an object
    return data, payload.optional_string("action", max_length=64)


_TOKENS: Final = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


def nesting_exceeds(text: str, limit: int) -> bool:
    """Whether JSON ``text`` nests arrays and objects deeper than ``limit``, found without recursing (and
    without parsing: strings are skipped, brackets counted)."""
    depth = 0
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


class DeliveryWorker:
    """Processes stored deliveries in order, one at a time, until cancelled.

    Each delivery is claimed for ``lease_s`` seconds and the claim renewed every third of that while the
    handler runs. When a renewal finds the claim taken over (it ran out, say while the process stalled, and
    another worker claimed the delivery), the handler is cancelled and nothing more is written for it.
    """

    def __init__(
        self,
        app: GitHubApp,
        router: Router,
        *,
        wake: asyncio.Event | None = None,
        receiver: WebhookReceiver | None = None,
        lease_s: float = 30.0,
        idle_poll_s: float = 5.0,
    ) -> None:
        self.app = app
        self.router = router
        self.lease = timedelta(seconds=lease_s)
        self.idle_poll_s = idle_poll_s
        self._wake = wake or asyncio.Event()
        self.receiver = receiver
        self.processed = 0

    def wake(self) -> None:
        """A delivery was stored: look now rather than at the next poll."""
        self._wake.set()

    async def _yield_to_receiver(self) -> None:
        # Sharing a process with the webhook receiver: answering GitHub at once comes first. While
        # deliveries keep arriving the worker waits (at most MAX_DEFER_S before each delivery, so it never
        # stops) and catches up when they pause.
        waited = 0.0
        while self.receiver is not None and self.receiver.busy() and waited < MAX_DEFER_S:
            await asyncio.sleep(PAUSE_S)
            waited += PAUSE_S

    async def run(self) -> None:
        """Process deliveries forever (pending ones from before a restart first)."""
        while True:
            # Cleared before looking, not after finding nothing: a delivery stored while this worker looks
            # wakes it at once instead of waiting out the idle poll.
            self._wake.clear()
            try:
                await self._yield_to_receiver()
                worked = await self.process_one()
            except Exception:
                log.exception("delivery worker: unexpected failure; going on")
                worked = False
            if not worked:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.idle_poll_s)

    async def process_one(self) -> bool:
        """Process the next due delivery; whether there was one."""
        database = self.app.database
        async with database.writing(), database.sessions() as session, session.begin():
            delivery = await claim_delivery(session, database.clock(), self.lease)
        if delivery is None:
            return False
        with structlog.contextvars.bound_contextvars(
            delivery_id=delivery.delivery_id, github_event=delivery.event
        ):
            outcome = await self._process(delivery)
        if outcome is not None:
            WEBHOOK_DELIVERIES.labels(counted_event(delivery.event), outcome).inc()
        return True

    async def _process(self, delivery: Delivery) -> str | None:
        """Run the delivery's route and record how it went; the outcome to count (None: another worker
        took the delivery over, and counts it)."""
        database = self.app.database
        handler = asyncio.create_task(self._handle(delivery), name=f"kerrigan-delivery-{delivery.pk}")
        try:
            held = await self._hold(delivery.claim, handler)
        finally:
            if not handler.done():  # this worker is being stopped
                await _stop(handler)
        if not held:
            log.warning(
                "delivery %s (%s): its claim was taken over by another worker; stopped processing it",
                delivery.delivery_id,
                delivery.event,
            )
            return None
        try:
            routed = handler.result()
        except PayloadError as exc:
            # The payload lacks a field a route needs: no attempt could succeed, so it is not retried, and
            # the reason says all there is to say (no traceback).
            async with database.writing(), database.sessions() as session, session.begin():
                wrote = await fail_delivery(
                    session, delivery.claim, database.clock(), str(exc), delivery.attempts, permanent=True
                )
            log.warning(
                "delivery %s (%s) failed: %s; not retried%s",
                delivery.delivery_id,
                delivery.event,
                exc,
                "" if wrote else " (and not recorded: its claim was taken over by another worker)",
            )
            return "failed" if wrote else None
        except Exception as exc:
            async with database.writing(), database.sessions() as session, session.begin():
                wrote = await fail_delivery(
                    session, delivery.claim, database.clock(), repr(exc), delivery.attempts
                )
            if not wrote:
                log.warning(
                    "delivery %s (%s) failed on attempt %d after its claim was taken over by another "
                    "worker: not recorded (%r)",
                    delivery.delivery_id,
                    delivery.event,
                    delivery.attempts,
                    exc,
                )
                return None
            log.exception(
                "delivery %s (%s) failed on attempt %d%s",
                delivery.delivery_id,
                delivery.event,
                delivery.attempts,
                "; giving up" if gives_up(delivery.attempts) else "; will retry",
            )
            return "failed" if gives_up(delivery.attempts) else "retrying"
        async with database.writing(), database.sessions() as session, session.begin():
            wrote = await finish_delivery(session, delivery.claim, database.clock())
        if wrote:
            self.processed += 1
            return "processed" if routed else "ignored"
        log.warning(
            "delivery %s (%s) was processed after its claim was taken over by another worker: "
            "not marked done",
            delivery.delivery_id,
            delivery.event,
        )
        return None

    async def _handle(self, delivery: Delivery) -> bool:
        """Route the delivery; whether a route took it."""
        # The handler's task has its own copy of the context: the claim is current for it alone.
        current_claim.set(delivery.claim)
        data, _ = read_payload(delivery.payload.encode("utf-8"))
        repository = data.get("repository")
        if isinstance(repository, dict) and isinstance(repository.get("full_name"), str):
            structlog.contextvars.bind_contextvars(repository=repository["full_name"])
        event = Event(data, event=delivery.event, delivery_id=delivery.delivery_id)
        if self.router.fetch(event):
            await self.router.dispatch(event, self.app)
            return True
        log.info(
            "delivery %s: %s/%s ignored (no router for it)",
            delivery.delivery_id,
            delivery.event,
            delivery.action,
        )
        return False

    async def _hold(self, claim: Claim, handler: asyncio.Task[bool]) -> bool:
        """Renew ``claim`` every third of the lease until ``handler`` is done; ``False`` (and the handler
        cancelled) when a renewal finds the claim taken over."""
        database = self.app.database
        every = self.lease.total_seconds() / 3
        while True:
            done, _ = await asyncio.wait({handler}, timeout=every)
            if done:
                return True
            try:
                async with database.writing(), database.sessions() as session, session.begin():
                    renewed = await renew_claim(session, claim, database.clock(), self.lease)
            except Exception:
                # The claim still holds for the rest of the lease; the next renewal tries again.
                log.exception("delivery %s: renewing its claim failed", claim.pk)
                continue
            if not renewed:
                await _stop(handler)
                return False


async def _stop(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it has ended (whatever it raised is no longer of interest)."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not report it as never retrieved
