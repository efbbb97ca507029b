"""A hostile repository tarball through the runner agent: the job fails with the refusal, and nothing is
written outside its workspace.

GitHub builds tarballs from git, which holds symbolic links with any target: the CVE-2025-4517 chain fits in
a repository. The stand-in builds its tarballs from regular files alone, so here a front on loopback serves
the hostile tarball for the pushed commit, as GitHub would, and passes every other request to the stand-in
unchanged; Kerrigan is told the front is GitHub's API.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from sqlalchemy import select

from kerrigan.core.disk import DiskPolicy
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.store.database import Database
from kerrigan.store.jobs import output
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.job_users import spare_job_users
from tests.integration.github.conftest import OTHER_SHA, REPO, Harness, StartApp, manifest_files, settings_for

SMOKE = "#!/bin/sh\necho smoke\n"
BOOT = "#!/bin/sh\necho boot\n"
HOSTS = ("lab-a-01", "lab-a-02")
# Hop-by-hop and framing headers: the front frames its own answers.
NOT_FORWARDED = {"host", "content-length", "transfer-encoding", "content-encoding", "connection"}


class Front:
    """GitHub's API as Kerrigan and the agents see it: given tarballs for given commits, the stand-in for
    everything else."""

    def __init__(self, github: GitHubStandIn, http: aiohttp.ClientSession) -> None:
        self.github, self.http = github, http
        self.tarballs: dict[str, bytes] = {}  # path of the API's tarball endpoint -> what it answers
        self.served: list[str] = []
        self.url = ""

    def serve_tarball(self, repository: str, sha: str, tarball: bytes) -> None:
        """Answer ``GET /repos/{repository}/tarball/{sha}`` with ``tarball``."""
        self.tarballs[f"/repos/{repository}/tarball/{sha}"] = tarball

    async def handle(self, request: web.Request) -> web.StreamResponse:
        given = self.tarballs.get(request.path) if request.method == "GET" else None
        if given is not None:
            self.served.append(request.path)
            return web.Response(body=given, content_type="application/x-gzip")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in NOT_FORWARDED}
        async with self.http.request(
            request.method,
            f"{self.github.url}{request.path_qs}",
            headers=headers,
            data=await request.read(),
            allow_redirects=False,
        ) as answer:
            body = await answer.read()
            kept = {k: v for k, v in answer.headers.items() if k.lower() not in NOT_FORWARDED}
            return web.Response(status=answer.status, body=body, headers=kept)


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def front(github: GitHubStandIn, http: aiohttp.ClientSession) -> AsyncIterator[Front]:
    made = Front(github, http)
    app = web.Application()
    app.router.add_route("*", "/{path:.*}", made.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    made.url = f"http://127.0.0.1:{port}"
    yield made
    await runner.cleanup()


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, front: Front, start_app: StartApp) -> Harness:
    """Kerrigan with the lab inventory, talking to GitHub through the front."""
    client = await start_app(settings_for(lab_db, github, github_api_url=front.url))
    return Harness(client, github, lab_db)


@pytest.fixture
async def agents(harness: Harness, http: aiohttp.ClientSession, tmp_path: Path) -> AsyncIterator[list[Agent]]:
    """An agent for each of the lab's runner hosts (stopped at the end of the test)."""
    made: list[Agent] = []
    async with harness.database.sessions() as session, session.begin():
        for host in HOSTS:
            token = await create_runner_token(session, host, harness.database.clock())
            settings = AgentSettings(
                server_url=str(harness.client.make_url("")),
                token=token,
                host_id=host,
                work_dir=tmp_path / host,
                disk=DiskPolicy(0),
                heartbeat_s=0.2,
                kill_grace_s=2.0,
                systemd_scope="never",
                job_users=spare_job_users(),  # each agent its own
            )
            made.append(Agent(settings, http))
    tasks = [asyncio.create_task(agent.run()) for agent in made]
    yield made
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError):
            await task


def entry(
    name: str, kind: bytes = tarfile.REGTYPE, *, linkname: str = "", content: bytes = b""
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(
        f"octo-firmware-{OTHER_SHA[:7]}/{name}" if name else f"octo-firmware-{OTHER_SHA[:7]}"
    )
    info.type, info.linkname, info.size = kind, linkname, len(content)
    info.mode = 0o755 if content.startswith(b"#!") or kind == tarfile.DIRTYPE else 0o644
    return info, content


def tarball_of(files: dict[str, str], *hostile: tuple[tarfile.TarInfo, bytes]) -> bytes:
    """A GitHub-like tarball of ``files`` (the commit's manifest and scripts) and then ``hostile``."""
    buffer = io.BytesIO()
    with tarfile.open(
        fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": OTHER_SHA}
    ) as archive:
        for info, content in (
            [entry("", tarfile.DIRTYPE)]
            + [entry(path, content=text.encode()) for path, text in sorted(files.items())]
            + list(hostile)
        ):
            archive.addfile(info, io.BytesIO(content) if info.isreg() else None)
    return buffer.getvalue()


def cve_2025_4517(ups: int) -> list[tuple[tarfile.TarInfo, bytes]]:
    """The long symlink chain of the public write-ups, escaping ``ups`` folders above the workspace to
    write ``outside/evil.txt`` there.

    Sixteen nested folders of 247-character names, each reached through a one-letter link: on disk the chain
    is past PATH_MAX, so ``os.path.realpath`` (which the ``data`` filter relies on) stops resolving its links
    and reads the rest as text. ``lll...`` climbs back to the workspace; read as text, ``escape`` stays inside
    the chain, while on disk it climbs ``ups`` folders out.
    """
    folder, steps, path = "d" * 247, "abcdefghijklmnop", ""
    members = []
    for step in steps:
        members.append(entry(f"{path}{folder}", tarfile.DIRTYPE))
        members.append(entry(f"{path}{step}", tarfile.SYMTYPE, linkname=folder))
        path = f"{path}{folder}/"
    chain = "/".join(steps) + "/" + "l" * 254
    assert ups <= len(steps)  # more would leave the chain even read as text, and the filter would see it
    members.append(entry(chain, tarfile.SYMTYPE, linkname="../" * len(steps)))
    members.append(entry("escape", tarfile.SYMTYPE, linkname=f"{chain}/{'../' * ups}outside"))
    members.append(entry("escape/evil.txt", content=b"written outside the workspace\n"))
    return members


async def job_rows(harness: Harness) -> list[JobRow]:
    async with harness.database.sessions() as session:
        return list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def job_output(harness: Harness, row: JobRow) -> str:
    async with harness.database.sessions() as session:
        return "".join(text for _, text in await output(session, row.pk))


async def test_a_tarball_with_the_cve_2025_4517_chain_fails_the_job_and_writes_nothing_outside(
    harness: Harness, front: Front, agents: list[Agent], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    files = manifest_files("hil-smoke.yml") | {"scripts/smoke.sh": SMOKE, "scripts/boot.sh": BOOT}
    # A workspace is a folder of the agent's workspaces folder: climbing from it to tmp_path reaches outside.
    ups = len(agents[0].workspaces.root.relative_to(tmp_path).parts) + 1
    front.serve_tarball(REPO, OTHER_SHA, tarball_of(files, *cve_2025_4517(ups)))

    [run] = await harness.push_commit(files)

    async def completed() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await harness.wait_until(completed, timeout=30)
    assert list(outside.iterdir()) == []  # with the data filter of Python 3.11.7, evil.txt was here
    assert front.served  # the agents fetched the hostile tarball, not the stand-in's
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    refusal = "passes through the link 'a'"
    assert refusal in final["output"]["summary"]
    rows = await job_rows(harness)
    assert [row.state for row in rows] == ["failed", "failed"]
    for row in rows:
        shown = await job_output(harness, row)
        assert shown.startswith("kerrigan: member 'a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/lll")  # no script ran
        assert refusal in shown
    for host in HOSTS:
        workspaces = tmp_path / host / "workspaces"
        for workspace in workspaces.iterdir() if workspaces.exists() else []:
            assert list(workspace.iterdir()) == []  # emptied, not half-written
        assert not list((tmp_path / host / "sources").rglob("*.tar.gz"))  # dropped from the cache


async def test_a_tarball_within_the_rules_still_runs_through_the_front(
    harness: Harness, front: Front, agents: list[Agent]
) -> None:
    # The front itself changes nothing: a tarball that passes the checks runs as the stand-in's would.
    files = manifest_files("hil-smoke.yml") | {"scripts/smoke.sh": SMOKE, "scripts/boot.sh": BOOT}
    link = entry("scripts/again.sh", tarfile.SYMTYPE, linkname="smoke.sh")
    front.serve_tarball(REPO, OTHER_SHA, tarball_of(files, link))

    [run] = await harness.push_commit(files)

    async def completed() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await harness.wait_until(completed, timeout=30)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert front.served
    assert [row.state for row in await job_rows(harness)] == ["succeeded", "succeeded"]
