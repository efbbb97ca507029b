"""The session page lists every test of a job's JUnit XML results, failures first, with their places; the
runner protocol's results upload refuses what is not a workspace path and takes a malformed file."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import aiohttp

from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import Open, push, reported_session, runner_for, text

JUNIT = b"""<?xml version="1.0"?>
<testsuite name="uart">
  <testcase classname="tests.test_uart" name="test_baud" time="0.5"/>
  <testcase classname="tests.test_uart" name="test_echo" time="1.25">
    <failure message="echo mismatch">/ws/tests/test_uart.py:42: AssertionError</failure>
  </testcase>
  <testcase classname="tests.test_uart" name="test_&lt;dma&gt;"><skipped message="no DMA here"/></testcase>
</testsuite>
"""


async def test_every_test_is_on_the_session_page_failures_first(site: Site, browser: Open) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        url = f"{runner.base}/jobs/{job}/results"
        query = {"path": "results/uart.xml", "workspace": "/ws", "size": str(len(JUNIT))}
        async with http.post(url, params=query, data=JUNIT, headers=runner.headers) as response:
            assert response.status == 200
            assert await response.json() == {
                "path": "results/uart.xml",
                "tests": 3,
                "failed": 1,
                "errors": 0,
                "problems": [],
            }
        for bad in ("../etc/passwd", "/etc/passwd", "results/*.xml", ""):
            async with http.post(url, params={"path": bad}, data=JUNIT, headers=runner.headers) as response:
                assert response.status == 400, bad
                assert (await response.json())["error"]["field"] == "path"
        broken = {"path": "results/broken.xml"}
        async with http.post(
            url, params=broken, data=b"<testsuite><testcase", headers=runner.headers
        ) as response:
            assert response.status == 200
            assert "malformed XML" in (await response.json())["problems"][0]
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 1})

    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    shown = text(page.split(f'id="job-{job}-tests"', 1)[1])
    assert "1 failed, 1 skipped, 1 passed: 3 tests in 2 files" in shown
    assert "results/broken.xml:1:" in shown
    assert shown.index("tests.test_uart.test_echo") < shown.index("tests.test_uart.test_<dma>")
    assert shown.index("tests.test_uart.test_<dma>") < shown.index("tests.test_uart.test_baud")
    assert "tests/test_uart.py:42" in shown
    assert "&lt;dma&gt;" in page  # escaped as it was written


async def test_a_results_file_over_the_limit_is_a_413_however_its_body_comes(site: Site) -> None:
    await push(site, "select-device.yml")
    await reported_session(site, "select-device")
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        url = f"{runner.base}/jobs/{job}/results"
        over = b"<testsuite>" + b" " * (16 << 20)

        async def chunked() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
            for start in range(0, len(over), 1 << 20):
                yield over[start : start + (1 << 20)]

        for body in (io.BytesIO(over), chunked()):
            async with http.post(
                url, params={"path": "r.xml"}, data=body, headers=runner.headers
            ) as response:
                assert response.status == 413
                assert (await response.json())["error"]["code"] == "too_large"


async def test_a_crafted_file_is_stored_with_the_limit_it_reached_never_a_500(
    site: Site, browser: Open
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    deep = b'<testsuites><testsuite name="s"><testcase name="first"/>' + b"<a>" * 20_000
    many = b'<testsuite><testcase name="second" ' + b" ".join(b'a%d=""' % i for i in range(300)) + b"/>"
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        url = f"{runner.base}/jobs/{job}/results"
        answers = []
        for name, data in (("deep.xml", deep), ("many.xml", many)):
            async with http.post(url, params={"path": name}, data=data, headers=runner.headers) as response:
                assert response.status == 200
                answers.append(await response.json())
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})
    assert [answer["tests"] for answer in answers] == [1, 0]
    assert answers[0]["problems"] == [
        "deep.xml:1:30051: not read past here: elements are nested more than 10,000 deep; "
        "tests listed before it: 1"
    ]
    assert answers[1]["problems"] == [
        "many.xml:1:12: not read past here: <testcase> has more than 256 attributes"
    ]
    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    assert "not read past here: elements are nested more than 10,000 deep" in text(page)
