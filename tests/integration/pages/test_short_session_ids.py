"""A session's page opened by the short id pages and check runs print leads to its page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kerrigan.core.lifecycle import SessionState
from tests.integration.api.history_rows import Run, add_session
from tests.integration.pages.conftest import READER, Site

WHOLE = "eba46059-0000-4000-8000-000000000001"


async def test_a_short_id_redirects_to_the_session_and_keeps_the_query(
    site: Site, browser: Callable[..., Any]
) -> None:
    async with site.database.sessions() as session, session.begin():
        await add_session(
            session,
            site.database.clock(),
            state=SessionState.QUEUED,
            conclusion=None,
            runs=(Run(device=None, state="queued"),),
            session_id=WHOLE,
        )
    reader = await browser(READER)
    async with reader.http.get(f"{reader.base}/sessions/eba46059?q=x", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == f"/sessions/{WHOLE}?q=x"
    status, page = await reader.get("/sessions/eba46059")
    assert status == 200
    assert WHOLE in page
    status, _ = await reader.get("/sessions/ffffffff")
    assert status == 404
