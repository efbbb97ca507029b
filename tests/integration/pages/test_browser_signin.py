"""In a real browser (Debian's Chromium through Playwright): signing in and out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
