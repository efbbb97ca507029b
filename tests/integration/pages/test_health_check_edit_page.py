"""Pool owners give their pool and its devices a health check on the pool and device pages.

The lab is ``fixtures/inventory/lab.yml``: octocat owns sdk-2-2-som (device modalix-bluebox), hubot owns
sdk-2-1-som, rita only reads.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

from kerrigan.core.health_checks import HealthCheck
from kerrigan.store.inventory import get_device, get_pool
from tests.integration.pages.conftest import OTHER_OWNER, OWNER, READER, Browser, Site

POOL = "/pools/sdk-2-2-som"
DEVICE = "/devices/modalix-bluebox"


async def test_an_owner_sets_the_pool_health_check_from_its_page(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(
        f"{POOL}/health-check/edit",
        {"run": "/opt/lab/health/som.sh", "every": "12h", "timeout_s": "300", "vcpus": ""},
        csrf_from=POOL,
    )
    assert status == 200
    assert "Health check of pool sdk-2-2-som saved." in html.unescape(page)
    assert "<code>/opt/lab/health/som.sh</code> every 12h" in page
    async with site.database.sessions() as session:
        stored = await get_pool(session, "sdk-2-2-som")
    assert stored.pool.health_check == HealthCheck("/opt/lab/health/som.sh", 12 * 3600, 300, 1)


async def test_a_bad_value_is_shown_at_its_input_and_nothing_changes(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(
        f"{POOL}/health-check/edit", {"run": "./check.sh", "every": "1m"}, csrf_from=POOL
    )
    assert status == 400
    error = re.search(r'<p class="field-error" id="error-health-check-every"[^>]*>([^<]*)</p>', page)
    assert error, "the message sits at the Every input"
    assert "5 minutes" in html.unescape(error[1])
    assert 'value="./check.sh"' in page, "what was typed is kept"
    async with site.database.sessions() as session:
        assert (await get_pool(session, "sdk-2-2-som")).pool.health_check is None


async def test_an_owner_gives_a_device_its_own_check_and_removes_it(
    site: Site, browser: Callable[..., Any]
) -> None:
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(
        f"{DEVICE}/health-check/edit", {"run": "./bluebox.sh"}, csrf_from=DEVICE
    )
    assert status == 200
    assert 'id="health-check-remove"' in page
    async with site.database.sessions() as session:
        assert (await get_device(session, "modalix-bluebox")).device.health_check == HealthCheck(
            "./bluebox.sh"
        )
    status, page = await octocat.post(f"{DEVICE}/health-check/remove", {}, csrf_from=DEVICE)
    assert status == 200
    assert "Health check removed from device modalix-bluebox." in html.unescape(page)
    async with site.database.sessions() as session:
        assert (await get_device(session, "modalix-bluebox")).device.health_check is None


async def test_readers_and_other_owners_get_no_form_and_a_forged_post_is_refused(
    site: Site, browser: Callable[..., Any]
) -> None:
    for login in (READER, OTHER_OWNER):
        visitor: Browser = await browser(login)
        _, page = await visitor.get(POOL)
        assert 'id="health-check-edit"' not in page
        status, _ = await visitor.post(f"{POOL}/health-check/edit", {"run": "./x.sh"}, csrf_from=POOL)
        assert status == 403
    async with site.database.sessions() as session:
        assert (await get_pool(session, "sdk-2-2-som")).pool.health_check is None
