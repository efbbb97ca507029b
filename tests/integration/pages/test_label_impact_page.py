"""A change of labels or tags on the pool and device pages that would take devices from the tasks of the
last 30 days is held back: the page lists them and asks for a second click.

The lab is ``fixtures/inventory/lab.yml``: octocat owns sdk-2-2-som (``purpose=ga-validation``; its devices
modalix-bluebox and modalix-redbox have ``uart=enabled``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kerrigan.store.inventory import get_device, get_pool
from tests.integration.api.history_rows import Run, add_session
from tests.integration.pages.conftest import OWNER, Browser, Site

POOL = "sdk-2-2-som"
EDITOR = f"/pools/{POOL}"


async def _ran(site: Site, requirements: dict[str, Any], task: str = "smoke") -> None:
    async with site.database.sessions() as session, session.begin():
        at = site.database.clock() - timedelta(days=2)
        await add_session(session, at, runs=[Run(task, requirements=requirements)])


def _held_back(page: str) -> str:
    found = re.search(
        r'<div class="notice error" role="alert" id="held-back">(.*?)</form>\s*</div>', page, re.S
    )
    assert found, "the page holds the change back"
    return html.unescape(found[1])


async def test_relabelling_a_pool_names_the_workflows_that_would_lose_it_and_waits_for_a_second_click(
    site: Site, browser: Callable[..., Any]
) -> None:
    await _ran(site, {"labels": {"purpose": ["ga-validation"]}, "tags": []})
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(f"{EDITOR}/labels/purpose", {"value": "ci-ble"}, csrf_from=EDITOR)
    assert status == 409
    held = _held_back(page)
    assert "takes devices from 1 task(s) that ran in the last 30 days; 1 of them would have none left" in held
    assert "octo/firmware" in held
    assert "hil / smoke" in held
    assert "<strong>none</strong>" in held
    assert "<code>modalix-bluebox</code>" in held
    assert f'action="{EDITOR}/labels/purpose"' in held
    assert '<input type="hidden" name="value" value="ci-ble">' in held
    assert '<input type="hidden" name="confirm" value="yes">' in held
    async with site.database.sessions() as session:
        assert (await get_pool(session, POOL)).pool.labels["purpose"] == "ga-validation"

    status, page = await octocat.post(
        f"{EDITOR}/labels/purpose", {"value": "ci-ble", "confirm": "yes"}, csrf_from=EDITOR
    )
    assert status == 200
    assert "Label purpose set to ci-ble." in html.unescape(page)
    async with site.database.sessions() as session:
        assert (await get_pool(session, POOL)).pool.labels["purpose"] == "ci-ble"


async def test_a_change_no_task_depends_on_is_made_at_once(site: Site, browser: Callable[..., Any]) -> None:
    await _ran(site, {"labels": {"purpose": ["ga-validation"]}, "tags": []})
    octocat: Browser = await browser(OWNER)
    status, page = await octocat.post(f"{EDITOR}/tags", {"tag": "extra"}, csrf_from=EDITOR)
    assert status == 200
    assert 'id="held-back"' not in page


async def test_removing_a_device_label_is_held_back_on_the_device_page(
    site: Site, browser: Callable[..., Any]
) -> None:
    await _ran(site, {"labels": {"uart": ["enabled"]}, "tags": []}, task="uart")
    octocat: Browser = await browser(OWNER)
    device = "/devices/modalix-bluebox"
    status, page = await octocat.post(f"{device}/labels/uart/delete", {}, csrf_from=device)
    assert status == 409
    held = _held_back(page)
    assert "hil / uart" in held
    assert "<code>modalix-bluebox</code>" in held
    async with site.database.sessions() as session:
        assert (await get_device(session, "modalix-bluebox")).device.labels == {"uart": "enabled"}
    status, _ = await octocat.post(f"{device}/labels/uart/delete", {"confirm": "yes"}, csrf_from=device)
    assert status == 200
    async with site.database.sessions() as session:
        assert "uart" not in (await get_device(session, "modalix-bluebox")).device.labels
