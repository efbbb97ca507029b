"""``/sessions``, ``/devices`` and a device's recent jobs over real HTTP: the filters as a GET form, paging
with next and previous links, a bad filter shown beside the form (400, nothing else), each row's facts, the
navigation, and one walk in Chromium: filter by device and follow a session link."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from kerrigan.core.lifecycle import SessionState
from kerrigan.store.models import DeviceLeaseRow
from tests.integration.api.history_rows import Run, add_session
from tests.integration.pages.conftest import BROWSER, READER, Site

_ROW = re.compile(r'<tr id="session-([0-9a-f-]{36})">')
_HREF = re.compile(r'<a href="([^"]+)" rel="(next|prev)">')


async def _sessions(site: Site, count: int, **fields: Any) -> list[str]:
    """``count`` sessions a minute apart, oldest first; their ids."""
    start = site.database.clock() - timedelta(hours=2)
    async with site.database.sessions() as session, session.begin():
        return [(await add_session(session, start + timedelta(minutes=n), **fields))[0] for n in range(count)]


def _links(page: str) -> dict[str, str]:
    return {rel: html.unescape(href) for href, rel in _HREF.findall(page)}


async def test_the_sessions_page_lists_newest_first_with_each_rows_facts(
    site: Site, browser: Callable[..., Any]
) -> None:
    start = site.database.clock() - timedelta(hours=1)
    async with site.database.sessions() as session, session.begin():
        done, _ = await add_session(
            session,
            start,
            repository="octo/firmware",
            branch="release/2.2",
            sha="3f2a1b0" + "0" * 33,
            runs=(Run(device="modalix-bluebox"), Run(task="flash", device="modalix-redbox")),
        )
        running, _ = await add_session(
            session,
            start + timedelta(minutes=1),
            state=SessionState.IN_PROGRESS,
            conclusion=None,
            runs=(Run(state="running", device="modalix-greenbox"),),
        )
    status, page = await (await browser(READER)).get("/sessions")
    assert status == 200
    assert _ROW.findall(page) == [running, done]
    row = page[page.index(f'id="session-{done}"') :].split("</tr>", 1)[0]
    for fact in (
        f'href="/sessions/{done}"',
        "octo/firmware",
        "release/2.2",
        "hil",
        "3f2a1b0",
        "completed",
        "success",
        'href="/devices/modalix-bluebox"',
        'href="/devices/modalix-redbox"',
        "50s",
    ):
        assert fact in row, fact
    assert '<a href="/sessions"' in page  # the navigation links it
    assert '<a href="/devices"' in page


async def test_the_form_filters_and_the_links_page_both_ways(site: Site, browser: Callable[..., Any]) -> None:
    mine = await _sessions(site, 7, runs=(Run(device="modalix-bluebox"),))
    await _sessions(site, 3, runs=(Run(device="pcie-card-01"),))
    reader = await browser(READER)
    status, first = await reader.get("/sessions?device=modalix-bluebox&limit=3&repository=&state=")
    assert status == 200
    newest = list(reversed(mine))
    assert _ROW.findall(first) == newest[:3]
    assert 'value="modalix-bluebox"' in first  # the form shows the filter back
    assert "prev" not in _links(first)
    _, second = await reader.get(_links(first)["next"])
    assert _ROW.findall(second) == newest[3:6]
    _, third = await reader.get(_links(second)["next"])
    assert _ROW.findall(third) == newest[6:]
    assert "next" not in _links(third)
    _, back = await reader.get(_links(third)["prev"])
    assert _ROW.findall(back) == newest[3:6]
    _, top = await reader.get(_links(back)["prev"])
    assert _ROW.findall(top) == newest[:3]
    assert "prev" not in _links(top)


async def test_a_bad_filter_is_shown_by_the_form_with_400(site: Site, browser: Callable[..., Any]) -> None:
    await _sessions(site, 2)
    reader = await browser(READER)
    for query, field in (("since=yesterday", "since"), ("colour=red", "colour"), ("limit=900", "limit")):
        status, page = await reader.get(f"/sessions?{query}")
        assert status == 400, query
        assert 'id="filter-error"' in page
        assert field in page[page.index('id="filter-error"') :].split("</p>", 1)[0]
        assert not _ROW.findall(page)
        assert "Traceback" not in page
    _, page = await reader.get("/sessions?since=2026-11-29T11:00:00Z&cursor=" + "x" * 12)
    assert "cursor" in page[page.index('id="filter-error"') :].split("</p>", 1)[0]


async def test_the_devices_page_shows_state_current_and_last_jobs_and_pass_rate(
    site: Site, browser: Callable[..., Any]
) -> None:
    now = site.database.clock()
    async with site.database.sessions() as session, session.begin():
        for hours, state in (
            (40, "retried"),  # failed here, retried elsewhere: it counts against this device
            (30, "succeeded"),
            (20, "failed"),
            (10, "succeeded"),
            (5, "succeeded"),
        ):
            await add_session(
                session,
                now - timedelta(hours=hours),
                runs=(Run(device="modalix-bluebox", state=state, task=f"t{hours}"),),
            )
        await add_session(  # older than the window: not counted
            session, now - timedelta(days=9), runs=(Run(device="modalix-bluebox", state="failed"),)
        )
        await add_session(  # cancelled: not counted
            session,
            now - timedelta(hours=8),
            runs=(Run(device="modalix-bluebox", state="cancelled", task="stop"),),
        )
        running, (job,) = await add_session(
            session,
            now - timedelta(minutes=3),
            state=SessionState.IN_PROGRESS,
            conclusion=None,
            runs=(Run(device="modalix-bluebox", state="running", task="live"),),
        )
        session.add(
            DeviceLeaseRow(
                device_id="modalix-bluebox",
                job_pk=job,
                session_id=running,
                host="lab-a-01",
                granted_at=now,
                expires_at=now + timedelta(minutes=5),
            )
        )
    status, page = await (await browser(READER)).get("/devices")
    assert status == 200
    row = page[page.index('id="device-modalix-bluebox"') :].split("</tr>", 1)[0]
    current = row[row.index('class="current"') :].split("</td>", 1)[0]
    assert f'href="/sessions/{running}"' in current
    assert "live" in current
    last = row[row.index('class="last"') :].split("</td>", 1)[0]
    assert "t5" in last
    assert "succeeded" in last
    assert "60%" in row
    assert "(3/5)" in row
    idle = page[page.index('id="device-pcie-card-01"') :].split("</tr>", 1)[0]
    assert "never ran a job" in idle
    assert page.count('<tr id="device-') == 12


async def test_a_device_page_lists_its_last_20_jobs_and_links_to_more(
    site: Site, browser: Callable[..., Any]
) -> None:
    ids = await _sessions(site, 22, runs=(Run(device="modalix-redbox", task="smoke"),))
    await _sessions(site, 1, runs=(Run(device="modalix-bluebox", task="elsewhere"),))
    reader = await browser(READER)
    status, page = await reader.get("/devices/modalix-redbox")
    assert status == 200
    section = page[page.index('id="recent-jobs"') :]
    linked = re.findall(r'<a href="/sessions/([0-9a-f-]{36})">', section)
    assert linked == list(reversed(ids))[:20]
    assert "elsewhere" not in section
    assert 'href="/sessions?device=modalix-redbox"' in section
    _, quiet = await reader.get("/devices/pcie-card-02")
    assert "No job has run on this device yet." in quiet


async def test_history_pages_ask_anonymous_users_to_sign_in(site: Site, browser: Callable[..., Any]) -> None:
    anonymous = await browser(None)
    for path in ("/sessions", "/devices"):
        async with anonymous.http.get(site.base + path, allow_redirects=False) as response:
            assert response.status == 302
            assert response.headers["Location"].startswith("/login?next=")


@BROWSER[0]
@BROWSER[1]
async def test_in_chromium_filter_by_device_and_follow_a_session(site: Site, tab: Callable[..., Any]) -> None:
    mine = await _sessions(site, 2, runs=(Run(device="modalix-greenbox"),))
    await _sessions(site, 3, runs=(Run(device="pcie-card-03"),))
    pages = await tab(READER)
    page = await pages.open("/pools")
    await page.get_by_role("link", name="Sessions").first.click()
    await page.wait_for_url(f"{site.base}/sessions")
    assert await page.locator("#sessions-table tbody tr").count() == 5
    await page.get_by_label("Device").fill("modalix-greenbox")
    await page.get_by_role("button", name="Show").click()
    await page.wait_for_url(f"{site.base}/sessions?*device=modalix-greenbox*")
    rows = page.locator("#sessions-table tbody tr")
    assert await rows.count() == 2
    await pages.shoot("sessions-filtered-by-device")
    await page.locator(f"#session-{mine[-1]} a").first.click()
    await page.wait_for_url(f"{site.base}/sessions/{mine[-1]}")
    title = await page.title()
    assert "Not found" not in title
    assert title.startswith(f"hil · session {mine[-1][:8]}")
    await pages.shoot("session-from-history")
