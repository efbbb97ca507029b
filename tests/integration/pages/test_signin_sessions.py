"""Sign-in as the security review tried it: hostile ``next`` targets, a cookie replayed after Sign out, a
sign-in past its end. Each sign-in is a row on the server; the cookie only names it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
from sqlalchemy import func, select
from yarl import URL

from kerrigan.app import create_app
from kerrigan.store.database import Database
from kerrigan.store.models import SignInRow
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import settings_for
from tests.integration.pages.conftest import ADMIN, OWNER, Browser, Site

COOKIE = "kerrigan_session"
EIGHT_HOURS = 8 * 60 * 60


async def sign_in_with_next(
    http: aiohttp.ClientSession, site: Site, raw_next: str, login: str = OWNER
) -> str:
    """Go through the OAuth flow with ``?next=`` exactly as given (not re-encoded); where the callback
    sends the browser."""
    start = URL(f"{site.base}/login/github?next={raw_next}", encoded=True)
    async with http.get(start, allow_redirects=False) as response:
        assert response.status == 302
        authorize = dict(parse_qsl(urlsplit(response.headers["Location"]).query))
    fields = {name: authorize[name] for name in ("client_id", "redirect_uri", "state")}
    async with http.post(
        f"{site.github.url}/login/oauth/authorize", data={**fields, "login": login}, allow_redirects=False
    ) as response:
        assert response.status == 302
        callback = response.headers["Location"]
    async with http.get(callback, allow_redirects=False) as response:
        assert response.status == 302, await response.text()
        return response.headers["Location"]


def jar() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def status_of(site_base: str, path: str, cookie: str) -> int:
    """The status of ``path`` for a browser that sends only this session cookie (redirects not followed)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            site_base + path, headers={"Cookie": f"{COOKIE}={cookie}"}, allow_redirects=False
        ) as response,
    ):
        return response.status


def cookie_of(browser: Browser) -> str:
    [cookie] = [c for c in browser.http.cookie_jar if c.key == COOKIE]
    return cookie.value


async def signins(site: Site) -> list[SignInRow]:
    async with site.database.sessions() as session:
        return list((await session.scalars(select(SignInRow).order_by(SignInRow.pk))).all())


# -- where the browser goes after signing in -------------------------------------------------------

HOSTILE_NEXT = [
    "/%09/evil.example",  # the review's case: a tab, which browsers strip, before //evil.example
    "/%0a/evil.example",
    "/%0d%0a/evil.example",
    "%0d%0a",
    "//evil.example",
    "%2F%2Fevil.example",
    "/%2F/evil.example",
    "/\\evil.example",
    "/%5Cevil.example",
    "/%5cevil.example",
    "https://evil.example",
    "https%3A%2F%2Fevil.example",
    "/%2509/evil.example",  # double-encoded tab
    "/%252F%252Fevil.example",  # double-encoded slashes
    "/%255Cevil.example",  # double-encoded backslash
    "javascript:alert(document.cookie)",
    "javascript%3Aalert(1)",
    "/%20/evil.example",
    "/%00",
    "evil.example",
]


@pytest.mark.parametrize("raw_next", HOSTILE_NEXT)
async def test_a_next_target_off_this_site_falls_back_to_the_front_page(site: Site, raw_next: str) -> None:
    async with jar() as http:
        assert await sign_in_with_next(http, site, raw_next) == "/"


@pytest.mark.parametrize(
    ("raw_next", "kept"),
    [
        ("/pools", "/pools"),
        ("%2Fpools%2Fx%3Fy%3D1%23z", "/pools/x?y=1#z"),
        ("/devices/modalix-bluebox", "/devices/modalix-bluebox"),
    ],
)
async def test_a_next_path_on_this_site_is_where_sign_in_ends(site: Site, raw_next: str, kept: str) -> None:
    async with jar() as http:
        assert await sign_in_with_next(http, site, raw_next) == kept


# -- sign-ins kept on the server -------------------------------------------------------------------


async def test_a_cookie_copied_before_sign_out_is_signed_out_when_replayed(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    copied = cookie_of(octocat)
    assert await status_of(site.base, "/pools", copied) == 200
    status, page = await octocat.post("/logout", {}, csrf_from="/pools")
    assert status == 200
    assert "Sign in with GitHub" in page
    assert await status_of(site.base, "/pools", copied) == 302  # to /login
    [row] = await signins(site)
    assert (row.login, row.ended_at) == (OWNER, site.database.clock())


async def test_the_cookie_holds_an_id_the_database_stores_only_hashed(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    [row] = await signins(site)
    assert row.login == OWNER
    assert len(row.id_hash) == 64
    assert row.expires_at - row.created_at == timedelta(hours=8)
    assert row.ended_at is None
    assert row.id_hash not in cookie_of(octocat)


async def test_a_sign_in_past_its_eight_hours_is_signed_out(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    octocat: Browser = await browser(OWNER)
    cookie = cookie_of(octocat)
    clock.advance(EIGHT_HOURS - 1)
    assert await status_of(site.base, "/pools", cookie) == 200
    clock.advance(2)
    # The cookie itself is still within its age (Fernet counts real seconds): the server's row decides.
    assert await status_of(site.base, "/pools", cookie) == 302
    async with octocat.http.get(f"{site.base}/pools", allow_redirects=False) as response:
        assert response.headers["Location"] == "/login?next=/pools"


async def test_signing_out_one_browser_leaves_the_users_other_sign_ins(
    site: Site, browser: Callable[..., Any]
) -> None:
    first: Browser = await browser(OWNER)
    second: Browser = await browser(OWNER)
    await first.post("/logout", {}, csrf_from="/pools")
    assert await status_of(site.base, "/pools", cookie_of(second)) == 200


async def test_sign_ins_expired_for_a_day_are_purged_at_the_next_sign_in(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await browser(OWNER)
    clock.advance(EIGHT_HOURS + 24 * 60 * 60 + 1)
    await browser(ADMIN)
    assert [row.login for row in await signins(site)] == [ADMIN]


async def test_sign_out_on_one_replica_signs_the_cookie_out_on_another(
    site: Site,
    browser: Callable[..., Any],
    github: GitHubStandIn,
    lab_db: Database,
    aiohttp_server: Callable[..., Any],
) -> None:
    # A second Kerrigan on the same database with the same cookie key, as behind a load balancer.
    other = create_app(
        settings_for(
            lab_db,
            github,
            admins=frozenset({ADMIN}),
            public_url=site.base,
            github_url=github.url,
            github_client_id=github.oauth_client_id,
            github_client_secret=github.oauth_client_secret,
            session_secret="pages-test-secret",
        ),
        clock=lab_db.clock,
    )
    replica = await aiohttp_server(other)
    replica_base = str(replica.make_url("")).rstrip("/")
    octocat: Browser = await browser(OWNER)
    copied = cookie_of(octocat)
    assert await status_of(replica_base, "/pools", copied) == 200  # the other replica knows the sign-in
    await octocat.post("/logout", {}, csrf_from="/pools")
    assert await status_of(replica_base, "/pools", copied) == 302
    async with site.database.sessions() as session:
        assert await session.scalar(select(func.count()).select_from(SignInRow)) == 1
