"""Retention: completed sessions past ``KERRIGAN_HISTORY_DAYS`` go with their jobs and output; job output past
``KERRIGAN_OUTPUT_DAYS`` goes and the job stays; running sessions stay however old; batches are small and
repeated until nothing is left; the server applies it by itself once started."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from kerrigan.app import create_app, prune_once
from kerrigan.config import ConfigError, Settings
from kerrigan.core.lifecycle import SessionState
from kerrigan.store.database import Database
from kerrigan.store.models import JobLogRow, JobRow, SessionRow
from kerrigan.store.retention import Pruned, prune_history
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.waiting import wait_until
from tests.integration.api.history_rows import Run, add_session


async def _count(db: Database, model: Any) -> int:
    async with db.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def _ids(db: Database) -> set[str]:
    async with db.sessions() as session:
        return set((await session.scalars(select(SessionRow.id))).all())


async def _seed(db: Database, clock: FakeClock) -> dict[str, str]:
    now = clock()
    output = ("boot\n", "pass\n")
    async with db.sessions() as session, session.begin():
        return {
            "ancient": (
                await add_session(
                    session,
                    now - timedelta(days=200),
                    runs=(Run(state="retried", output=output), Run(attempt=2, output=output)),
                )
            )[0],
            "old": (await add_session(session, now - timedelta(days=91), runs=(Run(output=output),)))[0],
            "old_running": (
                await add_session(
                    session,
                    now - timedelta(days=120),
                    state=SessionState.IN_PROGRESS,
                    conclusion=None,
                    runs=(Run(state="running", exit_status=None, output=output),),
                )
            )[0],
            "month": (await add_session(session, now - timedelta(days=30), runs=(Run(output=output),)))[0],
            "fresh": (await add_session(session, now - timedelta(days=2), runs=(Run(output=output),)))[0],
        }


async def _output_of(db: Database, session_id: str) -> int:
    async with db.sessions() as session:
        return int(
            await session.scalar(
                select(func.count())
                .select_from(JobLogRow)
                .join(JobRow, JobRow.pk == JobLogRow.job_pk)
                .join(SessionRow, SessionRow.pk == JobRow.session_pk)
                .where(SessionRow.id == session_id)
            )
            or 0
        )


async def test_defaults_delete_old_history_and_old_output_and_keep_the_rest(
    db: Database, clock: FakeClock
) -> None:
    ids = await _seed(db, clock)
    pruned = await prune_once(db, Settings(), batch=1)  # one row a batch: the loop must go on by itself
    assert pruned == Pruned(sessions=2, output_jobs=1)
    assert await _ids(db) == {ids["old_running"], ids["month"], ids["fresh"]}
    assert await _count(db, JobRow) == 3
    assert await _output_of(db, ids["month"]) == 0  # past 14 days: the output goes, the job stays
    assert await _output_of(db, ids["fresh"]) == 2
    assert await _output_of(db, ids["old_running"]) == 2  # it has not ended
    assert await prune_once(db, Settings()) == Pruned()


async def test_zero_days_keeps_that_kind_forever(db: Database, clock: FakeClock) -> None:
    ids = await _seed(db, clock)
    assert await prune_once(db, Settings(history_days=0, output_days=0)) == Pruned()
    assert await _ids(db) == set(ids.values())
    kept_output = await prune_once(db, Settings(output_days=0))
    assert kept_output == Pruned(sessions=2, output_jobs=0)
    assert await _output_of(db, ids["month"]) == 2


async def test_one_call_of_the_store_deletes_one_batch(db: Database, clock: FakeClock) -> None:
    await _seed(db, clock)
    async with db.sessions() as session, session.begin():
        done = await prune_history(
            session, sessions_before=clock() - timedelta(days=90), output_before=None, batch=1
        )
    assert done == Pruned(sessions=1, output_jobs=0)
    assert await _count(db, SessionRow) == 4


async def test_the_server_applies_retention_once_started(
    aiohttp_client: Any, database_url: str, db: Database, clock: FakeClock
) -> None:
    ids = await _seed(db, clock)
    client = await aiohttp_client(
        create_app(Settings(database_url=database_url, history_days=60), clock=clock)
    )
    assert (await client.get("/healthz")).status == 200

    async def month_is_the_oldest_completed() -> bool:
        return await _ids(db) == {ids["old_running"], ids["month"], ids["fresh"]}

    await wait_until(month_is_the_oldest_completed, what="the retention pass")
    assert await _output_of(db, ids["fresh"]) == 2


@pytest.mark.parametrize("value", ["-1", "ninety", "36501", "1.5"])
def test_bad_retention_settings_name_the_setting(value: str) -> None:
    for name in ("KERRIGAN_HISTORY_DAYS", "KERRIGAN_OUTPUT_DAYS"):
        with pytest.raises(ConfigError, match=f"^{name} must be whole days from 0"):
            Settings.from_env({name: value})


def test_retention_settings_are_read() -> None:
    settings = Settings.from_env({"KERRIGAN_HISTORY_DAYS": "365", "KERRIGAN_OUTPUT_DAYS": "0"})
    assert (settings.history_days, settings.output_days) == (365, 0)
    assert (Settings().history_days, Settings().output_days) == (90, 14)
