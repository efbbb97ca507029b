"""Sign in with GitHub (the OAuth web flow through the stand-in), the session cookie, and sign-out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.store.database import Database
from tests.integration.pages.conftest import OWNER, Site


async def test_anonymous_users_see_only_the_sign_in_page(site: Site, browser: Callable[..., Any]) -> None:
    anonymous = await browser()
    for path in ("/pools", "/devices/modalix-bluebox", "/queue", "/runners", "/audit", "/explain"):
        async with anonymous.http.get(site.base + path, allow_redirects=False) as response:
            assert response.status == 302, path
            assert response.headers["Location"] == f"/login?next={path}"
    status, page = await anonymous.get("/pools")
    assert status == 200
    assert "Sign in with GitHub" in page


async def test_signing_in_through_github_names_the_user_and_the_cookie_is_guarded(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat = await browser(OWNER)
    status, page = await octocat.get("/pools")
    assert status == 200
    assert OWNER in page
    [cookie] = [c for c in octocat.http.cookie_jar if c.key == "kerrigan_session"]
    assert cookie["httponly"]
    assert cookie["samesite"] == "Lax"
    assert OWNER not in cookie.value  # encrypted, not merely signed


async def test_a_callback_whose_state_does_not_match_is_refused(site: Site) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{site.base}/login/github", allow_redirects=False) as response:
            assert response.status == 302
        async with http.get(f"{site.base}/auth/callback?code=abc&state=forged") as response:
            assert response.status == 403
            assert "state does not match" in await response.text()


async def test_sign_out_needs_the_csrf_token_and_ends_the_session(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat = await browser(OWNER)
    async with octocat.http.post(f"{site.base}/logout", data={"csrf": "forged"}) as response:
        assert response.status == 403
    status, page = await octocat.post("/logout", {}, csrf_from="/pools")
    assert status == 200
    assert "Sign in with GitHub" in page
    async with octocat.http.get(f"{site.base}/pools", allow_redirects=False) as response:
        assert response.status == 302


async def test_a_form_posted_while_signed_out_comes_back_to_its_page_after_sign_in(site: Site) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{site.base}/pools/sdk-2-2-som/labels",
            data={"key": "rack", "value": "r1"},
            headers={"Referer": f"{site.base}/pools/sdk-2-2-som"},
            allow_redirects=False,
        ) as response:
            assert response.status == 302
            assert response.headers["Location"] == "/login?next=/pools/sdk-2-2-som"
        async with http.post(
            f"{site.base}/pools/sdk-2-2-som/labels",
            data={"key": "rack", "value": "r1"},
            headers={"Referer": "https://elsewhere.example/pools"},
            allow_redirects=False,
        ) as response:
            assert response.headers["Location"] == "/login?next=/pools"  # never another site's path


async def test_public_read_shows_pages_to_anonymous_users_without_any_form(
    lab_db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    settings = Settings(
        database_url=lab_db.engine.url.render_as_string(hide_password=False), public_read=True
    )
    client = await aiohttp_client(create_app(settings, clock=lab_db.clock))
    for path in ("/pools", "/pools/sdk-2-2-som", "/devices/modalix-bluebox", "/queue", "/runners", "/audit"):
        response = await client.get(path, allow_redirects=False)
        assert response.status == 200, path
        page = await response.text()
        assert 'method="post"' not in page, path  # reading only: not even a sign-out form
    response = await client.post(
        "/pools/sdk-2-2-som/labels", data={"key": "rack", "value": "r1", "csrf": "x"}, allow_redirects=False
    )
    assert response.status == 302  # a post still needs a signed-in user
    assert response.headers["Location"].startswith("/login?next=")
    page = await (await client.get("/pools/sdk-2-2-som")).text()
    assert "rack" not in page  # and nothing changed
