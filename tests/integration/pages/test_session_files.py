"""A job's uploaded files: listed on its session page and downloaded from it as attachments, streamed; the
runner protocol's upload refuses a body that is not the size it said, and keeps the note of a file over
the limit."""

from __future__ import annotations

import io

import aiohttp

from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import Open, push, reported_session, runner_for

LOG = b"".join(b"line %d \xc3\xa9\n" % i for i in range(300_000))  # 4.6 MB: several chunks


async def test_an_uploaded_file_is_listed_and_downloaded_whole(site: Site, browser: Open) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        url = f"{runner.base}/jobs/{job}/artifacts"
        query = {"path": "logs/console.log", "size": str(len(LOG))}
        async with http.post(url, params=query, data=io.BytesIO(LOG), headers=runner.headers) as response:
            assert response.status == 200
            assert (await response.json())["kept"] is True
        lying = {"path": "logs/short.log", "size": "3"}
        async with http.post(url, params=lying, data=b"more than three", headers=runner.headers) as response:
            assert response.status == 413
        skipped = {"path": "huge.bin", "size": str(200 << 20), "skipped": "1"}
        async with http.post(url, params=skipped, headers=runner.headers) as response:
            assert await response.json() == {
                "path": "huge.bin",
                "kept": False,
                "note": "not kept: 200 MiB, over the limit of 100 MiB a file",
            }
        for bad in ("../x", "/etc/passwd", "logs/*.log"):
            async with http.post(
                url, params={"path": bad, "size": "1"}, data=b"x", headers=runner.headers
            ) as answer:
                assert answer.status == 400, bad
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})

    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    files = page.split(f'id="job-{job}-files"', 1)[1].split("</ul>", 1)[0]
    assert "not kept: 200 MiB, over the limit of 100 MiB a file" in files
    assert "logs/short.log" in files  # listed with the note of its refusal
    [link] = [part.split('"', 1)[0] for part in files.split('href="')[1:]]
    async with reader.http.get(site.base + link) as response:
        assert response.status == 200
        assert response.headers["Content-Disposition"] == "attachment; filename*=UTF-8''console.log"
        assert response.headers["Content-Type"] == "application/octet-stream"
        assert await response.read() == LOG
    async with reader.http.get(site.base + link.rsplit("/", 1)[0] + "/999") as response:
        assert response.status == 404
