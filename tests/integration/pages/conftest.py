"""Kerrigan's web pages over real HTTP, with the GitHub stand-in for sign-in (the OAuth web flow).

``site`` is a running Kerrigan whose database holds the lab inventory (``fixtures/inventory/lab.yml``:
``octocat`` owns ``sdk-2-2-som`` and ``sdk-2-2-pcie``; ``hubot`` owns ``sdk-2-1-som``), with ``admin`` a
System Admin, and ``browser(login)`` signs in through the stand-in and keeps its cookies. ``rita`` is a
member of ``octo``, the organization the App is installed on, so she may sign in; she, ``octocat`` and
``hubot`` read ``octo/firmware`` on GitHub (it is private), so they see its sessions.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Browser as PlaywrightBrowser
from playwright.async_api import Page, async_playwright

from kerrigan.app import create_app
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.processes import free_port
from tests.integration.github.conftest import REPO, settings_for

ADMIN = "admin"
OWNER = "octocat"  # owns sdk-2-2-som in the lab
OTHER_OWNER = "hubot"  # owns sdk-2-1-som only
READER = "rita"

_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@dataclass
class Browser:
    """A signed-in (or anonymous) browser: keeps its cookies, does not run JavaScript."""

    http: aiohttp.ClientSession
    base: str
    login: str | None

    async def get(self, path: str) -> tuple[int, str]:
        async with self.http.get(self.base + path, allow_redirects=True) as response:
            return response.status, await response.text()

    async def csrf(self, path: str) -> str:
        """The CSRF token of the form on ``path``."""
        _, page = await self.get(path)
        found = _CSRF.search(page)
        assert found, f"no form with a CSRF token on {path}"
        return found[1]

    async def post(self, path: str, form: dict[str, str], *, csrf_from: str | None = None) -> tuple[int, str]:
        """Post a form as a browser would, with the CSRF token of the page it sits on."""
        token = form.pop("csrf", None) or await self.csrf(csrf_from or path)
        async with self.http.post(self.base + path, data={**form, "csrf": token}) as response:
            return response.status, await response.text()


@dataclass
class Site:
    """A running Kerrigan with the lab, and the stand-in it signs in with."""

    github: GitHubStandIn
    database: Database
    base: str


StartSite = Callable[..., Any]


@pytest.fixture
def start_site(lab_db: Database, github: GitHubStandIn, aiohttp_server: Callable[..., Any]) -> StartSite:
    """``await start_site(**settings)``: a Kerrigan on the lab with these settings over the pages' own."""

    async def start(**overrides: Any) -> Site:
        port = free_port()
        base = f"http://127.0.0.1:{port}"  # the public URL: links and the OAuth redirect_uri use it
        values: dict[str, Any] = {
            "admins": frozenset({ADMIN}),
            "public_url": base,
            "github_url": github.url,
            "github_client_id": github.oauth_client_id,
            "github_client_secret": github.oauth_client_secret,
            "session_secret": "pages-test-secret",
        }
        app = create_app(settings_for(lab_db, github, **(values | overrides)), clock=lab_db.clock)
        await aiohttp_server(app, port=port)
        return Site(github, lab_db, base)

    return start


@pytest.fixture
async def site(github: GitHubStandIn, start_site: StartSite) -> Site:
    github.add_member("octo", READER)  # the App is installed on octo: its members may sign in
    for login in (READER, OWNER, OTHER_OWNER):
        github.set_permission(REPO, login, "read")
    started: Site = await start_site()
    return started


@pytest.fixture
async def browser(site: Site) -> AsyncIterator[Callable[..., Any]]:
    """``await browser("octocat")``: a browser signed in as that login (``None``: anonymous)."""
    sessions: list[aiohttp.ClientSession] = []

    async def open_browser(login: str | None = None) -> Browser:
        http = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
        sessions.append(http)
        if login is not None:
            # /login/github → the stand-in's authorize form → back to /auth/callback → signed in.
            async with http.get(f"{site.base}/login/github?next=/pools", allow_redirects=True) as response:
                assert response.status == 200
                page = await response.text()
            fields = dict(re.findall(r'name="(client_id|redirect_uri|state)" value="([^"]*)"', page))
            async with http.post(
                f"{site.github.url}/login/oauth/authorize",
                data={**fields, "login": login},
                allow_redirects=True,
            ) as response:
                assert response.status == 200, await response.text()
                assert str(response.url).startswith(site.base)
        return Browser(http, site.base, login)

    yield open_browser
    for http in sessions:
        await http.close()


# -- a real browser ----------------------------------------------------------------------------------

CHROMIUM = Path(os.environ.get("KERRIGAN_CHROMIUM", "/usr/bin/chromium"))
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium package)"
)
# The browser tests look at pages, not at the store: one database is enough (the page tests run on both).
on_sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
BROWSER = (needs_chromium, on_sqlite_only)
_SCREENSHOTS: list[Path] = []


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the browser tests save a screenshot of each page they visit, for a person to look at."""
    folder = Path(os.environ.get("KERRIGAN_SCREENSHOTS") or tmp_path_factory.getbasetemp() / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    _SCREENSHOTS.append(folder)
    return folder


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for folder in _SCREENSHOTS:
        shots = sorted(folder.glob("*.png"))
        if shots:
            terminalreporter.write_line(f"browser screenshots ({len(shots)}): {folder}")


@pytest.fixture
async def chromium() -> AsyncIterator[PlaywrightBrowser]:
    """Debian's Chromium, headless, driven by Playwright (never `playwright install`)."""
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@dataclass
class Pages:
    """A browser tab signed in as one login, saving a screenshot of each page it is asked to."""

    page: Page
    site: Site
    folder: Path
    login: str | None

    async def open(self, path: str) -> Page:
        await self.page.goto(self.site.base + path)
        return self.page

    async def shoot(self, name: str) -> Path:
        target = self.folder / f"{name}.png"
        await self.page.screenshot(path=str(target), full_page=True)
        return target


@pytest.fixture
async def tab(
    site: Site, chromium: PlaywrightBrowser, screenshots: Path
) -> AsyncIterator[Callable[..., Any]]:
    """``await tab("octocat")``: a new browser context signed in through the stand-in's authorize page."""
    contexts = []

    async def open_tab(login: str | None = None, *, width: int = 1280) -> Pages:
        context = await chromium.new_context(viewport={"width": width, "height": 900})
        contexts.append(context)
        page = await context.new_page()
        if login is not None:
            await page.goto(f"{site.base}/login")
            await page.get_by_role("link", name="Sign in with GitHub").click()
            await page.get_by_label("Login").fill(login)
            await page.get_by_role("button", name="Authorize").click()
            await page.wait_for_url(f"{site.base}/**")
        return Pages(page, site, screenshots, login)

    yield open_tab
    for context in contexts:
        await context.close()
