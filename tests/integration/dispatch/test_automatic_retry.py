"""Automatic retry on a real database: an infrastructure failure gets a new attempt on another device, a
test failure only when the manifest lists its exit status, and each budget has its limit."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.cancel import cancel_session
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab

SESSION = "12121212-1212-1212-1212-121212121212"
DEFAULT_RETRY = {"infrastructure": 2, "exit_status": [], "limit": 0}


async def queue(db: Database, retry: dict[str, Any] | None = DEFAULT_RETRY, wait_s: int = 300) -> None:
    resolution: dict[str, Any] = {
        "tasks": [{"id": "smoke", "requested": SOM_UART}],
        "scheduling": {"max_devkits": 1, "strategy": "spread", "queue_wait_limit_s": wait_s},
    }
    # None: a session stored without a policy (before policies were).
    policy = RetryPolicy.from_dict(retry)
    new = builders.session(SESSION, ["smoke"], resolution=resolution, retry=policy)
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())


async def all_jobs(db: Database) -> list[JobRow]:
    async with db.sessions() as session:
        return list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def session_row(db: Database) -> SessionRow:
    async with db.sessions() as session:
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        return row


async def run_current(db: Database, dispatcher: Dispatcher) -> JobRow:
    """Lease the queued attempt a device, and start it there."""
    result = await dispatcher.dispatch_once()
    assert len(result.granted) == 1, result.plan
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow).where(JobRow.state == "leased"))
        assert job is not None
        assert job.host is not None
        await jobs.accept(session, str(job.pk), job.host, db.clock())
        await jobs.start(session, str(job.pk), job.host, db.clock())
        return job


async def lose_runner(db: Database, dispatcher: Dispatcher, clock: FakeClock) -> None:
    clock.advance(61)
    assert len(await dispatcher.expire()) == 1


async def end(db: Database, job: JobRow, exit_status: int) -> None:
    assert job.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.finish(
            session, str(job.pk), job.host, db.clock(), exit_status=exit_status, accounting=None
        )


async def test_a_lost_runners_job_gets_a_second_attempt_avoiding_its_device(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db)
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    await lose_runner(db, dispatcher, clock)
    rows = await all_jobs(db)
    assert [(row.state, row.reason, row.attempt) for row in rows] == [
        ("retried", "runner_lost", 1),
        ("queued", None, 2),
    ]
    assert (rows[0].failure_class, rows[1].retry_of, rows[1].avoid_devices) == (
        "infrastructure",
        first.pk,
        [first.device_id],
    )
    assert (await session_row(db)).state == "in_progress"  # open while a retry is queued
    second = await run_current(db, dispatcher)
    assert second.device_id != first.device_id
    await end(db, second, 0)
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "success")  # the current attempt decides


async def test_when_every_matching_device_failed_the_job_it_takes_one_of_them_again(
    db: Database, clock: FakeClock
) -> None:
    # Fewer devices than attempts: the last attempt avoids them all. Waiting would hold the check run
    # yellow until the queue-wait budget ends it; the failure may have passed, so it goes where it can.
    await lab(db)
    await queue(db, wait_s=120)
    dispatcher = Dispatcher(db)
    tried = []
    for _ in range(2):  # the lab has two devices that match: modalix-bluebox and modalix-redbox
        tried.append((await run_current(db, dispatcher)).device_id)
        await lose_runner(db, dispatcher, clock)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried", "retried", "queued"]
    assert rows[-1].avoid_devices == tried
    assert sorted(tried) == ["modalix-bluebox", "modalix-redbox"]
    third = await run_current(db, dispatcher)
    assert third.attempt == 3
    assert third.device_id in tried
    await end(db, third, 0)
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "success")


async def test_a_test_failure_is_not_retried_unless_its_exit_status_is_listed(db: Database) -> None:
    await lab(db)
    await queue(db)
    job = await run_current(db, Dispatcher(db))
    await end(db, job, 3)
    assert [(row.state, row.failure_class) for row in await all_jobs(db)] == [("failed", "test")]
    assert (await session_row(db)).conclusion == "failure"


async def test_a_listed_exit_status_is_retried_up_to_the_limit(db: Database) -> None:
    await lab(db)
    await queue(db, {"infrastructure": 2, "exit_status": [3], "limit": 1})
    dispatcher = Dispatcher(db)
    await end(db, await run_current(db, dispatcher), 3)
    await end(db, await run_current(db, dispatcher), 3)
    rows = await all_jobs(db)
    assert [(row.state, row.attempt) for row in rows] == [("retried", 1), ("failed", 2)]
    assert rows[1].avoid_devices == [rows[0].device_id]
    assert (await session_row(db)).conclusion == "failure"


async def test_exit_status_75_is_the_devices_failure_and_retried(db: Database) -> None:
    await lab(db)
    await queue(db)
    dispatcher = Dispatcher(db)
    await end(db, await run_current(db, dispatcher), 75)
    rows = await all_jobs(db)
    assert [(row.state, row.reason, row.failure_class) for row in rows] == [
        ("retried", "device_fault", "infrastructure"),
        ("queued", None, None),
    ]


async def test_zero_infrastructure_retries_fail_at_once(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await queue(db, {"infrastructure": 0, "exit_status": [], "limit": 0})
    dispatcher = Dispatcher(db)
    await run_current(db, dispatcher)
    await lose_runner(db, dispatcher, clock)
    assert [row.state for row in await all_jobs(db)] == ["failed"]
    # A lost runner is the lab's failure, not the code's (issue 28): the lab's conclusion, not failure.
    assert (await session_row(db)).conclusion == "action_required"


async def test_a_session_stored_without_a_policy_keeps_failing_as_before(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, retry=None)
    dispatcher = Dispatcher(db)
    await run_current(db, dispatcher)
    await lose_runner(db, dispatcher, clock)
    assert [row.state for row in await all_jobs(db)] == ["failed"]


async def test_a_session_being_cancelled_retries_nothing(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await queue(db)
    dispatcher = Dispatcher(db)
    await run_current(db, dispatcher)
    async with db.sessions() as session, session.begin():
        await cancel_session(session, SESSION, db.clock(), by="hubot", reason="Cancelled by hubot")
    await lose_runner(db, dispatcher, clock)
    assert [row.state for row in await all_jobs(db)] == ["failed"]
    assert (await session_row(db)).state == "completed"
