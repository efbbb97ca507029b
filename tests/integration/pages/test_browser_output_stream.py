"""In Chromium: a running job's output is added to the session page as it arrives, as text (markup in it
stays text), without the page reloading; the page says when the job has ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aiohttp
from playwright.async_api import expect

from tests.integration.pages.conftest import BROWSER, READER, Site
from tests.integration.pages.test_session_page import push, reported_session, runner_for

pytestmark = list(BROWSER)


async def test_a_running_jobs_output_streams_into_the_page_without_a_reload(
    site: Site, tab: Callable[..., Any]
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await tab(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"})

        page = await reader.open(f"/sessions/{session.id}")
        # A mark on this document: a reload would lose it.
        await page.evaluate("window.kerriganMark = 'not reloaded'")
        output = page.locator(f"#job-{job} pre.output")
        assert await output.text_content() == "boot\n"

        line = '<img src=x onerror="window.injected=1">flashing 50%\n'
        await runner.call(f"/jobs/{job}/output", {"seq": 1, "offset": 5, "data": line})
        await expect(output).to_contain_text("flashing 50%")
        assert await output.text_content() == "boot\n" + line  # as text: the markup is not an element
        assert await output.locator("img").count() == 0
        assert await page.evaluate("window.injected") is None

        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})
        status = page.locator(f"#job-{job}-stream-status")
        await expect(status).to_contain_text("The job ended (succeeded).")
        assert await page.evaluate("window.kerriganMark") == "not reloaded"
    await reader.shoot("session-output-streamed")
