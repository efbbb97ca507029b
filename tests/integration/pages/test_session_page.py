"""``/sessions/{id}``: the check run's details page, for sessions that came from real deliveries.

The GitHub stand-in holds the commits; Kerrigan processes the delivery, resolves the manifest against the
lab and stores the session; a runner host drives a job over the runner protocol, as the agent would.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import aiohttp
from sqlalchemy import select

from kerrigan.core.sessions import Session, SessionState
from kerrigan.store.database import Database
from kerrigan.store.models import DeliveryRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import signed_headers
from kerrigan.testing.waiting import wait_until
from kerrigan.web.pages.sessions.job_views import CHUNKS_PER_PAGE
from tests.integration.github.conftest import (
    OTHER_SHA,
    REPO,
    SECRET,
    lab,
    manifest_files,
    push_payload,
    webhook,
)
from tests.integration.pages.conftest import READER, Site

Open = Callable[..., Any]
LAB_DEVICES = sorted(device.id for device in lab().devices)


async def deliver(site: Site, event: str, payload: dict[str, Any]) -> None:
    body = json.dumps(payload).encode()
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{site.base}/webhooks/github", data=body, headers=signed_headers(SECRET, event, body)
        ) as response,
    ):
        assert response.status == 202


async def reported_session(site: Site, workflow: str) -> Session:
    """The session of ``workflow`` once its check run exists."""

    async def found() -> Session | None:
        async with site.database.sessions() as db:
            sessions = await find_sessions(db, REPO, workflow=workflow)
        return sessions[-1] if sessions and sessions[-1].check_run_id is not None else None

    try:
        session: Session = await wait_until(found, timeout=30.0)  # CI's machine is slower than ours
    except AssertionError as exc:
        raise AssertionError(f"no check run for {workflow!r}: {await _why(site)}") from exc
    return session


async def _why(site: Site) -> str:
    """What the deliveries and the sessions say, for a wait that timed out (a failed delivery or send is
    retried at a time of the test's clock, which only moves when the test moves it)."""
    async with site.database.sessions() as db:
        deliveries = (await db.execute(select(DeliveryRow))).scalars().all()
        sessions = await find_sessions(db, REPO)
    told = [
        f"delivery {row.event} attempts={row.attempts} processed={row.processed_at is not None} "
        f"error={row.error!r}"
        for row in deliveries
    ]
    told += [
        f"session {row.workflow} state={row.state.value} check_run={row.check_run_id} "
        f"error={row.check_run_error!r}"
        for row in sessions
    ]
    return "; ".join(told) or "no deliveries, no sessions"


async def push(site: Site, *manifests: str, sha: str = OTHER_SHA) -> None:
    site.github.add_commit(REPO, sha, manifest_files(*manifests))
    await deliver(site, "push", push_payload(sha))


async def open_pull_request(site: Site, *manifests: str, sha: str = OTHER_SHA) -> None:
    site.github.add_commit(REPO, sha, manifest_files(*manifests))
    payload = webhook("pull_request-opened")
    payload["pull_request"]["head"]["sha"] = sha
    await deliver(site, "pull_request", payload)


def table(page: str, table_id: str) -> str:
    found = re.search(rf'<table[^>]*id="{table_id}"[^>]*>(.*?)</table>', page, re.S)
    assert found, f"no table {table_id}"
    return found[1]


def rows(fragment: str) -> list[str]:
    body = fragment.split("<tbody>", 1)[1]
    return [text(row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def text(fragment: str) -> str:
    """What a person reads: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def device_links(fragment: str) -> list[str]:
    return re.findall(r'href="/devices/([^"]+)"', fragment)


# -- the resolution --------------------------------------------------------------------------------


async def test_an_unschedulable_session_shows_the_seeds_reasons_and_every_rejected_device(
    site: Site, browser: Open
) -> None:
    await open_pull_request(site, "org-class.yml")
    session = await reported_session(site, "org-class")
    reader = await browser(READER)

    status, page = await reader.get(f"/sessions/{session.id}")

    assert status == 200
    words = text(page)
    assert "octo/firmware" in words
    assert OTHER_SHA[:12] in words
    assert "pull request #7" in words
    assert "completed" in words
    assert "failure" in words
    assert "unschedulable: no device can ever match" in words
    assert "0/12 devices available:" in words
    for requested in ("sdk=2.2.0", "form_factor=som", "purpose=ci"):
        assert f'<span class="label">{requested}</span>' in page
    # The seed's own words, for every kind of miss in the lab.
    for reason in (
        "purpose expected ci, got ga-validation",
        "sdk expected 2.2.0, got 2.1.1",
        "form_factor expected som, got pcie",
        "form_factor missing",
        "device in maintenance",
        "runner host lab-b-02 offline",
    ):
        assert reason in words, reason
    histogram = text(page.split('class="histogram"', 1)[1].split("</table>", 1)[0])
    assert "purpose expected ci never" in histogram  # never and not yet are words, not only colours
    assert "1 device in maintenance not yet" in histogram
    assert "Nearest misses" in words
    nearest = rows(page.split('class="nearest"', 1)[1].split("</table>", 1)[0])
    stored = session.resolution.to_document()["tasks"][0]["nearest_misses"]
    assert len(nearest) == len(stored) == 5
    for verdict, row in zip(stored, nearest, strict=True):
        assert row == f"{verdict['device']} {verdict['pool']} {' '.join(verdict['reasons'])} never"
    rejected = table(page, "rejected-1")
    assert sorted(device_links(rejected)) == LAB_DEVICES  # every device, each once
    greenbox = next(row for row in rows(rejected) if row.startswith("modalix-greenbox"))
    # Its maintenance with since when and why (the inventory file says no who, nor until when).
    assert greenbox.startswith(
        "modalix-greenbox sdk-2-2-som 2 purpose expected ci, got ga-validation device in maintenance since "
    )
    assert greenbox.endswith(": reflashing the bootloader never")
    assert 'data-sortable id="rejected-1"' in page
    assert 'data-filter="rejected-1"' in page
    assert 'http-equiv="refresh"' not in page  # it will not change: no reloading


async def test_the_rejected_table_filters_on_the_server_without_javascript(site: Site, browser: Open) -> None:
    await open_pull_request(site, "org-class.yml")
    session = await reported_session(site, "org-class")
    reader = await browser(READER)

    _, page = await reader.get(f"/sessions/{session.id}?task=regression&q=Offline")
    shown = {row.split()[0]: row for row in rows(table(page, "rejected-1"))}
    assert sorted(shown) == ["davinci-som-01", "legacy-02"]
    assert "runner host lab-b-02 offline" in shown["davinci-som-01"]
    assert "device offline" in shown["legacy-02"]
    assert "Showing 2 of 12 rejected devices matching “ Offline ”" in text(page)
    assert 'value="Offline"' in page

    _, page = await reader.get(f"/sessions/{session.id}?q=2.1")
    assert sorted(device_links(table(page, "rejected-1"))) == [
        "davinci-old-01",
        "modalix-old-01",
        "modalix-old-02",
    ]

    _, page = await reader.get(f"/sessions/{session.id}?task=another-task&q=2.1")
    assert sorted(device_links(table(page, "rejected-1"))) == LAB_DEVICES  # the filter was for another task


async def test_a_manifest_with_errors_shows_each_with_its_file_and_line(site: Site, browser: Open) -> None:
    await push(site, "invalid.yml")
    session = await reported_session(site, "invalid")
    reader = await browser(READER)

    status, page = await reader.get(f"/sessions/{session.id}")

    assert status == 200
    errors = rows(page.split('class="problems error"', 1)[1].split("</table>", 1)[0])
    stored = session.resolution.to_document()["errors"]
    assert len(errors) == len(stored) > 3
    for problem, row in zip(stored, errors, strict=True):
        assert row.startswith(f"{problem['path']} {problem['line']} {problem['column']}")
        assert " ".join(problem["message"].split()) in row
    assert "nothing was scheduled" in text(page)


async def test_deprecations_show_as_warnings_with_their_lines(site: Site, browser: Open) -> None:
    await push(site, "legacy.yml")
    session = await reported_session(site, "legacy")
    reader = await browser(READER)

    _, page = await reader.get(f"/sessions/{session.id}")

    warnings = rows(page.split('class="problems warning"', 1)[1].split("</table>", 1)[0])
    assert [row.split()[:2] for row in warnings] == [
        [".kerrigan/workflows/legacy.yml", "5"],
        [".kerrigan/workflows/legacy.yml", "6"],
    ]
    assert "scheduling.pools is deprecated" in warnings[0]
    assert 'class="problems error"' not in page
    assert '<span class="label">kerrigan.pool_id in [sdk-2-2-som, sdk-2-1-som]</span>' in page


async def test_a_fork_session_says_it_waits_for_approval_and_does_not_reload(
    site: Site, browser: Open
) -> None:
    await deliver(site, "pull_request", webhook("pull_request-fork"))
    session = await reported_session(site, "org-class")
    assert session.awaiting_approval
    reader = await browser(READER)

    status, page = await reader.get(f"/sessions/{session.id}")

    assert status == 200
    assert "comments /kerrigan approve on it" in text(page)
    assert 'http-equiv="refresh"' not in page
    assert 'class="task"' not in page


async def test_an_unknown_session_is_a_not_found_page(site: Site, browser: Open) -> None:
    reader = await browser(READER)
    status, page = await reader.get("/sessions/00000000-0000-0000-0000-000000000000")
    assert status == 404
    assert "There is no session 00000000-0000-0000-0000-000000000000." in page


async def test_anonymous_users_are_sent_to_sign_in(site: Site, browser: Open) -> None:
    await open_pull_request(site, "org-class.yml")
    session = await reported_session(site, "org-class")
    anonymous = await browser()
    async with anonymous.http.get(f"{site.base}/sessions/{session.id}", allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == f"/login?next=/sessions/{session.id}"


# -- jobs ------------------------------------------------------------------------------------------


class Runner:
    """A runner host speaking the protocol, as ``kerrigan runner`` does."""

    def __init__(self, site: Site, http: aiohttp.ClientSession, token: str) -> None:
        self.base = f"{site.base}/api/runner/v1"
        self.http = http
        self.headers = {"Authorization": f"Bearer {token}"}

    async def call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        async with self.http.post(self.base + path, json=body or {}, headers=self.headers) as response:
            assert response.status == 200, await response.text()
            answer: dict[str, Any] = await response.json()
            return answer

    async def offer(self) -> str:
        async def polled() -> str | None:
            async with self.http.get(f"{self.base}/poll?wait=0", headers=self.headers) as response:
                offers = (await response.json())["offers"]
            return str(offers[0]["id"]) if offers else None

        job: str = await wait_until(polled)
        return job

    async def started(self, start: dict[str, Any] | None = None) -> str:
        """The next job offered here, accepted and started (``start``: the start call's body); its id."""
        job = await self.offer()
        await self.call(f"/jobs/{job}/accept")
        await self.call(f"/jobs/{job}/start", start)
        return job


async def runner_for(site: Site, http: aiohttp.ClientSession, host: str) -> Runner:
    async with site.database.sessions() as db, db.begin():
        token = await create_runner_token(db, host, site.database.clock())
    runner = Runner(site, http, token)
    await runner.call(
        "/register",
        {"protocol": [1], "capabilities": ["log_pages"], "resources": {"vcpus": 8}, "devices": {}},
    )
    return runner


async def session_state(database: Database, workflow: str) -> SessionState:
    async with database.sessions() as db:
        [session] = await find_sessions(db, REPO, workflow=workflow)
    return session.state


async def finished_job(site: Site, browser: Open, clock: FakeClock) -> tuple[Session, Any, str]:
    """A session whose one job ran on lab-a-01 and printed 23 chunks (0, an eviction notice, 5..25); the
    session, a reader's browser, and the job's id."""
    await push(site, "select-device.yml")  # one task, on modalix-bluebox (lab-a-01)
    session = await reported_session(site, "select-device")
    reader = await browser(READER)
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started({"cpus": "2-3,26-27"})
        offset = 0

        async def send(seq: int, data: str, **extra: int) -> None:
            nonlocal offset
            await runner.call(f"/jobs/{job}/output", {"seq": seq, "offset": offset, "data": data, **extra})
            offset += len(data.encode())

        await send(0, "boot: first line\n")
        offset += 4096  # chunks 1 to 4 were evicted on the runner before they were uploaded
        await send(5, "after the gap\n", truncated_before_seq=5)
        for seq in range(6, 26):
            await send(seq, f"line {seq}\n")

        _, running = await reader.get(f"/sessions/{session.id}")
        assert '<meta http-equiv="refresh" content="5">' in running  # reloads while the job runs
        assert "running" in text(running)

        for _ in range(3):  # 75 s of running, beating within the 60 s lease as a runner does
            clock.advance(25)
            await runner.call("/heartbeat")
        await runner.call(
            f"/jobs/{job}/finish",
            {
                "exit_status": 0,
                "accounting": {
                    "reservation_use": {
                        "cpu_s": 93.75,
                        "wall_s": 75.0,
                        "vcpus": 2,
                        "average_use_ppm": 625_000,
                    }
                },
            },
        )

    async def completed() -> bool:
        return await session_state(site.database, "select-device") is SessionState.COMPLETED

    await wait_until(completed)
    return session, reader, job


EVICTED = '<span class="truncated">[output chunks 1..4 were evicted on the runner before upload]\n</span>'


async def test_a_finished_job_shows_where_it_ran_its_accounting_and_the_end_of_its_output(
    site: Site, browser: Open, clock: FakeClock
) -> None:
    session, reader, job = await finished_job(site, browser, clock)
    status, page = await reader.get(f"/sessions/{session.id}")
    assert status == 200
    assert 'http-equiv="refresh"' not in page
    [job_row] = rows(page.split('class="jobs"', 1)[1].split("</table>", 1)[0])
    assert job_row == (
        "bring-up succeeded modalix-bluebox lab-a-01 2-3,26-27 2026-11-29 12:00:00 UTC "
        "2026-11-29 12:01:15 UTC 1 min 15 s 0 62.5% of 2 vCPUs CPU 93.8 s · wall 75.0 s"
    )
    assert "./scripts/bring-up.sh" in page
    # The diagnostics' tasks table says where the task ended in one word: its job's state.
    [task_row] = rows(page.split('id="diagnostics"', 1)[1].split("</table>", 1)[0])
    assert task_row == ("bring-up succeeded 1 of 12 modalix-bluebox")

    # A few hundred bytes: the end of the output shown on the session page is all of it.
    section = page.split(f'id="job-{job}"', 1)[1].split("</section>", 1)[0]
    inline = section.split('<pre class="output">', 1)[1].split("</pre>", 1)[0]
    assert inline.startswith(f"boot: first line\n{EVICTED}after the gap\n")
    assert inline.endswith("line 24\nline 25\n")
    assert "evicted on the runner host before it was uploaded" in text(section)
    assert "All of it" not in text(section)


async def test_a_jobs_output_pages_link_first_previous_next_and_last(
    site: Site, browser: Open, clock: FakeClock
) -> None:
    session, reader, job = await finished_job(site, browser, clock)
    assert CHUNKS_PER_PAGE == 4
    pages = f"/sessions/{session.id}/jobs/{job}/output"
    _, newest = await reader.get(pages)  # the newest page by default
    assert text(newest.split('<pre class="output">', 1)[1].split("</pre>", 1)[0]) == "line 23 line 24 line 25"
    assert "page 6 of 6" in text(newest)
    assert f'href="{pages}?page=1" rel="first"' in newest
    assert f'href="{pages}?page=5" rel="prev"' in newest
    assert 'rel="next"' not in newest

    _, first = await reader.get(f"{pages}?page=1")
    oldest = first.split('<pre class="output">', 1)[1].split("</pre>", 1)[0]
    assert oldest == f"boot: first line\n{EVICTED}after the gap\nline 6\n"
    assert f'href="{pages}?page=2" rel="next"' in first
    assert f'href="{pages}?page=6" rel="last"' in first
    assert "evicted on the runner host before it was uploaded" in text(first)

    # A link to the page of output the session page used to show leads to that page.
    _, redirected = await reader.get(f"/sessions/{session.id}?job={job}&page=1")
    assert "page 1 of 6" in text(redirected)
    # Another session's job, or no job at all, is not found.
    assert (await reader.get(f"/sessions/{session.id}/jobs/999999/output"))[0] == 404
    assert (await reader.get(f"/sessions/{session.id}/jobs/²/output"))[0] == 404


async def test_a_check_run_github_refused_shows_githubs_answer_and_that_github_is_behind(
    site: Site, browser: Open
) -> None:
    # GitHub refuses the create and the short body every time: the session is resolved all the same, and
    # its page says what GitHub answered and that GitHub does not show it yet.
    site.github.faults.inject(
        "POST", r"/check-runs$", status=422, message="Invalid request: nope", times=None
    )
    await push(site, "typo.yml")

    async def refused() -> Session | None:
        async with site.database.sessions() as db:
            found = await find_sessions(db, REPO, workflow="typo")
        return found[-1] if found and found[-1].check_run_error else None

    session = await wait_until(refused)
    reader = await browser(READER)

    status, page = await reader.get(f"/sessions/{session.id}")

    assert status == 200
    assert session.state is SessionState.COMPLETED  # typo.yml can never run: resolved all the same
    shown = text(page.split('id="check-run-error"', 1)[1].split("</p>", 1)[0])
    assert "GitHub refused version 1 of the check run (422: Invalid request: nope)" in shown
    assert "GitHub shows an earlier state (version 0 of 1)" in text(page)
    assert "not on GitHub yet" in text(page)
