"""Webhook deliveries: stored before they are answered, then processed from the store.

A delivery is claimed for a while (a lease) before it is processed, so a crashed worker's delivery is taken
up again once the lease runs out. Each claim writes a fresh random token (a fencing token): the worker
renews its claim while it processes the delivery, and renewing, finishing and failing it write only where
the row still carries that token, so a worker whose claim ran out and was taken over writes nothing more.
Handlers check the same fence inside their own transactions with :func:`check_fence`.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from kerrigan.store.models import DeliveryRow

MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Claim:
    """A worker's hold on one delivery: the row, and the token its claim wrote there."""

    pk: int
    token: str


@dataclass(frozen=True, slots=True)
class Delivery:
    """A stored webhook delivery, as claimed by a worker."""

    pk: int
    delivery_id: str
    event: str
    action: str | None
    payload: str
    attempts: int
    claim_token: str

    @property
    def claim(self) -> Claim:
        """The claim this delivery was taken under."""
        return Claim(self.pk, self.claim_token)


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery as it arrives."""

    delivery_id: str
    event: str
    action: str | None
    payload: str
    received_at: datetime
    error: str | None = None
    """Why the delivery cannot be processed at all (its body is not a payload): stored as failed, never
    claimed."""


class ClaimLostError(RuntimeError):
    """The delivery's claim ran out and another worker took it: this one must write nothing more for it."""


current_claim: ContextVar[Claim | None] = ContextVar("kerrigan_delivery_claim", default=None)
"""The claim of the delivery being processed: set by the worker in its handler's task, read by
:func:`check_fence`."""


async def record_deliveries(connection: AsyncConnection, deliveries: Sequence[NewDelivery]) -> set[str]:
    """Store deliveries in one statement; the ids that were new (a redelivered id is stored once only).

    This is all the work done before webhooks are answered, so it is one insert, whatever the number of
    deliveries waiting to be stored together.
    """
    if not deliveries:
        return set()
    insert = postgresql_insert if connection.dialect.name == "postgresql" else sqlite_insert
    statement = (
        insert(DeliveryRow)
        .values(
            [
                {
                    "delivery_id": d.delivery_id,
                    "event": d.event,
                    "action": d.action,
                    "payload": d.payload,
                    "received_at": d.received_at,
                    "attempts": 0,
                    "error": d.error,
                    "processed_at": d.received_at if d.error is not None else None,
                }
                for d in deliveries
            ]
        )
        .on_conflict_do_nothing(index_elements=[DeliveryRow.delivery_id])
        .returning(DeliveryRow.delivery_id)
    )
    result = await connection.execute(statement)
    return {str(delivery_id) for delivery_id in result.scalars()}


async def claim_delivery(session: AsyncSession, now: datetime, lease: timedelta) -> Delivery | None:
    """Take the oldest delivery due for processing, for ``lease``, under a fresh claim token; ``None`` when
    none is due. A delivery whose claim ran out (its worker died or stalled) is due again; each claim counts
    as an attempt."""
    due = or_(DeliveryRow.claimed_until.is_(None), DeliveryRow.claimed_until < now)
    ready = or_(DeliveryRow.next_attempt_at.is_(None), DeliveryRow.next_attempt_at <= now)
    for _ in range(3):
        query = (
            select(DeliveryRow)
            .where(DeliveryRow.processed_at.is_(None), due, ready)
            .order_by(DeliveryRow.pk)
            .limit(1)
        )
        if session.get_bind().dialect.name == "postgresql":
            # Workers racing for the oldest row would each lose all but one try: each takes the oldest no
            # other worker is taking right now.
            query = query.with_for_update(skip_locked=True)
        row = await session.scalar(query)
        if row is None:
            return None
        token = secrets.token_hex(16)
        claimed = await session.execute(
            update(DeliveryRow)
            .where(DeliveryRow.pk == row.pk, DeliveryRow.processed_at.is_(None), due)
            .values(claimed_until=now + lease, claim_token=token, attempts=DeliveryRow.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        if claimed.rowcount == 1:  # type: ignore[attr-defined]
            return Delivery(
                row.pk, row.delivery_id, row.event, row.action, row.payload, row.attempts + 1, token
            )
    return None


def _held(claim: Claim) -> ColumnElement[bool]:
    return and_(DeliveryRow.pk == claim.pk, DeliveryRow.claim_token == claim.token)


async def renew_claim(session: AsyncSession, claim: Claim, now: datetime, lease: timedelta) -> bool:
    """Extend ``claim`` to ``now + lease``; ``False`` when it is no longer this worker's (taken over)."""
    renewed = await session.execute(
        update(DeliveryRow)
        .where(_held(claim))
        .values(claimed_until=now + lease)
        .execution_options(synchronize_session=False)
    )
    return bool(renewed.rowcount == 1)  # type: ignore[attr-defined]


async def finish_delivery(session: AsyncSession, claim: Claim, at: datetime) -> bool:
    """Mark a delivery processed, if ``claim`` is still held; whether it wrote."""
    finished = await session.execute(
        update(DeliveryRow)
        .where(_held(claim))
        .values(processed_at=at, claimed_until=None, claim_token=None, error=None)
        .execution_options(synchronize_session=False)
    )
    return bool(finished.rowcount == 1)  # type: ignore[attr-defined]


def gives_up(attempts: int) -> bool:
    """Whether a delivery that failed on attempt ``attempts`` is not tried again."""
    return attempts >= MAX_ATTEMPTS


async def fail_delivery(
    session: AsyncSession,
    claim: Claim,
    at: datetime,
    error: str,
    attempts: int,
    *,
    permanent: bool = False,
) -> bool:
    """Record a failed attempt, if ``claim`` is still held; whether it wrote. A failed delivery is retried
    with backoff (2, 4, 8, ... seconds) until :data:`MAX_ATTEMPTS` (see :func:`gives_up`); a ``permanent``
    failure (the payload itself is wrong, so no attempt could succeed) is not retried."""
    values: dict[str, object] = {"error": error[:4000], "claimed_until": None, "claim_token": None}
    if permanent or gives_up(attempts):
        values["processed_at"] = at
    else:
        values["next_attempt_at"] = at + timedelta(seconds=2**attempts)
    failed = await session.execute(
        update(DeliveryRow).where(_held(claim)).values(**values).execution_options(synchronize_session=False)
    )
    return bool(failed.rowcount == 1)  # type: ignore[attr-defined]


async def check_fence(session: AsyncSession) -> None:
    """Raise :class:`ClaimLostError` unless the delivery being processed (:data:`current_claim`) is still
    claimed by this worker; nothing when no delivery is being processed.

    It holds until the caller's transaction ends: on PostgreSQL the row is locked (``FOR UPDATE``), and on
    SQLite the check is a write, which takes the database's one write lock. A takeover therefore cannot
    commit between the check and the caller's commit. Call it in the transaction whose writes must not
    happen once the claim is lost (the one that creates a delivery's sessions, say).
    """
    claim = current_claim.get()
    if claim is None:
        return
    if session.get_bind().dialect.name == "postgresql":
        token = await session.scalar(
            select(DeliveryRow.claim_token).where(DeliveryRow.pk == claim.pk).with_for_update()
        )
        held = token == claim.token
    else:
        touched = await session.execute(
            update(DeliveryRow)
            .where(_held(claim))
            .values(claim_token=DeliveryRow.claim_token)
            .execution_options(synchronize_session=False)
        )
        held = touched.rowcount == 1  # type: ignore[attr-defined]
    if not held:
        raise ClaimLostError(f"the claim of delivery {claim.pk} was taken over by another worker")


async def pending_count(session: AsyncSession) -> int:
    """How many deliveries wait to be processed."""
    count = await session.scalar(
        select(func.count()).select_from(DeliveryRow).where(DeliveryRow.processed_at.is_(None))
    )
    return int(count or 0)
