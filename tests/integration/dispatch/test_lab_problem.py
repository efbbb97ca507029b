"""Issue 28, DESIGN.md "A lab problem is not a code failure", on a real database: a job its queue-wait
budget ends while its boards are in maintenance or on an offline runner host keeps what it waited on, in
the diagnostics' words, and its session ends with the lab's conclusion (``KERRIGAN_LAB_CONCLUSION``)."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import Conclusion
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.inventory import set_state
from kerrigan.store.models import JobRow, RunnerHostRow, SessionRow
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab, queue

SESSION = "28282828-2828-2828-2828-282828282828"


async def _boards_out_of_reach(db: Database, clock: FakeClock) -> None:
    """modalix-bluebox in maintenance by hubot, modalix-redbox's runner host lab-a-02 offline: the only two
    devices the task matches, neither gone for good."""
    await lab(db)
    async with db.sessions() as session, session.begin():
        await set_state(
            session,
            "modalix-bluebox",
            DeviceState.MAINTENANCE,
            "reflashing",
            until=None,
            change=Change("hubot", clock()),
        )
        host = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == "lab-a-02"))
        assert host is not None
        host.online = False


async def _limit(db: Database, seconds: int) -> None:
    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.queue_wait_limit_s = seconds


async def _run_out_of_budget(db: Database, clock: FakeClock) -> tuple[JobRow, SessionRow]:
    await _boards_out_of_reach(db, clock)
    await queue(db, SESSION, {"smoke": SOM_UART})
    await _limit(db, 300)
    dispatcher = Dispatcher(db)
    assert (await dispatcher.dispatch_once()).granted == ()
    clock.advance(301)
    [withdrawn] = (await dispatcher.dispatch_once()).withdrawn
    async with db.sessions() as session:
        job = await session.get(JobRow, withdrawn)
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
    assert job is not None
    assert row is not None
    return job, row


async def test_a_job_out_of_queue_wait_keeps_every_reason_it_waited(db: Database, clock: FakeClock) -> None:
    since = clock().strftime("%Y-%m-%d %H:%M")
    job, _ = await _run_out_of_budget(db, clock)
    assert (job.state, job.reason) == ("refused_before_start", "queue_wait_exceeded")
    assert job.detail is not None
    assert job.detail.startswith("waited 301 s: ")
    assert f"modalix-bluebox device in maintenance since {since} by hubot: reflashing" in job.detail
    assert "modalix-redbox runner host lab-a-02 offline" in job.detail


async def test_its_session_ends_with_the_labs_conclusion_not_timed_out(
    db: Database, clock: FakeClock
) -> None:
    _, row = await _run_out_of_budget(db, clock)
    assert (row.state, row.conclusion) == ("completed", Conclusion.ACTION_REQUIRED.value)


async def test_a_lab_that_chose_neutral_gets_neutral(
    db: Database, database_url: str, clock: FakeClock
) -> None:
    # The same (emptied) database, opened as a server with KERRIGAN_LAB_CONCLUSION=neutral opens it.
    neutral = Database.connect(database_url, clock, lab_conclusion=Conclusion.NEUTRAL)
    try:
        _, row = await _run_out_of_budget(neutral, clock)
    finally:
        await neutral.close()
    assert row.conclusion == Conclusion.NEUTRAL.value
