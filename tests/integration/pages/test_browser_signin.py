"""In a real browser (Debian's Chromium through Playwright): signing in and out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from tests.integration.pages.conftest import BROWSER, OWNER, Site

pytestmark = list(BROWSER)


async def test_sign_in_with_github_and_out_again(site: Site, tab: Callable[..., Any]) -> None:
    anonymous = await tab()
    page = await anonymous.open("/pools")
    assert page.url == f"{site.base}/login?next=/pools"
    await anonymous.shoot("login")
    octocat = await tab(OWNER)
    page = octocat.page
    assert await page.locator("header .login").inner_text() == OWNER
    await page.get_by_role("button", name="Sign out").click()
    await page.wait_for_url(f"{site.base}/login")
    assert await page.get_by_role("link", name="Sign in with GitHub").is_visible()


async def test_a_next_with_a_tab_before_two_slashes_lands_on_this_site(
    site: Site, tab: Callable[..., Any]
) -> None:
    # The review's case: Chromium strips the tab from "/\t/evil.example" and goes to //evil.example.
    anonymous = await tab()
    page = anonymous.page
    hosts: list[str] = []
    page.on("request", lambda request: hosts.append(urlsplit(request.url).netloc))
    await page.goto(f"{site.base}/login/github?next=/%09/evil.example")
    await page.get_by_label("Login").fill(OWNER)
    await page.get_by_role("button", name="Authorize").click()
    await page.wait_for_url(lambda url: "/login/oauth/" not in url and "/auth/callback" not in url)
    assert "evil.example" not in hosts
    assert page.url == f"{site.base}/pools"
    assert await page.locator("header .login").inner_text() == OWNER
