"""Output where people look: a finished session's page opens on its jobs (the scheduling diagnostics one
click below), a running job's output streams into the page over server-sent events, and the whole log
downloads as plain text. A runner host drives the job over the runner protocol; the stream is read over
real HTTP, as a browser's EventSource reads it."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from kerrigan.testing.clock import FakeClock
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import (
    Open,
    finished_job,
    push,
    reported_session,
    runner_for,
    text,
)


async def read_event(stream: aiohttp.StreamReader) -> dict[str, Any]:
    """The next server-sent event (its fields, ``data`` as JSON), skipping the ``retry`` advice."""
    fields: dict[str, Any] = {}
    while True:
        line = (await stream.readline()).decode()
        assert line, f"the stream ended in the middle of an event: {fields}"
        line = line.rstrip("\n")
        if not line:
            if "data" in fields:
                return fields
            fields = {}
            continue
        name, _, value = line.partition(": ")
        assert name not in fields, f"one event, two {name} lines: {line!r}"
        fields[name] = json.loads(value) if name == "data" else value


async def test_a_finished_sessions_page_starts_with_its_jobs_and_folds_the_diagnostics_below(
    site: Site, browser: Open, clock: FakeClock
) -> None:
    session, reader, job = await finished_job(site, browser, clock)
    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    jobs_at = page.index('<h2 id="jobs">')
    output_at = page.index(f'id="job-{job}"')
    diagnostics_at = page.index('id="diagnostics"')
    assert jobs_at < output_at < diagnostics_at
    assert page.index('id="task-1"') > diagnostics_at  # each task's resolution is inside the fold
    assert '<details class="diagnostics" id="diagnostics">' in page  # closed: one click away
    assert "data-stream" not in page  # nothing left to stream
    assert 'http-equiv="refresh"' not in page


async def test_a_running_session_does_not_reload_with_javascript_and_its_output_streams_in(
    site: Site, browser: Open
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"})

        _, page = await reader.get(f"/sessions/{session.id}")
        # Only a browser without JavaScript reloads; the diagnostics stay open while it runs.
        assert '<noscript><meta http-equiv="refresh" content="5"></noscript>' in page
        assert page.count('http-equiv="refresh"') == 1
        assert '<details class="diagnostics" id="diagnostics" open>' in page
        stream = f"/sessions/{session.id}/jobs/{job}/output/stream"
        assert f'data-stream="{stream}" data-after="0"' in page
        assert "session.js" in page

        async with reader.http.get(f"{site.base}{stream}?after=0") as response:
            assert response.status == 200
            assert response.content_type == "text/event-stream"
            # Sent after the stream opened: a line with markup, a carriage return and a newline in it.
            line = "<script>alert(1)</script>\r\nprogress 50%\n"
            await runner.call(f"/jobs/{job}/output", {"seq": 1, "offset": 5, "data": line})
            event = await read_event(response.content)
            assert event["id"] == "1"
            assert event["data"] == {"seq": 1, "data": line, "evicted": False}

            await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})
            end = await read_event(response.content)
            assert end["event"] == "end"
            assert end["data"] == {"state": "succeeded", "cut": None}
            assert await response.content.read() == b""  # and the stream is over

        # A reconnect resumes after the last chunk the browser got (its Last-Event-ID), not from ?after.
        async with reader.http.get(
            f"{site.base}{stream}?after=-1", headers={"Last-Event-ID": "0"}
        ) as response:
            again = await read_event(response.content)
            assert again["data"]["seq"] == 1
            assert (await read_event(response.content))["event"] == "end"

        # A Last-Event-ID that is no number (str.isdigit takes '²', int does not) starts from the first.
        async with reader.http.get(f"{site.base}{stream}", headers={"Last-Event-ID": "²"}) as response:
            assert response.status == 200
            first = await read_event(response.content)
            assert first["data"]["seq"] == 0


async def test_the_raw_log_is_the_whole_output_as_plain_text_for_readers_only(
    site: Site, browser: Open, clock: FakeClock
) -> None:
    session, reader, job = await finished_job(site, browser, clock)
    _, page = await reader.get(f"/sessions/{session.id}")
    raw = f"/sessions/{session.id}/jobs/{job}/output.txt"
    assert f'<a href="{raw}" download="bring-up-{job}.txt" type="text/plain">Raw log</a>' in page

    async with reader.http.get(f"{site.base}{raw}") as response:
        assert response.status == 200
        assert response.content_type == "text/plain"
        assert response.charset == "utf-8"
        log = await response.text()
    lines = log.splitlines()
    assert lines[:3] == [
        "boot: first line",
        "[output chunks 1..4 were evicted on the runner before upload]",
        "after the gap",
    ]
    assert lines[3:] == [f"line {seq}" for seq in range(6, 26)]  # all of it, unescaped: it is text

    anonymous = await browser()
    async with anonymous.http.get(f"{site.base}{raw}", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"].startswith("/login?next=")
    for path, words in (
        (f"/sessions/{session.id}/jobs/{int(job) + 1000}/output.txt", "has no job"),  # not this session's
        (f"/sessions/00000000-0000-0000-0000-000000000000/jobs/{job}/output.txt", "There is no session"),
        (f"/sessions/{session.id}/jobs/x%3Cb%3E/output.txt", "has no job"),
        (f"/sessions/{session.id}/jobs/{int(job) + 1000}/output/stream", "has no job"),
    ):
        status, body = await reader.get(path)
        assert status == 404, path
        assert words in text(body)
        assert "<b>" not in body
