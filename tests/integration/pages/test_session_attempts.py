"""The session page words each attempt as the check run does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from kerrigan.core.lifecycle import JobState
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import text

Open = Callable[..., Any]
SESSION = "77777777-7777-7777-7777-777777777777"


async def test_a_retried_job_and_its_retry_are_worded_as_attempts(site: Site, browser: Open) -> None:
    async with site.database.sessions() as db, db.begin():
        await create_session(
            db, builders.session(SESSION, {"smoke": {"labels": {}, "tags": []}}), site.database.clock()
        )
        row = await db.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.retry = {"infrastructure": 2, "exit_status": [], "limit": 0}
        [first] = (await db.scalars(select(JobRow).where(JobRow.session_pk == row.pk))).all()
        first.state, first.device_id, first.reason = JobState.RETRIED, "modalix-bluebox", "runner_lost"
        first.finished_at = site.database.clock()
        await db.flush()
        db.add(
            JobRow(
                session_pk=row.pk,
                task_id="smoke",
                state=JobState.QUEUED,
                created_at=site.database.clock(),
                attempt=2,
                retry_of=first.pk,
                avoid_devices=["modalix-bluebox"],
            )
        )
    reader = await browser(READER)
    status, page = await reader.get(f"/sessions/{SESSION}")
    assert status == 200
    words = text(page)
    assert "attempt 1 of 3 on modalix-bluebox" in words
    assert "attempt 2 of 3 after runner_lost on modalix-bluebox" in words
