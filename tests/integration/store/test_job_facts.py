"""What a committed transaction tells the metrics: each job's start and end once, each session's conclusion
once; nothing for a transaction that rolls back."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from sqlalchemy import select

from kerrigan.core.lifecycle import JobState
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.store.signals import Fact, JobEnded, JobMoved, JobStarted
from kerrigan.store.transitions import move_job
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock


async def test_a_failed_job_given_another_attempt_is_counted_as_ending_once(
    db: Database, clock: FakeClock
) -> None:
    heard: list[Fact] = []
    db.signals.listen_facts(heard.append)
    session_id = str(uuid.uuid4())
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(session_id, ["boot"]), db.clock())
    async with db.sessions() as session, session.begin():
        pk = await session.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
        job = await session.scalar(select(JobRow).where(JobRow.session_pk == pk))
        assert job is not None
        job.device_id = "modalix-bluebox"
        for state in (JobState.LEASED, JobState.ACCEPTED):
            await move_job(session, job, state, db.clock())
        clock.advance(30)
        await move_job(session, job, JobState.RUNNING, db.clock())
        job.started_at = db.clock()
        clock.advance(100)
        await move_job(session, job, JobState.FAILED, db.clock(), reason="runner_lost")
        await move_job(session, job, JobState.RETRIED, db.clock())  # the same run, given another attempt
    counted = [fact for fact in heard if isinstance(fact, JobStarted | JobEnded)]
    assert counted == [JobStarted(30.0), JobEnded("failed", "infrastructure", ("modalix-bluebox",), 100.0)]
    # The log hears each move, the last one too.
    moves = [(fact.before, fact.after) for fact in heard if isinstance(fact, JobMoved)]
    assert moves == [
        ("queued", "leased"),
        ("leased", "accepted"),
        ("accepted", "running"),
        ("running", "failed"),
        ("failed", "retried"),
    ]


async def test_a_gang_job_counts_its_time_on_every_device_it_held(db: Database, clock: FakeClock) -> None:
    heard: list[Fact] = []
    db.signals.listen_facts(heard.append)
    session_id = str(uuid.uuid4())
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(session_id, ["pair"]), db.clock())
    async with db.sessions() as session, session.begin():
        pk = await session.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
        job = await session.scalar(select(JobRow).where(JobRow.session_pk == pk))
        assert job is not None
        job.device_id = "modalix-bluebox"  # the first role's, as the dispatcher leaves it
        job.devices = [{"role": "dut", "device": "modalix-bluebox"}, {"role": "peer", "device": "davinci-01"}]
        for state in (JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING):
            await move_job(session, job, state, db.clock())
        job.started_at = db.clock()
        clock.advance(45)
        await move_job(session, job, JobState.SUCCEEDED, db.clock(), exit_status=0)
    assert heard[-1] == JobEnded("succeeded", None, ("modalix-bluebox", "davinci-01"), 45.0)


async def test_a_rolled_back_transaction_tells_nothing(db: Database) -> None:
    heard: list[Fact] = []
    db.signals.listen_facts(heard.append)

    async def cancel_then_fail() -> None:
        async with db.sessions() as session, session.begin():
            await create_session(session, builders.session(str(uuid.uuid4()), ["boot"]), db.clock())
            job = await session.get(JobRow, (await session.scalars(select(JobRow.pk))).first())
            assert job is not None
            await move_job(session, job, JobState.CANCELLED, db.clock() + timedelta(seconds=1))
            raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError, match="rolled back"):
        await cancel_then_fail()
    assert heard == []
