"""A job whose board's power does not answer before its command starts (a PDU down for minutes), on a real
database: its attempts spend no retry while the power has been silent less than an hour, so the check run
waits for the lab instead of concluding for it; past the hour they count as any failure of the lab's."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.core.lifecycle import POWER_FAILED, POWER_WAIT_S
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_automatic_retry import all_jobs, end, queue, run_current, session_row
from tests.integration.dispatch.test_dispatcher import lab


async def power_silent(db: Database, dispatcher: Dispatcher, clock: FakeClock, *, after_s: float) -> JobRow:
    """Lease the queued attempt a board, whose power then does not answer: it ends before its command."""
    result = await dispatcher.dispatch_once()
    assert len(result.granted) == 1, result.plan
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow.pk).where(JobRow.state == "leased"))
    clock.advance(after_s)
    async with db.sessions() as session, session.begin():
        row = await session.get(JobRow, job)
        assert row is not None
        assert row.host is not None
        await jobs.accept(session, str(row.pk), row.host, db.clock())
        await jobs.finish(
            session,
            str(row.pk),
            row.host,
            db.clock(),
            exit_status=75,
            accounting=None,
            outcome=POWER_FAILED,
            powered_off=(),
            power_unknown=(),
        )
        return row


async def test_a_silent_power_spends_no_retry_and_the_job_runs_when_it_answers(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for _ in range(5):  # more than the two retries its policy allows
        await power_silent(db, dispatcher, clock, after_s=10)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried"] * 5 + ["queued"]
    assert (await session_row(db)).state != "completed"  # the check run waits for the lab
    passed = await run_current(db, dispatcher)  # the PDU answers again
    assert passed.attempt == 6
    await end(db, passed, 0)
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "success")


async def test_a_power_silent_for_an_hour_counts_as_any_failure_of_the_labs(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    await power_silent(db, dispatcher, clock, after_s=10)  # its power silent from here
    await power_silent(db, dispatcher, clock, after_s=POWER_WAIT_S - 10)  # 10 s short of the hour: free
    for _ in range(3):  # from the hour on, each counts: the third ends the task's two retries
        await power_silent(db, dispatcher, clock, after_s=10)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried"] * 4 + ["failed"]
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "action_required")  # the lab's, never the code's


async def test_a_power_that_fails_after_the_command_started_spends_a_retry(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for _ in range(3):
        job = await run_current(db, dispatcher)
        assert job.host is not None
        async with db.sessions() as session, session.begin():
            await jobs.finish(
                session,
                str(job.pk),
                job.host,
                db.clock(),
                exit_status=75,
                accounting=None,
                outcome=POWER_FAILED,
                powered_off=(),
                power_unknown=(),
            )
    assert [row.state for row in await all_jobs(db)] == ["retried", "retried", "failed"]
