"""A job whose board's power does not answer (a PDU down for minutes), on a real database, its attempts
ended as the runner agent ends them (accepted, started, then ``power_failed`` before the command: the
agent reports the start before it powers the board): they spend no retry while the power has been silent
less than an hour, at most five of them, so the check run waits for the lab instead of concluding for it;
past either they count as any failure of the lab's."""

from __future__ import annotations

from kerrigan.core.lifecycle import MAX_RETRIES, POWER_FAILED, POWER_WAIT_S
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_automatic_retry import all_jobs, end, queue, run_current, session_row
from tests.integration.dispatch.test_dispatcher import lab


async def power_silent(db: Database, dispatcher: Dispatcher, clock: FakeClock, *, after_s: float) -> None:
    """Lease the queued attempt a board and start it, whose power then does not answer."""
    job = await run_current(db, dispatcher)
    assert job.host is not None
    clock.advance(after_s)
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


async def test_a_silent_power_spends_no_retry_and_the_job_runs_when_it_answers(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for _ in range(MAX_RETRIES):  # more than the two retries its policy allows
        await power_silent(db, dispatcher, clock, after_s=10)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried"] * MAX_RETRIES + ["queued"]
    assert (await session_row(db)).state != "completed"  # the check run waits for the lab
    passed = await run_current(db, dispatcher)  # the PDU answers again
    assert passed.attempt == MAX_RETRIES + 1
    await end(db, passed, 0)
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "success")


async def test_past_five_free_attempts_a_silent_power_counts(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for _ in range(MAX_RETRIES + 3):  # the free ones, then the policy's two retries, then the end
        await power_silent(db, dispatcher, clock, after_s=10)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried"] * (MAX_RETRIES + 2) + ["failed"]
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "action_required")  # the lab's, never the code's


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
    assert (row.state, row.conclusion) == ("completed", "action_required")


async def test_a_boot_failure_between_silent_powers_spends_a_retry(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for outcome in ("boot_failed", POWER_FAILED, "boot_failed", POWER_FAILED, "boot_failed"):
        job = await run_current(db, dispatcher)
        assert job.host is not None
        clock.advance(10)
        async with db.sessions() as session, session.begin():
            await jobs.finish(
                session,
                str(job.pk),
                job.host,
                db.clock(),
                exit_status=75,
                accounting=None,
                outcome=outcome,
                powered_off=(),
                power_unknown=(),
            )
    assert [row.state for row in await all_jobs(db)] == ["retried"] * 4 + ["failed"]
