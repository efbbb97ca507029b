"""A job whose board's power does not answer (a PDU down for minutes), on a real database, its attempts
ended as the runner agent ends them (accepted, started, then ``power_failed`` before the command: the
agent reports the start before it powers the board): they spend no retry while the power has been silent
less than an hour, at most five of them, so the check run waits for the lab instead of concluding for it;
past either they count as any failure of the lab's."""

from __future__ import annotations

from kerrigan.core.lifecycle import MAX_RETRIES, POWER_FAILED, POWER_WAIT_S
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_automatic_retry import all_jobs, end, queue, run_current, session_row
from tests.integration.dispatch.test_dispatcher import lab
from tests.integration.dispatch.test_recoveries import finish


async def fail_as_agent(
    db: Database,
    dispatcher: Dispatcher,
    clock: FakeClock,
    *,
    outcome: str = POWER_FAILED,
    after_s: float = 10,
) -> None:
    """Lease the queued attempt a board and start it, then end it ``outcome`` ``after_s`` later, as the
    agent does when the board's power (``power_failed``) or boot failed before the command."""
    job = await run_current(db, dispatcher)
    clock.advance(after_s)
    await finish(db, job, 75, outcome, powered_off=())


async def test_a_silent_power_spends_no_retry_and_the_job_runs_when_it_answers(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for _ in range(MAX_RETRIES):  # more than the two retries its policy allows
        await fail_as_agent(db, dispatcher, clock)
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
        await fail_as_agent(db, dispatcher, clock)
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
    await fail_as_agent(db, dispatcher, clock)  # its power silent from here
    await fail_as_agent(db, dispatcher, clock, after_s=POWER_WAIT_S - 10)  # 10 s short of the hour: free
    for _ in range(3):  # from the hour on, each counts: the third ends the task's two retries
        await fail_as_agent(db, dispatcher, clock)
    rows = await all_jobs(db)
    assert [row.state for row in rows] == ["retried"] * 4 + ["failed"]
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "action_required")


async def test_a_boot_failure_between_silent_powers_spends_a_retry(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await queue(db, wait_s=7200)
    dispatcher = Dispatcher(db)
    for outcome in ("boot_failed", POWER_FAILED, "boot_failed", POWER_FAILED, "boot_failed"):
        await fail_as_agent(db, dispatcher, clock, outcome=outcome)
    assert [row.state for row in await all_jobs(db)] == ["retried"] * 4 + ["failed"]
