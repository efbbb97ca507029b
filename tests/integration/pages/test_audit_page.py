"""``/audit``: the audit log newest first, filtered by pool, device and user through a plain GET form."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable
from typing import Any

import pytest

from kerrigan.core.inventory import DeviceState
from kerrigan.store.audit import Change
from kerrigan.store.inventory import get_device, get_pool, save_device, save_pool
from kerrigan.testing.clock import FakeClock
from kerrigan.web.pages.audit import value
from tests.integration.pages.conftest import OTHER_OWNER, OWNER, READER, Site, needs_chromium, on_sqlite_only

_ROW = re.compile(r"<tbody>(.*?)</tbody>", re.DOTALL)


def rows(page: str) -> list[str]:
    """The text of each row of the audit table, top to bottom."""
    body = _ROW.search(page)
    if body is None:
        return []
    return [
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
        for row in re.findall(r"<tr>(.*?)</tr>", body[1], re.DOTALL)
    ]


async def edits(site: Site, clock: FakeClock) -> None:
    """octocat puts modalix-bluebox in maintenance, hubot relabels sdk-2-1-som, octocat tags the device."""
    db = site.database
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, "modalix-bluebox")
        device = dataclasses.replace(stored.device, state=DeviceState.MAINTENANCE, state_reason="new cable")
        await save_device(session, device, Change(OWNER, db.clock()))
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        pool = (await get_pool(session, "sdk-2-1-som")).pool
        await save_pool(
            session,
            dataclasses.replace(pool, labels={**pool.labels, "purpose": "soak"}),
            Change(OTHER_OWNER, db.clock()),
        )
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, "modalix-bluebox")
        device = dataclasses.replace(stored.device, tags=stored.device.tags | {"flaky-usb"})
        await save_device(session, device, Change(OWNER, db.clock()))


async def test_the_newest_change_comes_first(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await edits(site, clock)
    status, page = await (await browser(READER)).get("/audit")
    assert status == 200
    shown = rows(page)
    assert shown[0].startswith("2026-11-29 12:03:00 UTC octocat")
    assert "device modalix-bluebox" in shown[0]
    assert "flaky-usb" in shown[0]
    assert shown[1].startswith("2026-11-29 12:02:00 UTC hubot")
    assert "ci soak" in shown[1]  # before and after
    assert any(row.startswith("2026-11-29 12:00:00 UTC test") for row in shown)  # the lab's import


async def test_filtering_by_device_shows_only_that_devices_changes(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await edits(site, clock)
    status, page = await (await browser(READER)).get("/audit?device=modalix-bluebox&pool=&actor=")
    assert status == 200
    shown = rows(page)
    assert shown
    assert all("device modalix-bluebox" in row for row in shown)
    assert any("available maintenance" in row for row in shown)  # the state change, before and after
    assert 'value="modalix-bluebox"' in page  # the form keeps the filter


async def test_filtering_by_user_and_pool_combine(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await edits(site, clock)
    reader = await browser(READER)
    _, page = await reader.get(f"/audit?actor={OTHER_OWNER}")
    by_hubot = rows(page)
    assert len(by_hubot) == 1
    assert "pool sdk-2-1-som" in by_hubot[0]
    _, page = await reader.get(f"/audit?actor={OWNER}&pool=sdk-2-2-som")
    by_octocat = rows(page)
    assert len(by_octocat) >= 2
    assert all(row.split()[3] == OWNER for row in by_octocat)
    _, page = await reader.get(f"/audit?actor={OWNER}&pool=sdk-2-1-som")
    assert rows(page) == []
    assert "No change recorded that matches" in page


async def test_the_limit_keeps_the_newest_rows(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await edits(site, clock)
    _, page = await (await browser(READER)).get("/audit?limit=2")
    shown = rows(page)
    assert [row.split()[3] for row in shown] == [OWNER, OTHER_OWNER]
    assert "The newest 2 rows" in page


@pytest.mark.parametrize("limit", ["0", "1001", "ten", "-1"])
async def test_a_bad_limit_is_shown_next_to_its_field(
    site: Site, browser: Callable[..., Any], limit: str
) -> None:
    status, page = await (await browser(READER)).get(f"/audit?limit={limit}")
    assert status == 400
    assert "limit must be a whole number from 1 to 1000" in page
    assert 'aria-invalid="true"' in page
    assert rows(page) == []


@pytest.mark.parametrize("path", ["/audit", "/audit?actor=octocat"])
async def test_anonymous_users_are_sent_to_sign_in(
    site: Site, browser: Callable[..., Any], path: str
) -> None:
    async with (await browser()).http.get(site.base + path, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == f"/login?next={path}"


@pytest.mark.parametrize(
    ("raw", "text", "folded"),
    [
        ("2.2.0", "2.2.0", False),
        ("", '""', False),
        (["uart-debug", "ga"], '["uart-debug", "ga"]', False),
        ({"labels": {"k": "v" * 100}}, '{"labels": {"k": "' + "v" * 100 + '"}}', True),
    ],
)
def test_values_are_shown_as_written_and_long_ones_folded(raw: object, text: str, folded: bool) -> None:
    shown = value(raw)
    assert shown.text == text
    assert (shown.short is not None) == folded
    assert not shown.empty
    assert value(None).empty


@needs_chromium
@on_sqlite_only
async def test_in_a_browser_the_filter_form_narrows_the_log(
    site: Site, tab: Callable[..., Any], clock: FakeClock
) -> None:
    await edits(site, clock)
    reader = await tab(READER)
    page = await reader.open("/audit")
    await reader.shoot("audit-filters")
    await page.get_by_label("User").fill(OTHER_OWNER)
    await page.get_by_role("button", name="Show").click()
    await page.wait_for_url(f"{site.base}/audit?pool=&device=&actor={OTHER_OWNER}&limit=200")
    assert await page.locator("#audit-table tbody tr").count() == 1
    await page.locator('a[href="/audit?pool=sdk-2-1-som"]').click()  # the pool column filters by pool
    await page.wait_for_url(f"{site.base}/audit?pool=sdk-2-1-som")
    assert await page.get_by_label("Pool").input_value() == "sdk-2-1-som"
    await reader.shoot("audit-by-pool")
