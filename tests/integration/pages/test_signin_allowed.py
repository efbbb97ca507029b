"""Who may sign in, as the security review tried it: a GitHub login the lab does not know is refused with a
page that says who may and why (audited); members of the organizations the App is installed on, the users it
is installed on and the logins KERRIGAN_ALLOWED_LOGINS names get in; a member who leaves the organization
loses the sign-in at the next hourly check, and a check GitHub does not answer keeps the sign-in for the
grace time only."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest
from sqlalchemy import select

from kerrigan.store.audit import list_audit
from kerrigan.store.models import SignInRow
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from tests.integration.pages.conftest import ADMIN, OTHER_OWNER, OWNER, READER, Site, StartSite

STRANGER = "mallory"


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as session:
        yield session


async def sign_in(http: aiohttp.ClientSession, site: Site, login: str) -> tuple[int, str]:
    """Go through the OAuth flow as ``login``; the status and text of the page it ends on."""
    async with http.get(f"{site.base}/login/github?next=/pools", allow_redirects=True) as response:
        page = await response.text()
    fields = dict(re.findall(r'name="(client_id|redirect_uri|state)" value="([^"]*)"', page))
    async with http.post(
        f"{site.github.url}/login/oauth/authorize", data={**fields, "login": login}, allow_redirects=True
    ) as response:
        return response.status, await response.text()


async def pools_status(http: aiohttp.ClientSession, site: Site) -> int:
    async with http.get(f"{site.base}/pools", allow_redirects=False) as response:
        return response.status


async def live_signins(site: Site, login: str) -> list[SignInRow]:
    async with site.database.sessions() as session:
        rows = await session.scalars(
            select(SignInRow).where(SignInRow.login == login, SignInRow.ended_at.is_(None))
        )
        return list(rows.all())


async def test_a_login_the_lab_does_not_know_is_refused_with_who_may_and_why(
    site: Site, http: aiohttp.ClientSession
) -> None:
    status, page = await sign_in(http, site, STRANGER)
    assert status == 403
    text = html.unescape(page)
    assert "You cannot sign in here" in text
    assert f"GitHub says {STRANGER} is not a member of octo." in text
    assert "members of the GitHub organizations the Kerrigan App is installed on (octo)" in text
    assert OWNER not in text  # who may is said without naming anyone (octocat owns pools)
    assert OTHER_OWNER not in text
    assert "Traceback" not in text
    assert await pools_status(http, site) == 302  # not signed in
    assert await live_signins(site, STRANGER) == []
    async with site.database.sessions() as session:
        [entry] = await list_audit(session, actor=STRANGER)
    assert (entry.subject_type, entry.subject_id, entry.field) == ("signin", STRANGER, "refused")
    assert entry.after == f"GitHub says {STRANGER} is not a member of octo."


async def test_a_member_of_the_organization_the_app_is_installed_on_signs_in(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.add_member("octo", "Newcomer")
    status, page = await sign_in(http, site, "newcomer")
    assert status == 200
    assert "newcomer" in page
    assert await pools_status(http, site) == 200


@pytest.mark.parametrize("login", [ADMIN, OWNER])  # neither is a member of octo
async def test_admins_and_pool_owners_sign_in_without_being_members(
    site: Site, http: aiohttp.ClientSession, login: str
) -> None:
    status, _ = await sign_in(http, site, login)
    assert status == 200
    assert await pools_status(http, site) == 200


async def test_a_user_the_app_is_installed_on_signs_in(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.add_installation(9, "monalisa", kind="User")
    status, _ = await sign_in(http, site, "monalisa")
    assert status == 200
    assert await pools_status(http, site) == 200


async def test_allowed_logins_and_organizations_replace_the_installations(
    start_site: StartSite, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.add_member("octo", READER)
    github.add_installation(9, "monalisa", kind="User")
    site = await start_site(allowed_logins=frozenset({"guest"}), allowed_orgs=frozenset({"octo-lab"}))
    assert (await sign_in(http, site, "Guest"))[0] == 200  # named: no organization needed
    for login in (READER, "monalisa"):  # a member of octo, and a user the App is installed on: not named
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as other:
            status, page = await sign_in(other, site, login)
        assert status == 403
        assert "The Kerrigan App is not installed on octo-lab" in html.unescape(page)


async def test_a_member_removed_from_the_organization_loses_the_sign_in_at_the_next_check(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn, clock: FakeClock
) -> None:
    assert (await sign_in(http, site, READER))[0] == 200
    github.remove_member("octo", READER)
    clock.advance(59 * 60)
    assert await pools_status(http, site) == 200  # confirmed less than an hour ago
    clock.advance(2 * 60)
    async with http.get(f"{site.base}/pools", allow_redirects=True) as response:
        page = html.unescape(await response.text())
    assert str(response.url).startswith(f"{site.base}/login")
    assert f"You were signed out: GitHub says {READER} is not a member of octo." in page
    assert await live_signins(site, READER) == []  # ended on the server, not only in this browser
    async with site.database.sessions() as session:
        [entry] = await list_audit(session, actor="kerrigan")
    assert (entry.subject_id, entry.field) == (READER, "ended")


async def test_a_confirmed_member_is_asked_again_only_after_another_hour(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn, clock: FakeClock
) -> None:
    assert (await sign_in(http, site, READER))[0] == 200

    def asked() -> int:
        return sum(1 for request in github.requests if request.path == f"/orgs/octo/members/{READER}")

    before = asked()
    clock.advance(61 * 60)
    assert await pools_status(http, site) == 200
    assert asked() == before + 1
    clock.advance(30 * 60)
    assert await pools_status(http, site) == 200
    assert asked() == before + 1  # confirmed half an hour ago


async def test_a_check_github_does_not_answer_keeps_the_sign_in_for_the_grace_time_only(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn, clock: FakeClock
) -> None:
    assert (await sign_in(http, site, READER))[0] == 200
    fault = github.faults.inject("GET", r"^/orgs/", status=502, times=1000)
    clock.advance(90 * 60)  # due, within the grace hour
    assert await pools_status(http, site) == 200
    clock.advance(31 * 60)  # two hours and a minute since GitHub last confirmed her
    async with http.get(f"{site.base}/pools", allow_redirects=True) as response:
        page = html.unescape(await response.text())
    assert str(response.url).startswith(f"{site.base}/login")
    assert "could not ask GitHub" in page
    assert len(await live_signins(site, READER)) == 1  # kept: GitHub said nothing against her
    fault.times = 0  # GitHub answers again
    clock.advance(61)  # past the pause between questions GitHub did not answer
    assert await pools_status(http, site) == 200


async def test_github_unreachable_at_sign_in_refuses_and_says_to_try_again(
    site: Site, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.faults.inject("GET", r"^/orgs/", status=502, times=1000)
    status, page = await sign_in(http, site, READER)
    assert status == 403
    assert "could not ask GitHub whether rita is a member of octo" in html.unescape(page)
    assert await live_signins(site, READER) == []


async def test_signing_in_again_and_again_asks_github_and_writes_the_log_once_a_minute(
    site: Site, github: GitHubStandIn, clock: FakeClock
) -> None:
    def asked() -> int:
        return sum(1 for request in github.requests if request.path == f"/orgs/octo/members/{STRANGER}")

    for _ in range(3):
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
            assert (await sign_in(http, site, STRANGER))[0] == 403
    assert asked() == 1
    async with site.database.sessions() as session:
        assert len(await list_audit(session, actor=STRANGER)) == 1
    github.add_member("octo", STRANGER)
    clock.advance(61)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        assert (await sign_in(http, site, STRANGER))[0] == 200  # added meanwhile: in, a minute on
