"""Webhook deliveries: stored before they are answered, then processed from the store.

A delivery is claimed for a while (a lease) before it is processed, so a crashed worker's delivery is taken
up again once the lease runs out, and two workers never process one delivery at the same time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from kerrigan.store.models import DeliveryRow

MAX_ATTEMPTS = 5


@dataclass(frozen=True, slots=True)
class Delivery:
    """A stored webhook delivery."""

    pk: int
    delivery_id: str
    event: str
    action: str | None
    payload: str
    attempts: int


@dataclass(frozen=True, slots=True)
class NewDelivery:
    """A delivery as it arrives."""

    delivery_id: str
    event: str
    action: str | None
    payload: str
    received_at: datetime


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
    """Take the oldest delivery due for processing, for ``lease``; ``None`` when none is due."""
    due = or_(DeliveryRow.claimed_until.is_(None), DeliveryRow.claimed_until < now)
    ready = or_(DeliveryRow.next_attempt_at.is_(None), DeliveryRow.next_attempt_at <= now)
    for _ in range(3):
        row = await session.scalar(
            select(DeliveryRow)
            .where(DeliveryRow.processed_at.is_(None), due, ready)
            .order_by(DeliveryRow.pk)
            .limit(1)
        )
        if row is None:
            return None
        claimed = await session.execute(
            update(DeliveryRow)
            .where(DeliveryRow.pk == row.pk, DeliveryRow.processed_at.is_(None), due)
            .values(claimed_until=now + lease, attempts=DeliveryRow.attempts + 1)
            .execution_options(synchronize_session=False)
        )
        if claimed.rowcount == 1:  # type: ignore[attr-defined]
            return Delivery(row.pk, row.delivery_id, row.event, row.action, row.payload, row.attempts + 1)
    return None


async def finish_delivery(session: AsyncSession, pk: int, at: datetime) -> None:
    """Mark a delivery processed."""
    await session.execute(
        update(DeliveryRow)
        .where(DeliveryRow.pk == pk)
        .values(processed_at=at, claimed_until=None, error=None)
    )


async def fail_delivery(session: AsyncSession, pk: int, at: datetime, error: str, attempts: int) -> bool:
    """Record a failed attempt; retried with backoff until :data:`MAX_ATTEMPTS`. Whether it gives up."""
    give_up = attempts >= MAX_ATTEMPTS
    values: dict[str, object] = {"error": error[:4000], "claimed_until": None}
    if give_up:
        values["processed_at"] = at
    else:
        values["next_attempt_at"] = at + timedelta(seconds=2**attempts)
    await session.execute(update(DeliveryRow).where(DeliveryRow.pk == pk).values(**values))
    return give_up


async def pending_count(session: AsyncSession) -> int:
    """How many deliveries wait to be processed."""
    count = await session.scalar(
        select(func.count()).select_from(DeliveryRow).where(DeliveryRow.processed_at.is_(None))
    )
    return int(count or 0)
