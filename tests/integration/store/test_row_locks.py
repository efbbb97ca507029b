"""Row locks in one order, and a unit of work done again when the database aborts it (store.row_locks,
store.retrying).

On PostgreSQL two transactions really interleave: a runner's call that holds its job and then settles the
job's session, and a newer push cancelling that session meanwhile, must both commit (the cancel waits for
the job, not the runner for the session); and two units of work taking two rows in opposite orders deadlock,
and the one PostgreSQL aborts is done again and commits.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.store.cancel import cancel_session
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.retrying import in_transaction, retryable, sqlstate
from kerrigan.store.sessions import create_session
from kerrigan.store.transitions import settle_session
from kerrigan.testing import builders

OLDER = "77777777-7777-7777-7777-777777777777"
OTHER = "88888888-8888-8888-8888-888888888888"
TASKS = {"smoke": {"labels": {}, "tags": []}, "boot": {"labels": {}, "tags": []}}


class _DriverError(Exception):
    """What a driver raises: its SQLSTATE as asyncpg's errors carry it."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.sqlstate = code


def aborted(code: str) -> DBAPIError:
    return DBAPIError("UPDATE sessions ...", {}, _DriverError(code))


def postgresql_only(db: Database) -> None:
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite takes one writer at a time: no two transactions interleave there")


async def sessions(db: Database, *ids: str) -> list[int]:
    keys = []
    async with db.sessions() as session, session.begin():
        for session_id in ids:
            keys.append((await create_session(session, builders.session(session_id, TASKS), db.clock())).id)
    async with db.sessions() as session:
        rows = await session.scalars(
            select(SessionRow.pk).where(SessionRow.id.in_(keys)).order_by(SessionRow.pk)
        )
        return list(rows.all())


async def waiting_for_a_lock(db: Database, timeout: float = 10.0) -> None:
    """Until another connection of the database waits for a row lock."""
    deadline = time.monotonic() + timeout
    while True:
        async with db.sessions() as session:
            waiting = await session.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                )
            )
        if waiting:
            return
        assert time.monotonic() < deadline, "nobody waited for a lock"
        await asyncio.sleep(0.02)


def test_the_sqlstate_is_read_through_sqlalchemys_wrapper_and_only_aborts_are_retryable() -> None:
    assert sqlstate(aborted("40P01")) == "40P01"
    assert retryable(aborted("40P01"))
    assert retryable(aborted("40001"))
    assert not retryable(aborted("23505"))  # a unique violation: doing it again fails again
    assert not retryable(_DriverError("40P01"))  # not through the database's wrapper: not ours to judge
    assert sqlstate(ValueError("no code")) is None


async def test_a_unit_aborted_for_a_deadlock_is_done_again_in_a_fresh_transaction(db: Database) -> None:
    [pk] = await sessions(db, OLDER)
    tries = 0

    async def work(session: AsyncSession) -> int:
        nonlocal tries
        tries += 1
        row = await session.get(SessionRow, pk)
        assert row is not None
        row.cancel_reason = f"try {tries}"
        await session.flush()
        if tries == 1:
            raise aborted("40P01")
        return tries

    assert await in_transaction(db, work, what="test") == 2
    async with db.sessions() as session:
        assert await session.scalar(select(SessionRow.cancel_reason).where(SessionRow.pk == pk)) == "try 2"


async def test_other_errors_and_the_last_abort_are_raised(db: Database) -> None:
    tries = 0

    async def duplicate(session: AsyncSession) -> None:
        nonlocal tries
        tries += 1
        raise IntegrityError("INSERT ...", {}, _DriverError("23505"))

    with pytest.raises(IntegrityError):
        await in_transaction(db, duplicate, what="test")
    assert tries == 1

    async def always(session: AsyncSession) -> None:
        nonlocal tries
        tries += 1
        raise aborted("40001")

    tries = 0
    with pytest.raises(DBAPIError):
        await in_transaction(db, always, what="test", attempts=3)
    assert tries == 3


async def test_a_runner_settling_its_session_and_a_newer_push_cancelling_it_both_commit(
    db: Database,
) -> None:
    postgresql_only(db)
    [pk] = await sessions(db, OLDER)
    async with db.sessions() as session, session.begin():
        first = await session.scalar(select(JobRow).where(JobRow.session_pk == pk).order_by(JobRow.pk))
        assert first is not None
        first.state, first.device_id = JobState.LEASED, "modalix-bluebox"
        job_pk = first.pk
    held = asyncio.Event()
    go_on = asyncio.Event()

    async def runner() -> None:
        # A runner's call: its job first (store.jobs.owned_job), then the job's session (settle_session).
        async with db.sessions() as session, session.begin():
            job = await session.get(JobRow, job_pk, with_for_update={"key_share": True})
            assert job is not None
            held.set()
            await go_on.wait()
            job.detail = "accepted"
            await settle_session(session, pk, db.clock())

    async def supersede() -> Any:
        await held.wait()
        async with db.sessions() as session, session.begin():
            return await cancel_session(session, OLDER, db.clock(), by=None, reason="superseded by 3f2a1b0")

    running = asyncio.gather(runner(), supersede())
    await held.wait()
    await waiting_for_a_lock(db)  # the cancel waits for the runner's job
    go_on.set()
    _, cancelled = await asyncio.wait_for(running, 30)
    assert cancelled is not None
    assert cancelled.changed
    async with db.sessions() as session:
        row = await session.scalar(select(SessionRow).where(SessionRow.pk == pk))
        states = set((await session.scalars(select(JobRow.state).where(JobRow.session_pk == pk))).all())
    assert row is not None
    assert (row.state, row.conclusion) == (SessionState.COMPLETED, "cancelled")
    assert states == {JobState.CANCELLED}


async def test_two_units_deadlocking_each_other_both_commit_one_done_twice(db: Database) -> None:
    postgresql_only(db)
    one, two = await sessions(db, OLDER, OTHER)
    both_hold = asyncio.Barrier(2)
    tries: list[str] = []

    def unit(name: str, order: tuple[int, int]) -> Any:
        async def work(session: AsyncSession) -> str:
            tries.append(name)
            first = await session.scalar(
                select(SessionRow).where(SessionRow.pk == order[0]).with_for_update(key_share=True)
            )
            assert first is not None
            first.cancel_reason = name
            if tries.count(name) == 1:
                await both_hold.wait()  # the first tries: each holds its first row, then wants the other's
            second = await session.scalar(
                select(SessionRow).where(SessionRow.pk == order[1]).with_for_update(key_share=True)
            )
            assert second is not None
            second.cancel_reason = name
            return name

        return work

    done = await asyncio.wait_for(
        asyncio.gather(
            in_transaction(db, unit("a", (one, two)), what="a"),
            in_transaction(db, unit("b", (two, one)), what="b"),
        ),
        60,
    )
    assert done == ["a", "b"]
    assert sorted(tries) in (["a", "a", "b"], ["a", "b", "b"])  # the deadlock's victim ran again
