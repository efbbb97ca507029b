"""A runner agent killed mid-job (issue 28): the device's page and ``/devices`` say its host is offline, since
when, and which job held the device then and whether the server ended it, rather than a green
"available" while the job may still run on the host.

The agent of ``lab-a-01`` registers, its job on ``modalix-bluebox`` starts, and it is never heard again (as
after ``kill -9``): a lease time later the site's dispatcher marks the host offline and ends the job
``runner_lost``.
"""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from typing import Any

from kerrigan.testing.clock import FakeClock
from kerrigan.web.reading import HIDDEN
from tests.integration.pages.conftest import READER, Browser, Site
from tests.integration.pages.test_runners_page import runner, running_job

BLUEBOX = "/devices/modalix-bluebox"


def text(fragment: str) -> str:
    """A page fragment's words, tags dropped."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def heading(page: str) -> str:
    found = re.search(r"<h1>(.*?)</h1>", page, re.S)
    assert found, "no heading"
    return found[1]


def notice(page: str) -> str:
    """The device page's notice of its offline host."""
    found = re.search(r'<div class="notice warn" id="host-offline">(.*?)</div>', page, re.S)
    assert found, "no host-offline notice"
    return found[1]


def row(page: str, device: str) -> str:
    return page[page.index(f'id="device-{device}"') :].split("</tr>", 1)[0]


def current(row: str) -> str:
    """A ``/devices`` row's *Running now* cell."""
    return row[row.index('class="current">') + len('class="current">') :].split("</td>", 1)[0]


async def _killed_mid_job(site: Site, reader: Browser, clock: FakeClock) -> int:
    """lab-a-01's agent runs a job on modalix-bluebox and goes silent; once the dispatcher ended the job
    ``runner_lost``, its id."""
    headers = await runner(site, reader.http, "lab-a-01", {"modalix-bluebox": "present"})
    job = await running_job(site, reader.http, headers, "2-3")
    clock.advance(61)  # a lease time without a heartbeat
    for _ in range(50):  # the site's dispatcher ends the lease within a second
        _, page = await reader.get(BLUEBOX)
        if "ended runner_lost" in page:
            break
        await asyncio.sleep(0.1)
    return job


async def test_the_device_page_says_its_host_is_offline_and_what_may_still_run_there(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    reader: Browser = await browser(READER)
    _, before = await reader.get(BLUEBOX)
    assert '<span class="state-available">available</span>' in heading(before)
    assert 'id="host-offline"' not in before
    job = await _killed_mid_job(site, reader, clock)
    status, page = await reader.get(BLUEBOX)
    assert status == 200
    top = heading(page)
    assert "state-available" not in top  # not a green "available"
    assert re.search(r'<span class="state-host-offline" title="[^"]+">available, host offline</span>', top)
    said = notice(page)
    assert text(said).startswith(
        "runner host lab-a-01 offline since 2026-11-29 12:00 (its last heartbeat). It takes no jobs until "
        "its agent speaks again, and what held this device then may still run there:"
    )
    assert (
        f"job {job} (octo/firmware smoke) was running here when its host went silent; ended runner_lost at "
        "2026-11-29 12:01; it may still be running on the host until its agent restarts (its session)"
    ) in text(said)
    assert re.search(rf'<li id="stranded-{job}">.*<a href="/sessions/[0-9a-f-]{{36}}">its session</a>', said)
    state = page[page.index('<section id="state">') :].split("</dd>", 1)[0]
    assert "available, host offline" in text(state)
    assert "(takes no jobs)" in text(state)


async def test_devices_lists_the_device_as_host_offline_with_the_job_that_may_still_run(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    reader: Browser = await browser(READER)
    _, before = await reader.get("/devices")
    assert '<span class="state-available">available</span>' in row(before, "modalix-bluebox")
    job = await _killed_mid_job(site, reader, clock)
    status, page = await reader.get("/devices")
    assert status == 200
    bluebox = row(page, "modalix-bluebox")
    assert "state-available" not in bluebox
    assert 'class="state-host-offline host-offline" title="runner host lab-a-01 offline since' in bluebox
    running = current(bluebox)
    assert f'id="stranded-{job}"' in running
    assert text(running) == (
        "octo/firmware smoke ended runner_lost 2026-11-29 12:01:01 UTC may still run on its offline host"
    )
    # Devices on hosts still heard are as they were; a device of a host whose agent never spoke says so.
    assert '<span class="state-available">available</span>' in row(page, "modalix-redbox")
    never = row(page, "davinci-som-01")
    assert "runner host lab-b-02 offline: its agent has never spoken" in html.unescape(never)
    assert text(current(never)) == "—"


async def test_a_reader_who_may_not_read_the_repository_sees_the_job_unnamed(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    site.github.set_permission("octo/firmware", READER, "none")
    reader: Browser = await browser(READER)
    job = await _killed_mid_job(site, reader, clock)
    _, page = await reader.get(BLUEBOX)
    said = text(notice(page))
    assert f"job {job} ({HIDDEN}) was running here when its host went silent; ended runner_lost" in said
    assert "octo/firmware" not in said
    _, listed = await reader.get("/devices")
    bluebox = current(row(listed, "modalix-bluebox"))
    assert HIDDEN in bluebox
    assert "octo/firmware" not in bluebox
