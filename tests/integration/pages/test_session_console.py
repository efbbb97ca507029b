"""A job's board's console on the session page: a block of its own beside the output, streamed in from the
accept (the board boots before the command starts), downloadable whole as plain text; none for a job whose
runner sends no console. A runner host drives the job over the runner protocol."""

from __future__ import annotations

import aiohttp

from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_output_stream import read_event
from tests.integration.pages.test_session_page import Open, push, reported_session, runner_for, text


async def test_the_console_streams_in_from_the_accept_and_downloads_whole_beside_the_output(
    site: Site, browser: Open
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.offer()
        await runner.call(f"/jobs/{job}/accept")
        boot = "U-Boot 2024.01 <b>\r\n"
        await runner.call(f"/jobs/{job}/console", {"seq": 0, "offset": 0, "data": boot})

        _, page = await reader.get(f"/sessions/{session.id}")
        section = page.split(f'id="job-{job}"', 1)[1]
        assert f'<h4 id="job-{job}-console">Console' in section
        stream = f"/sessions/{session.id}/jobs/{job}/console/stream"
        assert f'data-stream="{stream}" data-after="0"' in section  # booting: not started yet, yet live
        console = section.split('<pre class="output console"', 1)[1].split("</pre>", 1)[0]
        assert "U-Boot 2024.01 &lt;b&gt;" in console  # escaped
        raw = f"/sessions/{session.id}/jobs/{job}/console.txt"
        assert f'<a href="{raw}" download=' in section  # "Raw console"
        assert f'<a href="{raw}?timestamps=true" download=' in section

        async with reader.http.get(f"{site.base}{stream}?after=0") as response:
            assert response.content_type == "text/event-stream"
            await runner.call(f"/jobs/{job}/start")
            await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "test output\n"})
            login = "buildroot login: "
            await runner.call(f"/jobs/{job}/console", {"seq": 1, "offset": len(boot.encode()), "data": login})
            event = await read_event(response.content)
            assert event["data"] == {"seq": 1, "data": login, "evicted": False}  # the console's, not output
            await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})
            assert (await read_event(response.content))["event"] == "end"

        async with reader.http.get(f"{site.base}{raw}") as response:
            assert response.content_type == "text/plain"
            assert await response.text() == boot + login
        async with reader.http.get(f"{site.base}{raw}?timestamps=true") as response:
            assert (await response.text()).count("Z ") == 2  # each line starts with its arrival time

    _, page = await reader.get(f"/sessions/{session.id}")
    section = page.split(f'id="job-{job}"', 1)[1]
    assert "data-stream" not in section  # ended: nothing left to stream
    assert "test output" in text(section.split('<pre class="output console"', 1)[0])


async def test_a_job_whose_runner_sends_no_console_shows_no_console_block(site: Site, browser: Open) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"})
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})
    _, page = await reader.get(f"/sessions/{session.id}")
    assert "Console" not in text(page.split(f'id="job-{job}"', 1)[1].split("</section>", 1)[0])
