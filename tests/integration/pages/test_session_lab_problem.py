"""Issue 28: the session page of a session the lab failed says so, what its conclusion does on GitHub,
and, beside the job, every reason it waited in the diagnostics' words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.core.lifecycle import Conclusion, JobState, SessionState
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import text

Open = Callable[..., Any]
SESSION = "28282828-0000-0000-0000-000000000028"
WAITED = "waited 301 s: modalix-bluebox device in maintenance since 2026-12-01 09:12 by hubot: reflashing"


@pytest.mark.parametrize("lab", [Conclusion.ACTION_REQUIRED, Conclusion.NEUTRAL])
async def test_a_session_the_lab_failed_says_so_with_every_reason(
    site: Site, browser: Open, lab: Conclusion
) -> None:
    async with site.database.sessions() as db, db.begin():
        await create_session(
            db, builders.session(SESSION, {"smoke": {"labels": {}, "tags": []}}), site.database.clock()
        )
        row = await db.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.state, row.conclusion = SessionState.COMPLETED, lab.value
        [job] = (await db.scalars(select(JobRow).where(JobRow.session_pk == row.pk))).all()
        job.state, job.reason, job.detail = JobState.REFUSED_BEFORE_START, "queue_wait_exceeded", WAITED
        job.failure_class, job.finished_at = "queue_wait_exceeded", site.database.clock()
    reader = await browser(READER)
    status, page = await reader.get(f"/sessions/{SESSION}")
    assert status == 200
    words = text(page)
    assert "Lab problem : no job failed because of this commit's code" in words
    assert f"The session ended {lab.value}" in words
    blocks = "the pull request cannot merge until a run passes"
    assert (blocks in words) is (lab is Conclusion.ACTION_REQUIRED)
    assert WAITED in words
    assert f'class="state-{lab.value}"' in page
