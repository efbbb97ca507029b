"""Reading a repository's sessions needs read access to it on GitHub, as the security review tried it: a
reader the lab lets in, but who may not read the private ``octo/firmware``, gets the 404 of a session that
does not exist on its page, output, raw log, stream, uploaded file and cancel, and through the API; lists
leave its sessions out; the device pages and the queue show its jobs without naming them. Admins see
everything; a public repository is anyone's."""

from __future__ import annotations

import html
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
import pytest

from kerrigan.core.sessions import Session
from kerrigan.store.tokens import create_token
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from kerrigan.web.reading import HIDDEN
from tests.integration.github.conftest import REPO
from tests.integration.pages.conftest import ADMIN, OWNER, READER, Site, StartSite
from tests.integration.pages.test_session_page import Open, push, reported_session, runner_for, text


@dataclass
class Ran:
    """A session of octo/firmware whose one job printed output and uploaded a file, still running."""

    session: Session
    job: str
    file_link: str

    @property
    def paths(self) -> dict[str, str]:
        """Every page of it, by what it is."""
        base = f"/sessions/{self.session.id}"
        return {
            "session page": base,
            "output page": f"{base}/jobs/{self.job}/output",
            "raw log": f"{base}/jobs/{self.job}/output.txt",
            "stream": f"{base}/jobs/{self.job}/output/stream",
            "raw console": f"{base}/jobs/{self.job}/console.txt",
            "console stream": f"{base}/jobs/{self.job}/console/stream",
            "uploaded file": self.file_link,
        }


@pytest.fixture
async def ran(site: Site, browser: Open) -> AsyncIterator[Ran]:
    await push(site, "select-device.yml")
    session = await reported_session(site, "select-device")
    async with aiohttp.ClientSession() as http:
        runner = await runner_for(site, http, "lab-a-01")
        job = await runner.started()
        await runner.call(f"/jobs/{job}/output", {"seq": 0, "offset": 0, "data": "secret build output\n"})
        await runner.call(f"/jobs/{job}/console", {"seq": 0, "offset": 0, "data": "secret build output\n"})
        async with http.post(
            f"{runner.base}/jobs/{job}/artifacts",
            params={"path": "logs/console.log", "size": "7"},
            data=io.BytesIO(b"console"),
            headers=runner.headers,
        ) as response:
            assert response.status == 200
        _, page = await (await browser(ADMIN)).get(f"/sessions/{session.id}")
        [link] = [
            part.split('"', 1)[0] for part in page.split('href="') if "/files/" in part.split('"', 1)[0]
        ]
        yield Ran(session, str(job), html.unescape(link))


def may_not_read(github: GitHubStandIn, login: str = READER) -> None:
    """``login`` keeps the sign-in (a member of octo) but loses read access to octo/firmware."""
    github.repositories[REPO].permissions.pop(login, None)


async def test_a_reader_without_access_gets_the_404_of_a_session_that_does_not_exist(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn
) -> None:
    may_not_read(github)
    reader = await browser(READER)
    for what, path in ran.paths.items():
        status, page = await reader.get(path)
        assert status == 404, what
        assert f"There is no session {ran.session.id}." in text(page), what
        assert "secret build output" not in page
        assert REPO not in page, what  # not even its name
    _, missing = await reader.get("/sessions/00000000-0000-0000-0000-000000000000")
    assert text(missing).replace("00000000-0000-0000-0000-000000000000", ran.session.id) == text(
        (await reader.get(ran.paths["session page"]))[1]
    )  # word for word what a session that does not exist answers


async def test_an_admin_and_a_reader_of_the_repository_see_all_of_it(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn
) -> None:
    may_not_read(github)
    for login in (ADMIN, OWNER):  # an admin (no permission on GitHub at all), and a reader there
        who = await browser(login)
        for what, path in ran.paths.items():
            if what in ("stream", "console stream"):
                continue  # it streams until the job ends: its status is enough
            status, _ = await who.get(path)
            assert status == 200, (login, what)
        for stream in ("stream", "console stream"):
            async with who.http.get(site.base + ran.paths[stream]) as response:
                assert response.status == 200, login


async def test_a_public_repository_is_readable_by_anyone_the_lab_lets_in(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn
) -> None:
    may_not_read(github)
    github.repositories[REPO].private = False
    reader = await browser(READER)
    status, page = await reader.get(ran.paths["session page"])
    assert status == 200
    assert "secret build output" in page


async def test_lists_leave_out_what_the_reader_may_not_read_and_lab_pages_hide_its_names(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn
) -> None:
    may_not_read(github)
    reader, admin = await browser(READER), await browser(ADMIN)
    _, everything = await admin.get("/sessions")
    assert ran.session.id in everything
    _, listed = await reader.get("/sessions")
    assert ran.session.id not in listed
    assert REPO not in listed
    for path in ("/devices/modalix-bluebox", "/devices", "/queue", "/runners"):
        status, page = await reader.get(path)
        assert status == 200, path
        assert ran.session.id not in page, path
        assert REPO not in page, path
        assert "select-device" not in page, path  # nor its task
    _, device = await reader.get("/devices/modalix-bluebox")
    assert HIDDEN in device  # the board was busy: that much is the lab's
    _, shown = await admin.get("/devices/modalix-bluebox")
    assert ran.session.id in shown


async def test_the_api_answers_a_token_of_a_login_without_access_as_if_nothing_were_there(
    site: Site, ran: Ran, github: GitHubStandIn
) -> None:
    may_not_read(github)
    async with site.database.sessions() as db, db.begin():
        reader = await create_token(db, READER, site.database.clock())
        admin = await create_token(db, ADMIN, site.database.clock())

    async def get(token: str, path: str) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{site.base}/api/v1{path}", headers=headers) as response,
        ):
            body = await response.json() if response.content_type == "application/json" else None
            return response.status, body

    for path, missing in (
        (f"/sessions/{ran.session.id}", f"no session '{ran.session.id}'"),
        (f"/jobs/{ran.job}", f"no job {ran.job}"),
        (f"/jobs/{ran.job}/output", f"no job {ran.job}"),
        (f"/jobs/{ran.job}/console", f"no job {ran.job}"),
    ):
        status, body = await get(reader, path)
        assert (status, body["error"]["message"]) == (404, missing), path
        assert (await get(admin, path))[0] == 200, path
    for path in ("/sessions", "/devices/modalix-bluebox/jobs"):
        _, body = await get(reader, path)
        assert body["items"] == [], path
        _, body = await get(admin, path)
        assert len(body["items"]) == 1, path
    async with (
        aiohttp.ClientSession() as http,
        http.post(
            f"{site.base}/api/v1/sessions/{ran.session.id}/cancel",
            headers={"Authorization": f"Bearer {reader}"},
        ) as response,
    ):
        assert response.status == 404


async def test_a_reader_who_gains_access_on_github_sees_it_within_five_minutes(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn, clock: FakeClock
) -> None:
    may_not_read(github)
    reader = await browser(READER)
    assert (await reader.get(ran.paths["session page"]))[0] == 404
    github.set_permission(REPO, READER, "read")
    clock.advance(301)  # GitHub's answer is kept five minutes
    assert (await reader.get(ran.paths["session page"]))[0] == 200
    may_not_read(github)
    clock.advance(301)
    assert (await reader.get(ran.paths["session page"]))[0] == 404


async def test_github_not_answering_is_a_503_that_names_no_repository(
    site: Site, browser: Open, ran: Ran, github: GitHubStandIn
) -> None:
    reader = await browser(READER)
    github.faults.inject("GET", rf"^/repos/{REPO}$", status=502, times=1000)
    status, page = await reader.get(ran.paths["session page"])
    assert status == 503
    assert "could not ask GitHub whether you may read this repository" in text(page)
    assert REPO not in page


async def test_public_read_shows_anonymous_callers_public_repositories_only(
    start_site: StartSite, ran: Ran, github: GitHubStandIn, clock: FakeClock
) -> None:
    public = await start_site(public_read=True)
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(public.base + ran.paths["session page"], allow_redirects=False) as response:
            assert response.status == 404
        async with anonymous.get(public.base + "/sessions") as response:
            assert ran.session.id not in await response.text()
        github.repositories[REPO].private = False
        clock.advance(301)  # GitHub's answer is kept five minutes
        async with anonymous.get(public.base + ran.paths["raw log"], allow_redirects=False) as response:
            assert response.status == 200
            assert await response.text() == "secret build output\n"


@pytest.mark.parametrize("name", ["octo/..", "octo/x?y=1", "octo/{owner}", "octo"])
async def test_a_filter_that_names_no_repository_is_never_asked_of_github(
    site: Site, browser: Open, github: GitHubStandIn, name: str
) -> None:
    reader = await browser(READER)
    before = len(github.requests)
    status, _ = await reader.get(f"/sessions?{urlencode({'repository': name})}")
    assert status == 200
    assert [request.path for request in github.requests[before:] if request.path.startswith("/repos/")] == []
