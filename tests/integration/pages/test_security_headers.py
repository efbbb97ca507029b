"""Every answer carries ``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: same-origin``: pages,
the API, static files, errors, 404s, redirects, the runner protocol and webhooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
import pytest

from kerrigan.testing.github.webhooks import signed_headers
from tests.integration.github.conftest import SECRET
from tests.integration.pages.conftest import OWNER, Browser, Site

ANSWERS = [
    # (method, path, the status that shows which answer it is)
    ("GET", "/login", 200),  # a page
    ("GET", "/pools", 302),  # a page's redirect to sign in
    ("GET", "/", 302),
    ("GET", "/static/kerrigan.css", 200),
    ("GET", "/static/no-such-file.css", 404),
    ("GET", "/no/such/page", 404),
    ("POST", "/login", 405),
    ("GET", "/api/v1/openapi.json", 200),
    ("GET", "/api/v1/pools", 401),
    ("GET", "/api/v1/no-such-thing", 404),
    ("POST", "/api/v1/explain", 401),
    ("POST", "/webhooks/github", 401),  # no signature
    ("GET", "/api/runner/v1/poll", 401),  # no runner token
    ("POST", "/api/runner/v1/heartbeat", 401),
    ("GET", "/healthz", 200),
    ("GET", "/auth/callback?code=x&state=forged", 403),  # an error page
]


@pytest.mark.parametrize(("method", "path", "status"), ANSWERS)
async def test_every_answer_says_nosniff_and_same_origin_referrers(
    site: Site, method: str, path: str, status: int
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, site.base + path, allow_redirects=False) as response,
    ):
        assert response.status == status, await response.text()
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"


async def test_a_signed_in_page_carries_them_besides_its_own_headers(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    async with octocat.http.get(f"{site.base}/pools/sdk-2-2-som", allow_redirects=False) as response:
        assert response.status == 200
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
        assert response.headers["X-Frame-Options"] == "DENY"  # the page's own, kept
        assert response.headers.getall("Referrer-Policy") == ["same-origin"]  # once, not twice


async def test_a_signed_webhook_delivery_carries_them(site: Site) -> None:
    body = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{site.base}/webhooks/github", data=body, headers=signed_headers(SECRET, "ping", body)
        ) as response,
    ):
        assert response.status == 200, await response.text()  # a ping is answered at once
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert response.headers["Referrer-Policy"] == "same-origin"
