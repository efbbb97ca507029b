"""Kerrigan's web pages over real HTTP, with the GitHub stand-in for sign-in (the OAuth web flow).

``site`` is a running Kerrigan whose database holds the lab inventory (``fixtures/inventory/lab.yml``:
``octocat`` owns ``sdk-2-2-som`` and ``sdk-2-2-pcie``; ``hubot`` owns ``sdk-2-1-som``), with ``admin`` a
System Admin, and ``browser(login)`` signs in through the stand-in and keeps its cookies.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from kerrigan.app import create_app
from kerrigan.store.database import Database
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.processes import free_port
from tests.integration.github.conftest import settings_for

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


@pytest.fixture
async def site(lab_db: Database, github: GitHubStandIn, aiohttp_server: Callable[..., Any]) -> Site:
    port = free_port()
    base = f"http://127.0.0.1:{port}"  # the public URL: links and the OAuth redirect_uri use it
    app = create_app(
        settings_for(
            lab_db,
            github,
            admins=frozenset({ADMIN}),
            public_url=base,
            github_url=github.url,
            github_client_id=github.oauth_client_id,
            github_client_secret=github.oauth_client_secret,
            session_secret="pages-test-secret",
        ),
        clock=lab_db.clock,
    )
    await aiohttp_server(app, port=port)
    return Site(github, lab_db, base)


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
