"""A job's ``power`` (the task key: ``cycle`` or ``keep``) as the store writes it and reads it back: one
column, stored by value and checked by the database."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import IntegrityError

from kerrigan.core.manifest import PowerChoice
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow
from kerrigan.store.sessions import create_session, get_session
from kerrigan.testing import builders

SESSION = "88888888-8888-8888-8888-888888888888"


async def test_a_jobs_power_is_stored_by_value_and_read_back(db: Database) -> None:
    new = builders.session(SESSION, ("flash", "soak"))
    flash, soak = new.jobs
    new = dataclasses.replace(
        new,
        jobs=(flash, dataclasses.replace(soak, spec=dataclasses.replace(soak.spec, power=PowerChoice.KEEP))),
    )
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())
    async with db.sessions() as session:
        stored = await get_session(session, SESSION)
        raw = (await session.execute(text("SELECT task_id, power FROM jobs ORDER BY task_id"))).all()
    assert {job.spec.task_id: job.spec.power for job in stored.jobs} == {
        "flash": PowerChoice.CYCLE,
        "soak": PowerChoice.KEEP,
    }
    assert [tuple(row) for row in raw] == [("flash", "cycle"), ("soak", "keep")]


async def test_the_database_refuses_a_power_it_does_not_know(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ("soak",)), db.clock())
    with pytest.raises(IntegrityError):
        async with db.sessions() as session, session.begin():
            await session.execute(text("UPDATE jobs SET power = 'reboot'"))
    async with db.sessions() as session:
        assert await session.scalar(select(JobRow.power)) is PowerChoice.CYCLE
