"""The session page's *Cancel* button: shown to System Admins, the repository's writers (as GitHub says) and
the owners of a pool the session uses while it has not ended, a plain form with the CSRF token; after it,
the page says who cancelled."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from tests.integration.github.conftest import REPO
from tests.integration.pages.conftest import ADMIN, OTHER_OWNER, OWNER, READER, Site

Open = Callable[..., Any]
SESSION = "88888888-8888-8888-8888-888888888888"
PAGE = f"/sessions/{SESSION}"
CANCEL = f"{PAGE}/cancel"
BUTTON = f'action="{CANCEL}"'
RESOLUTION = {"tasks": [{"id": "smoke", "eligible_pools": ["sdk-2-2-som"]}]}  # octocat's pool


@pytest.fixture
async def queued(site: Site) -> Site:
    """A queued session of one job, eligible on octocat's pool (no runner takes it: it stays queued or
    leased)."""
    async with site.database.sessions() as session, session.begin():
        await create_session(
            session, builders.session(SESSION, ("smoke",), resolution=RESOLUTION), site.database.clock()
        )
    return site


async def stored(site: Site) -> tuple[SessionRow, list[JobRow]]:
    async with site.database.sessions() as session:
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        return row, list((await session.scalars(select(JobRow))).all())


async def unchanged(site: Site) -> None:
    row, jobs = await stored(site)  # the dispatcher may have leased the job meanwhile: that is no cancel
    assert row.state is not SessionState.COMPLETED
    assert (row.cancelled_by, row.cancel_reason) == (None, None)
    assert [(job.state != JobState.CANCELLED, job.cancel_requested_at) for job in jobs] == [(True, None)]


@pytest.mark.parametrize("login", [ADMIN, OWNER])
async def test_the_button_cancels_and_the_page_says_who(queued: Site, browser: Open, login: str) -> None:
    page = await browser(login)
    status, text = await page.get(PAGE)
    assert status == 200
    assert BUTTON in text

    status, text = await page.post(CANCEL, {}, csrf_from=PAGE)

    assert status == 200  # followed the redirect back to the page
    assert f'Cancelled by <span class="mono">{login}</span>' in text
    assert BUTTON not in text
    row, jobs = await stored(queued)
    assert (row.state, row.conclusion, row.cancelled_by) == (SessionState.COMPLETED, "cancelled", login)
    assert [job.state for job in jobs] == [JobState.CANCELLED]


async def test_a_writer_of_the_repository_gets_the_button_and_cancels(queued: Site, browser: Open) -> None:
    queued.github.set_permission(REPO, READER, "write")  # rita owns no pool: her write access is what counts
    page = await browser(READER)
    status, text = await page.get(PAGE)
    assert status == 200
    assert BUTTON in text
    status, text = await page.post(CANCEL, {}, csrf_from=PAGE)
    assert status == 200
    assert f'Cancelled by <span class="mono">{READER}</span>' in text
    row, _ = await stored(queued)
    assert (row.conclusion, row.cancelled_by) == ("cancelled", READER)


@pytest.mark.parametrize("login", [READER, OTHER_OWNER])
async def test_no_button_for_readers_or_owners_of_other_pools(
    queued: Site, browser: Open, login: str
) -> None:
    page = await browser(login)
    status, text = await page.get(PAGE)
    assert status == 200
    assert SESSION[:8] in text
    assert BUTTON not in text


async def test_an_anonymous_post_is_sent_to_sign_in_and_changes_nothing(queued: Site, browser: Open) -> None:
    page = await browser(None)
    async with page.http.post(page.base + CANCEL, data={"csrf": "x"}, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"].startswith("/login")
    await unchanged(queued)


@pytest.mark.parametrize("login", [READER, OTHER_OWNER])
async def test_a_post_by_someone_who_may_not_cancel_is_refused_and_changes_nothing(
    queued: Site, browser: Open, login: str
) -> None:
    page = await browser(login)
    status, text = await page.post(CANCEL, {}, csrf_from=PAGE)

    assert status == 403
    assert f"{login} may not cancel session {SESSION}" in html.unescape(text)
    await unchanged(queued)


async def test_a_forged_post_without_this_sessions_csrf_token_is_refused(queued: Site, browser: Open) -> None:
    page = await browser(ADMIN)
    status, text = await page.post(CANCEL, {"csrf": "forged"})

    assert status == 403
    assert "the form is stale or was not sent from this site" in html.unescape(text)
    await unchanged(queued)


async def test_no_button_once_the_session_has_ended_and_a_late_post_changes_nothing(
    queued: Site, browser: Open
) -> None:
    async with queued.database.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.state, row.conclusion = SessionState.COMPLETED, "success"
    page = await browser(ADMIN)
    _, text = await page.get(PAGE)
    assert BUTTON not in text

    status, _ = await page.post(CANCEL, {}, csrf_from=PAGE)

    assert status == 200
    row, _ = await stored(queued)
    assert (row.conclusion, row.cancelled_by) == ("success", None)


async def test_an_unknown_session_is_a_404_page(queued: Site, browser: Open) -> None:
    page = await browser(ADMIN)
    status, _ = await page.post("/sessions/no-such/cancel", {}, csrf_from=PAGE)
    assert status == 404
