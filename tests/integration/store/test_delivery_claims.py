"""Delivery claims: a lease with a fencing token, so a worker whose claim was taken over writes nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import async_sessionmaker

from kerrigan.store.database import Database, create_engine
from kerrigan.store.deliveries import (
    MAX_ATTEMPTS,
    Claim,
    ClaimLostError,
    Delivery,
    NewDelivery,
    check_fence,
    claim_delivery,
    current_claim,
    fail_delivery,
    finish_delivery,
    record_deliveries,
    renew_claim,
)
from kerrigan.store.models import DeliveryRow
from kerrigan.testing.clock import FakeClock

LEASE = timedelta(seconds=30)


async def store(db: Database, count: int = 1) -> None:
    async with db.engine.begin() as connection:
        await record_deliveries(
            connection,
            [NewDelivery(f"delivery-{n}", "push", None, "{}", db.clock()) for n in range(count)],
        )


async def claim(db: Database, lease: timedelta = LEASE) -> Delivery | None:
    async with db.sessions() as session, session.begin():
        return await claim_delivery(session, db.clock(), lease)


async def claimed(db: Database, lease: timedelta = LEASE) -> Delivery:
    delivery = await claim(db, lease)
    assert delivery is not None
    return delivery


async def taken_over(db: Database, clock: FakeClock) -> tuple[Delivery, Delivery]:
    """A delivery claimed, left to run out, and claimed again: (the first claim, the second)."""
    await store(db)
    first = await claimed(db)
    clock.advance(LEASE.total_seconds() + 1)
    second = await claimed(db)
    return first, second


async def row(db: Database) -> DeliveryRow:
    async with db.sessions() as session:
        [only] = (await session.scalars(select(DeliveryRow))).all()
        return only


@contextlib.contextmanager
def processing(claim: Claim) -> Iterator[None]:
    """As the worker does around a handler: ``claim`` is the one being processed."""
    token = current_claim.set(claim)
    try:
        yield
    finally:
        current_claim.reset(token)


async def test_a_claim_writes_a_fresh_token_each_time_and_counts_an_attempt(
    db: Database, clock: FakeClock
) -> None:
    first, second = await taken_over(db, clock)
    assert first.pk == second.pk
    assert (first.attempts, second.attempts) == (1, 2)
    assert len(first.claim_token) == 32
    assert first.claim_token != second.claim_token
    assert (await row(db)).claim_token == second.claim_token


async def test_a_claimed_delivery_is_taken_up_again_once_its_lease_has_run_out_and_not_before(
    db: Database, clock: FakeClock
) -> None:
    # The claim of a worker that died: claimed, never renewed.
    await store(db)
    await claimed(db)
    clock.advance(LEASE.total_seconds())  # the last instant of the lease
    assert await claim(db) is None
    clock.advance(0.001)
    again = await claimed(db)
    assert (again.delivery_id, again.attempts) == ("delivery-0", 2)


async def test_renewing_a_held_claim_keeps_it_past_its_first_lease(db: Database, clock: FakeClock) -> None:
    await store(db)
    delivery = await claimed(db)
    for _ in range(3):
        clock.advance(LEASE.total_seconds() * 2 / 3)
        async with db.sessions() as session, session.begin():
            assert await renew_claim(session, delivery.claim, clock(), LEASE) is True
    assert (await row(db)).claimed_until == clock() + LEASE
    clock.advance(
        LEASE.total_seconds() * 2 / 3
    )  # two leases since the claim, two thirds of one since renewal
    assert await claim(db) is None


async def test_renewing_a_claim_that_was_taken_over_fails_and_leaves_the_new_claim_alone(
    db: Database, clock: FakeClock
) -> None:
    first, second = await taken_over(db, clock)
    before = await row(db)
    clock.advance(1)
    async with db.sessions() as session, session.begin():
        assert await renew_claim(session, first.claim, clock(), LEASE) is False
    after = await row(db)
    assert (after.claim_token, after.claimed_until) == (second.claim_token, before.claimed_until)


async def test_finishing_under_a_held_claim_marks_the_delivery_processed(db: Database) -> None:
    await store(db)
    delivery = await claimed(db)
    async with db.sessions() as session, session.begin():
        assert await finish_delivery(session, delivery.claim, db.clock()) is True
    done = await row(db)
    assert (done.processed_at, done.claimed_until, done.claim_token) == (db.clock(), None, None)


async def test_failing_under_a_held_claim_records_the_error_and_the_backoff(db: Database) -> None:
    await store(db)
    delivery = await claimed(db)
    async with db.sessions() as session, session.begin():
        assert await fail_delivery(session, delivery.claim, db.clock(), "GitHub answered 502", 1) is True
    failed = await row(db)
    assert (failed.error, failed.processed_at, failed.claim_token) == ("GitHub answered 502", None, None)
    assert failed.next_attempt_at == db.clock() + timedelta(seconds=2)


async def test_failing_on_the_last_attempt_gives_up(db: Database) -> None:
    await store(db)
    delivery = await claimed(db)
    async with db.sessions() as session, session.begin():
        assert await fail_delivery(session, delivery.claim, db.clock(), "boom", MAX_ATTEMPTS) is True
    given_up = await row(db)
    assert (given_up.processed_at, given_up.error) == (db.clock(), "boom")


@pytest.mark.parametrize("outcome", ["finish", "fail"])
async def test_a_worker_whose_claim_was_taken_over_writes_nothing_when_it_finishes_or_fails(
    db: Database, clock: FakeClock, outcome: str
) -> None:
    first, second = await taken_over(db, clock)
    before = await row(db)
    async with db.sessions() as session, session.begin():
        if outcome == "finish":
            wrote = await finish_delivery(session, first.claim, clock())
        else:
            wrote = await fail_delivery(session, first.claim, clock(), "late", first.attempts)
    assert wrote is False
    after = await row(db)
    assert (after.processed_at, after.error, after.next_attempt_at) == (None, None, None)
    assert (after.claim_token, after.claimed_until, after.attempts) == (
        second.claim_token,
        before.claimed_until,
        2,
    )


async def test_the_fence_passes_with_no_delivery_being_processed(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await check_fence(session)  # no claim is current, and there is no delivery at all


async def test_the_fence_passes_while_the_claim_is_held(db: Database) -> None:
    await store(db)
    delivery = await claimed(db)
    with processing(delivery.claim):
        async with db.sessions() as session, session.begin():
            await check_fence(session)


async def test_the_fence_raises_once_the_claim_was_taken_over(db: Database, clock: FakeClock) -> None:
    first, _ = await taken_over(db, clock)
    with processing(first.claim), pytest.raises(ClaimLostError):
        async with db.sessions() as session, session.begin():
            await check_fence(session)


async def test_the_fence_raises_once_the_delivery_was_finished(db: Database) -> None:
    await store(db)
    delivery = await claimed(db)
    async with db.sessions() as session, session.begin():
        await finish_delivery(session, delivery.claim, db.clock())
    with processing(delivery.claim), pytest.raises(ClaimLostError):
        async with db.sessions() as session, session.begin():
            await check_fence(session)


async def test_the_fence_holds_off_a_takeover_until_its_transaction_ends(
    db: Database, clock: FakeClock
) -> None:
    await store(db)
    delivery = await claimed(db)
    clock.advance(LEASE.total_seconds() + 1)  # the claim ran out, but nobody has taken it yet
    # The other worker's connections do not wait for locks: a takeover the fence holds off fails at once.
    other = create_engine(db.engine.url.render_as_string(hide_password=False))
    other_sessions = async_sessionmaker(other, expire_on_commit=False)
    no_wait = (
        "SET lock_timeout = '100ms'" if other.dialect.name == "postgresql" else "PRAGMA busy_timeout = 0"
    )
    try:
        with processing(delivery.claim):
            async with db.sessions() as session, session.begin():
                await check_fence(session)
                async with other_sessions() as takeover:
                    await takeover.execute(text(no_wait))
                    if other.dialect.name == "postgresql":
                        # Workers claim FOR UPDATE SKIP LOCKED: the fenced row is passed over, not taken.
                        assert await claim_delivery(takeover, clock(), LEASE) is None
                    else:
                        with pytest.raises(DBAPIError):  # SQLite's one writer: the takeover cannot write
                            await claim_delivery(takeover, clock(), LEASE)
                    await takeover.rollback()
        # The fenced transaction has ended: now the takeover goes through.
        async with other_sessions() as takeover, takeover.begin():
            second = await claim_delivery(takeover, clock(), LEASE)
        assert second is not None
        assert second.claim_token != delivery.claim_token
    finally:
        await other.dispose()
