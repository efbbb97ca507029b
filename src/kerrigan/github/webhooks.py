"""``POST /webhooks/github``: verify, store, answer 202; the delivery worker
(:mod:`kerrigan.github.delivery_worker`) processes it from the store.

The answer never waits for GitHub or the inventory: a valid delivery is stored and answered at once. A
repeated ``X-GitHub-Delivery`` is answered 200 and not stored again.

A signed body that is not a GitHub payload (not UTF-8, not JSON, nested deeper than :data:`MAX_DEPTH`, not
an object) is answered 202 and stored as failed with the reason; a payload that lacks a field a route needs
fails in the worker with :class:`~kerrigan.github.payload.PayloadError`. Neither is retried.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable
from typing import Any, Final

import structlog
from aiohttp import web

from kerrigan.github.payload import Payload, PayloadError
from kerrigan.metrics import WEBHOOK_ACK, WEBHOOK_DELIVERIES
from kerrigan.store.database import Database
from kerrigan.store.deliveries import (
    NewDelivery,
    record_deliveries,
)

log = logging.getLogger(__name__)

SIGNATURE_HEADER: Final = "X-Hub-Signature-256"
MAX_BODY: Final = 25 * 1024 * 1024  # GitHub caps payloads at 25 MB
BUSY_WINDOW_S: Final = 0.05
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
