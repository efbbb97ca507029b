"""Delivery workers and their claims: renewed while a handler is slow, fenced once taken over.

Real :class:`DeliveryWorker` objects on the test's database, each with a router of its own whose ``push``
handler is slow or waits for the test. No GitHub is involved: the handlers never call it.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta

import aiohttp
import pytest
from gidgethub.routing import Router
from gidgethub.sansio import Event
from sqlalchemy import select

from kerrigan.config import Settings
from kerrigan.github.delivery_worker import DeliveryWorker
from kerrigan.github.github_app import GitHubApp
from kerrigan.store.database import Database
from kerrigan.store.deliveries import (
    ClaimLostError,
    NewDelivery,
    check_fence,
    pending_count,
    record_deliveries,
)
from kerrigan.store.models import DeliveryRow
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import generate_app_key

PRIVATE_KEY, _ = generate_app_key()

Connect = Callable[[Database], GitHubApp]


@pytest.fixture
async def connect() -> AsyncIterator[Connect]:
    """Make the app a worker hands its handlers, for a database (its GitHub is never called)."""
    settings = Settings(
        github_app_id="4242", github_private_key=PRIVATE_KEY, github_api_url="http://127.0.0.1:9"
    )
    async with aiohttp.ClientSession() as http:
        yield lambda database: GitHubApp.connect(database, settings, http)


class Handler:
    """A ``push`` handler that records each delivery it starts and, before it ends, whether the delivery's
    claim is still this worker's (:func:`check_fence` in a transaction of its own)."""

    def __init__(self, wait: Callable[[str], Awaitable[None]], *, raises: bool = False) -> None:
        self.wait = wait
        self.raises = raises
        self.started: list[str] = []
        self.fences: list[str] = []
        self.cancelled: list[str] = []
        self.entered = asyncio.Event()

    def router(self) -> Router:
        router = Router()

        @router.register("push")
        async def push(event: Event, app: GitHubApp) -> None:
            delivery_id = event.delivery_id
            self.started.append(delivery_id)
            self.entered.set()
            try:
                await self.wait(delivery_id)
            except asyncio.CancelledError:
                self.cancelled.append(delivery_id)
                raise
            try:
                async with app.database.sessions() as session, session.begin():
                    await check_fence(session)
                self.fences.append("held")
            except ClaimLostError:
                self.fences.append("lost")
            if self.raises:
                raise RuntimeError("GitHub answered 502")

        return router


def until(event: asyncio.Event) -> Callable[[str], Awaitable[None]]:
    """Handle each delivery once ``event`` is set."""

    async def wait(_delivery_id: str) -> None:
        await event.wait()

    return wait


async def at_once(_delivery_id: str) -> None:
    """Handle each delivery straight away."""


async def store(db: Database, count: int = 1) -> list[str]:
    ids = [f"delivery-{n:02d}" for n in range(count)]
    async with db.engine.begin() as connection:
        await record_deliveries(connection, [NewDelivery(i, "push", None, "{}", db.clock()) for i in ids])
    return ids


async def rows(db: Database) -> list[DeliveryRow]:
    async with db.sessions() as session:
        return list((await session.scalars(select(DeliveryRow).order_by(DeliveryRow.pk))).all())


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("the condition did not come true before the timeout")
        await asyncio.sleep(0.01)


async def outcome(task: asyncio.Task[bool]) -> bool:
    """What ``task`` returns; a failure rather than a hang if it never ends."""
    done, _ = await asyncio.wait({task}, timeout=10)
    if not done:
        task.cancel()
        raise AssertionError("the worker is still processing the delivery")
    return task.result()


def ahead(db: Database, by: timedelta) -> Database:
    """The same database seen by a replica whose clock is ``by`` ahead: to it, claims made here ran out
    long ago (as if this worker had stalled), whatever this worker renews."""
    return Database(db.engine, db.sessions, FakeClock(db.clock() + by))


async def test_a_claim_is_renewed_while_a_slow_handler_runs_so_another_worker_does_not_take_it(
    db: Database, clock: FakeClock, connect: Connect
) -> None:
    lease_s = 0.3  # renewed every 0.1 s of real time
    release = asyncio.Event()
    slow, other = Handler(until(release)), Handler(until(asyncio.Event()))
    first = DeliveryWorker(connect(db), slow.router(), lease_s=lease_s)
    second = DeliveryWorker(connect(db), other.router(), lease_s=lease_s)
    await store(db)
    processing = asyncio.create_task(first.process_one())
    await slow.entered.wait()

    async def renewed_since(now: datetime) -> bool:
        [row] = await rows(db)
        return row.claimed_until is not None and row.claimed_until >= now + timedelta(seconds=lease_s)

    for _ in range(6):  # four leases in all, each step two thirds of one
        clock.advance(lease_s * 2 / 3)
        await eventually(functools.partial(renewed_since, clock()))
        assert await second.process_one() is False
    release.set()
    assert await outcome(processing) is True
    [row] = await rows(db)
    assert (row.processed_at, row.attempts) == (clock(), 1)
    assert (slow.started, slow.fences, other.started) == (["delivery-00"], ["held"], [])


@pytest.mark.parametrize("raises", [False, True], ids=["finishes", "fails"])
async def test_a_worker_whose_claim_was_taken_over_writes_nothing_and_its_fence_raises(
    db: Database, clock: FakeClock, connect: Connect, caplog: pytest.LogCaptureFixture, raises: bool
) -> None:
    lease_s = 60.0  # no renewal comes due (every 20 s) while the test runs
    late_release, taker_release = asyncio.Event(), asyncio.Event()
    late, taker = Handler(until(late_release), raises=raises), Handler(until(taker_release))
    stalled = DeliveryWorker(connect(db), late.router(), lease_s=lease_s)
    second = DeliveryWorker(connect(db), taker.router(), lease_s=lease_s)
    await store(db)
    stalled_task = asyncio.create_task(stalled.process_one())
    await late.entered.wait()
    clock.advance(lease_s + 1)  # the first worker's claim ran out
    second_task = asyncio.create_task(second.process_one())
    await taker.entered.wait()
    [taken] = await rows(db)

    late_release.set()
    assert await outcome(stalled_task) is True
    [row] = await rows(db)
    assert (row.processed_at, row.error, row.next_attempt_at) == (None, None, None)
    assert (row.claim_token, row.claimed_until, row.attempts) == (taken.claim_token, taken.claimed_until, 2)
    assert late.fences == ["lost"]
    assert stalled.processed == 0
    assert any(
        "taken over" in record.getMessage() for record in caplog.records if record.levelno == logging.WARNING
    )

    taker_release.set()
    assert await outcome(second_task) is True
    [row] = await rows(db)
    assert (row.processed_at, row.error) == (clock(), None)
    assert (taker.fences, second.processed) == (["held"], 1)


async def test_a_worker_stops_its_handler_once_a_renewal_finds_the_claim_taken_over(
    db: Database, connect: Connect
) -> None:
    never, quick = Handler(until(asyncio.Event())), Handler(at_once)
    stalled = DeliveryWorker(connect(db), never.router(), lease_s=0.3)  # renews every 0.1 s
    second = DeliveryWorker(connect(ahead(db, timedelta(hours=1))), quick.router(), lease_s=0.3)
    await store(db)
    stalled_task = asyncio.create_task(stalled.process_one())
    await never.entered.wait()
    assert await second.process_one() is True  # takes the delivery over and processes it
    assert await outcome(stalled_task) is True  # without its handler, which never ends by itself
    assert (never.cancelled, never.fences, stalled.processed) == (["delivery-00"], [], 0)
    [row] = await rows(db)
    assert (row.processed_at is not None, row.attempts, row.error) == (True, 2, None)
    assert (quick.fences, second.processed) == (["held"], 1)


async def test_a_delivery_left_by_a_dead_worker_is_taken_up_once_its_lease_runs_out_and_not_before(
    db: Database, clock: FakeClock, connect: Connect
) -> None:
    lease_s = 3.0
    dying, survivor = Handler(until(asyncio.Event())), Handler(at_once)
    dead = DeliveryWorker(connect(db), dying.router(), lease_s=lease_s)
    second = DeliveryWorker(connect(db), survivor.router(), lease_s=lease_s)
    await store(db)
    dead_task = asyncio.create_task(dead.process_one())
    await dying.entered.wait()
    dead_task.cancel()  # the process is gone: it never renews, finishes or fails the delivery
    with pytest.raises(asyncio.CancelledError):
        await dead_task
    clock.advance(lease_s)
    assert await second.process_one() is False
    clock.advance(0.001)
    assert await second.process_one() is True
    [row] = await rows(db)
    assert (row.processed_at, row.attempts, row.error) == (clock(), 2, None)
    assert (dying.started, survivor.started) == (["delivery-00"], ["delivery-00"])


async def test_two_workers_process_forty_slow_deliveries_each_exactly_once(
    db: Database, connect: Connect
) -> None:
    # Two replicas, each with its own engine, on the wall clock. Every tenth delivery takes longer than a
    # lease: without renewal the other replica would take it over when it runs out.
    lease_s, slow_s = 0.6, 1.0
    url = db.engine.url.render_as_string(hide_password=False)
    replicas = [Database.connect(url), Database.connect(url)]

    async def slowly(delivery_id: str) -> None:
        await asyncio.sleep(slow_s if delivery_id.endswith("0") else 0.005)

    handlers = [Handler(slowly), Handler(slowly)]
    workers = [
        DeliveryWorker(connect(replica), handler.router(), lease_s=lease_s, idle_poll_s=0.02)
        for replica, handler in zip(replicas, handlers, strict=True)
    ]
    ids = await store(db, 40)
    tasks = [asyncio.create_task(worker.run()) for worker in workers]

    def starts() -> collections.Counter[str]:
        return collections.Counter(handlers[0].started + handlers[1].started)

    async def all_processed_or_one_started_twice() -> bool:
        if any(count > 1 for count in starts().values()):
            return True  # fail now (without renewal, the two would take a slow one from each other forever)
        async with db.sessions() as session:
            return await pending_count(session) == 0

    try:
        await eventually(all_processed_or_one_started_twice, timeout=60)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for replica in replicas:
            await replica.close()
    assert starts() == dict.fromkeys(ids, 1)
    assert [(row.attempts, row.error) for row in await rows(db)] == [(1, None)] * 40
    assert workers[0].processed + workers[1].processed == 40
    assert all(handler.started for handler in handlers)  # both took part
