"""Job transitions in the store: refused where the state machine refuses them, written with their session's
new state and check-run version, and safe when two jobs of one session end at once."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from kerrigan.core.lifecycle import JobState, SessionState, TransitionError
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session, get_session
from kerrigan.store.transitions import VISIBLE, move_job, settle_session
from kerrigan.testing import builders

SESSION = "55555555-5555-5555-5555-555555555555"


async def stored(db: Database, tasks: tuple[str, ...] = ("smoke", "boot")) -> int:
    async with db.sessions() as session, session.begin():
        created = await create_session(session, builders.session(SESSION, tasks), db.clock())
        row = await session.scalar(select(SessionRow).where(SessionRow.id == created.id))
        assert row is not None
        return row.pk


async def jobs_of(db: Database) -> dict[str, JobRow]:
    async with db.sessions() as session:
        return {job.task_id: job for job in (await session.scalars(select(JobRow))).all()}


async def walk(db: Database, task: str, *states: JobState, started: bool = False) -> None:
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow).where(JobRow.task_id == task))
        assert job is not None
        for state in states:
            await move_job(session, job, state, db.clock())
        if started:
            job.started_at = db.clock()
        await settle_session(session, job.session_pk, db.clock(), news=bool(VISIBLE & set(states)))


async def test_a_transition_the_table_refuses_raises_and_writes_nothing(db: Database) -> None:
    await stored(db)
    await walk(db, "smoke", JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING, started=True)
    await walk(db, "smoke", JobState.SUCCEEDED)
    with pytest.raises(TransitionError, match="a job cannot go from succeeded to running"):
        await walk(db, "smoke", JobState.RUNNING)
    assert (await jobs_of(db))["smoke"].state == JobState.SUCCEEDED


async def test_a_jobs_end_and_its_sessions_new_state_are_written_together(db: Database) -> None:
    pk = await stored(db, ("smoke",))
    await walk(db, "smoke", JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING, started=True)
    async with db.sessions() as session:
        running = await get_session(session, SESSION)
    assert running.state is SessionState.IN_PROGRESS

    async def fail_after_both_writes() -> None:
        async with db.sessions() as session, session.begin():
            job = await session.scalar(select(JobRow).where(JobRow.task_id == "smoke"))
            assert job is not None
            await move_job(session, job, JobState.FAILED, db.clock(), exit_status=3)
            await settle_session(session, pk, db.clock())
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await fail_after_both_writes()
    async with db.sessions() as session:
        after = await get_session(session, SESSION)
    assert (after.state, after.jobs[0].state, after.version) == (
        SessionState.IN_PROGRESS,
        JobState.RUNNING,
        running.version,
    )


async def test_each_visible_change_records_a_check_run_version_due_at_once(db: Database) -> None:
    pk = await stored(db, ("smoke",))
    await walk(db, "smoke", JobState.LEASED, JobState.ACCEPTED)  # not news on the check run
    async with db.sessions() as session:
        row = await session.get(SessionRow, pk)
        assert row is not None
        assert (row.version, row.sync_due_at) == (0, None)
    db.clock.advance(5)  # type: ignore[attr-defined]
    await walk(db, "smoke", JobState.RUNNING, started=True)
    async with db.sessions() as session:
        row = await session.get(SessionRow, pk)
        assert row is not None
        assert (row.version, row.sync_due_at, row.version_at) == (1, db.clock(), db.clock())


async def test_two_jobs_of_one_session_ending_at_once_complete_it(db: Database) -> None:
    # Each end reads the other's: the session row is locked before its jobs are read (PostgreSQL), and
    # SQLite has one writer at a time.
    pk = await stored(db)
    for task in ("smoke", "boot"):
        await walk(db, task, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING, started=True)

    async def end(task: str, *, wait_before_s: float, hold_s: float) -> None:
        await asyncio.sleep(wait_before_s)
        async with db.sessions() as session, session.begin():
            job = await session.scalar(select(JobRow).where(JobRow.task_id == task).with_for_update())
            assert job is not None
            await move_job(session, job, JobState.SUCCEEDED, db.clock(), exit_status=0)
            await settle_session(session, pk, db.clock())
            await asyncio.sleep(hold_s)  # the first settles, then holds its transaction open a while

    # The second ends its job while the first has settled but not committed: it must wait for the first
    # and read its end, or both see the other job still running and the session never completes.
    await asyncio.gather(end("smoke", wait_before_s=0, hold_s=0.3), end("boot", wait_before_s=0.1, hold_s=0))
    async with db.sessions() as session:
        done = await get_session(session, SESSION)
    assert done.state is SessionState.COMPLETED
    assert done.conclusion is not None
    assert done.conclusion.value == "success"
