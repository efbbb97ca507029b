"""The delivery worker: stored deliveries processed one at a time, in order, from the store.

A worker claims a delivery (a claim in the database, renewed while it works), routes it, and marks it done,
so a crash or restart resumes what was pending and nothing is lost or done twice. A payload that lacks a
field a route needs fails with :class:`~kerrigan.github.payload.PayloadError` and is not retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta
from typing import Any, Final

import structlog
from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import PayloadError
from kerrigan.github.webhooks import WebhookReceiver, counted_event, read_payload
from kerrigan.metrics import WEBHOOK_DELIVERIES
from kerrigan.store.deliveries import (
    Claim,
    Delivery,
    claim_delivery,
    current_claim,
    fail_delivery,
    finish_delivery,
    gives_up,
    renew_claim,
)

log = logging.getLogger(__name__)

# Sharing a process with the receiver, the worker pauses this long at a time while deliveries arrive, at
# most MAX_DEFER_S before each delivery.
PAUSE_S: Final = 0.02
MAX_DEFER_S: Final = 1.0


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
