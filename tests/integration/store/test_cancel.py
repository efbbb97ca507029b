"""store.cancel: a session cancelled whatever its jobs are doing, once, with who and why kept."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.store.cancel import cancel_session
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders

SESSION = "66666666-6666-6666-6666-666666666666"
TASKS = {"smoke": {"labels": {}, "tags": []}, "boot": {"labels": {}, "tags": []}}


async def queued(db: Database, tasks: dict[str, dict[str, object]] = TASKS) -> None:
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, tasks), db.clock())


async def rows(db: Database) -> tuple[SessionRow, list[JobRow]]:
    async with db.sessions() as session:
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        jobs = list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())
        return row, jobs


async def test_queued_jobs_end_at_once_and_the_session_completes_cancelled_naming_who(db: Database) -> None:
    await queued(db)
    async with db.sessions() as session, session.begin():
        done = await cancel_session(session, SESSION, db.clock(), by="hubot", reason="cancelled by hubot")
    assert done is not None
    assert done.changed
    assert len(done.ended) == 2
    row, jobs = await rows(db)
    assert (row.state, row.conclusion) == (SessionState.COMPLETED, "cancelled")
    assert (row.cancelled_by, row.cancel_reason) == ("hubot", "cancelled by hubot")
    assert {job.state for job in jobs} == {JobState.CANCELLED}


async def test_a_running_job_is_asked_to_stop_and_the_session_waits_for_it(db: Database) -> None:
    await queued(db)
    async with db.sessions() as session, session.begin():
        [first, _] = (await session.scalars(select(JobRow).order_by(JobRow.pk))).all()
        first.state, first.started_at, first.device_id = JobState.RUNNING, db.clock(), "modalix-bluebox"
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.state = SessionState.IN_PROGRESS
        version = row.version
    async with db.sessions() as session, session.begin():
        done = await cancel_session(session, SESSION, db.clock(), by="hubot", reason="cancelled by hubot")
    assert done is not None
    assert done.stopping == 1
    assert done.state is SessionState.IN_PROGRESS
    row, jobs = await rows(db)
    assert jobs[0].cancel_requested_at is not None
    assert jobs[0].state == JobState.RUNNING
    assert jobs[1].state == JobState.CANCELLED
    assert row.version > version  # the check run is told


async def test_cancelling_twice_keeps_the_first_reason_and_an_ended_session_is_left_alone(
    db: Database,
) -> None:
    await queued(db)
    async with db.sessions() as session, session.begin():
        await cancel_session(session, SESSION, db.clock(), by=None, reason="superseded by 3f2a1b0")
    async with db.sessions() as session, session.begin():
        again = await cancel_session(session, SESSION, db.clock(), by="hubot", reason="cancelled by hubot")
        missing = await cancel_session(session, "no-such", db.clock(), by="hubot", reason="x")
    assert again is not None
    assert not again.changed
    assert again.state is SessionState.COMPLETED
    assert missing is None
    row, _ = await rows(db)
    assert (row.cancelled_by, row.cancel_reason) == (None, "superseded by 3f2a1b0")


async def test_a_session_without_jobs_completes_cancelled(db: Database) -> None:
    await queued(db, tasks={})
    async with db.sessions() as session, session.begin():
        done = await cancel_session(session, SESSION, db.clock(), by="hubot", reason="cancelled by hubot")
    assert done is not None
    assert done.changed
    row, _ = await rows(db)
    assert (row.state, row.conclusion) == (SessionState.COMPLETED, "cancelled")
