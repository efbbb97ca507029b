"""A job that prints a lot: the session page shows the end of it and stays small, its output pages link
through all of it, and a cut output is marked. A runner host drives the job over the runner protocol."""

from __future__ import annotations

import re

import aiohttp

from kerrigan.core.runner_fields import DEFAULT_OUTPUT_MAX_BYTES
from kerrigan.web.pages.sessions.job_views import CHUNKS_PER_PAGE, TAIL_BYTES
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import Open, push, reported_session, runner_for, text

CHUNK = "<b>&" * (48 * 1024) + "\n"  # 192 KiB a chunk, as large as an agent's page gets: every byte escaped
CHUNKS = 20
NOTICE = '<span class="truncated">\n[output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)]\n</span>'


def output_of(page: str) -> str:
    return page.split('<pre class="output">', 1)[1].split("</pre>", 1)[0]


async def test_a_huge_output_keeps_the_session_page_small_and_its_pages_link_through_all_of_it(
    site: Site, browser: Open
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        for seq in range(CHUNKS):
            data = CHUNK.replace("<b>", f"{seq:03d}", 1)  # each chunk told apart
            await runner.call(f"/jobs/{job}/output", {"seq": seq, "offset": seq * len(CHUNK), "data": data})
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})

    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    # 3.75 MiB of output, escaped to five times that; the page holds 64 KiB of it, escaped.
    assert len(page.encode()) < TAIL_BYTES * 5 + 64 * 1024
    inline = output_of(page.split(f'id="job-{job}"', 1)[1])
    assert "<b>" not in inline  # escaped
    assert len(text(inline).encode()) <= TAIL_BYTES
    assert text(inline).endswith("<b>&<b>&")
    assert "The last 64 KiB of 3.8 MiB of output." in text(page)
    pages = f"/sessions/{session.id}/jobs/{job}/output"
    assert f'<a href="{pages}?page=1">All of it</a>' in page

    # From the first page, next links lead through every chunk, in order, to the last.
    path, seen, shown = f"{pages}?page=1", "", 0
    while True:
        status, page = await reader.get(path)
        assert status == 200
        assert len(page.encode()) < CHUNKS_PER_PAGE * len(CHUNK) * 5 + 64 * 1024
        seen += text(output_of(page)) + " "
        shown += 1
        found = re.search(r'href="([^"]+)" rel="next"', page)
        if found is None:
            break
        path = found[1]
    assert shown == CHUNKS // CHUNKS_PER_PAGE
    assert [int(n) for n in re.findall(r"\b(\d{3})&", seen)] == list(range(CHUNKS))


async def test_a_cut_output_is_marked_on_the_session_page_and_its_last_output_page(
    site: Site, browser: Open
) -> None:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")  # with log_pages: it may say what it evicted
        job = await runner.started()
        await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "boot\n"})
        near = DEFAULT_OUTPUT_MAX_BYTES - 6
        jump = {"seq": 9, "offset": near, "data": "kept\nlost\n", "truncated_before_seq": 9}
        assert await runner.call(f"/jobs/{job}/output", jump) == {"next_seq": 10, "output_cut": True}
        await runner.call(f"/jobs/{job}/finish", {"exit_status": 0})

    _, page = await reader.get(f"/sessions/{session.id}")
    section = page.split(f'id="job-{job}"', 1)[1].split("</section>", 1)[0]
    assert (
        "Output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES): what the job printed after that was not stored"
        in text(section)
    )
    inline = output_of(section)
    # Cut where the cap fell, mid-line: the notice is a line of its own.
    assert inline.endswith("kept\nl" + NOTICE)
    assert "lost" not in inline

    _, last = await reader.get(f"/sessions/{session.id}/jobs/{job}/output")
    assert "Output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)" in text(last)
    assert output_of(last).endswith("kept\nl" + NOTICE)
