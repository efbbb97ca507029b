"""Job sources: tarballs fetched from the GitHub stand-in on loopback, cached, and unpacked safely."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import stat
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

import kerrigan
from kerrigan.core.unpacking import UnpackLimits
from kerrigan.runner.github_requests import RetryBudget
from kerrigan.runner.sources import SOURCE_RETENTION_S, SourceCache, SourceError, unpack
from kerrigan.testing.github import GitHubStandIn, RecordedRequest

REPO = "octo/firmware"
INSTALLATION = 1
SHA = "c7e2a9d1f04b3e6a8d5c2b1f9e07a4d3c6b8e512"
OTHER_SHA = "3a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d"
TOKEN = "ghs_sourcetoken"
QUICK = RetryBudget(30, base_s=0.01)  # retried for a while, with short backoff steps
FILES = {
    "README.md": "# firmware\n",
    "scripts/flash.sh": "#!/bin/sh\necho flashing\n",
    "src/main.c": "int main(void) { return 0; }\n",
}


@pytest.fixture
async def github() -> AsyncIterator[GitHubStandIn]:
    # Tokens are put straight into the stand-in, so the App's key is never checked.
    async with GitHubStandIn(public_key="unused") as stand_in:
        stand_in.add_installation(INSTALLATION, "octo")
        stand_in.add_repository(REPO, INSTALLATION)
        stand_in.add_commit(REPO, SHA, FILES)
        stand_in.add_commit(REPO, OTHER_SHA, {"README.md": "# another commit\n"})
        stand_in.tokens[TOKEN] = (INSTALLATION, datetime.now(UTC) + timedelta(hours=1))
        yield stand_in


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
def cache(tmp_path: Path, http: aiohttp.ClientSession) -> SourceCache:
    return SourceCache(tmp_path / "work", http)


def tarball_requests(github: GitHubStandIn) -> list[str]:
    """The requests to the API's tarball endpoint (the first leg of each download)."""
    return [request.path for request in github.requests if "/tarball/" in request.path]


def download_legs(github: GitHubStandIn) -> list[RecordedRequest]:
    """Both legs of each download: the API's tarball endpoint and the download it redirects to."""
    return [r for r in github.requests if "/tarball/" in r.path or "codeload" in r.path]


# -- fetch -------------------------------------------------------------------------------------------


async def test_fetch_downloads_the_commit_with_the_token_and_unpacks_it(
    cache: SourceCache, github: GitHubStandIn, tmp_path: Path
) -> None:
    tarball = await cache.fetch(REPO, SHA, github.url, TOKEN)
    assert tarball == cache.path(REPO, SHA)
    assert tarball == tmp_path / "work" / "sources" / "octo" / "firmware" / f"{SHA}.tar.gz"
    [request] = [r for r in github.requests if "/tarball/" in r.path]
    assert request.path == f"/repos/{REPO}/tarball/{SHA}"
    assert request.headers["Authorization"] == f"token {TOKEN}"

    workspace = tmp_path / "workspace"
    unpack(tarball, workspace)
    unpacked = {str(path.relative_to(workspace)) for path in workspace.rglob("*") if path.is_file()}
    assert unpacked == set(FILES)
    assert (workspace / "src" / "main.c").read_text() == FILES["src/main.c"]
    assert os.access(workspace / "scripts" / "flash.sh", os.X_OK)
    assert not (workspace / "README.md").stat().st_mode & stat.S_IXUSR


async def test_a_second_job_on_the_same_commit_downloads_nothing(
    cache: SourceCache, github: GitHubStandIn
) -> None:
    first = await cache.fetch(REPO, SHA, github.url, TOKEN)
    os.utime(first, (1_000.0, 1_000.0))
    second = await cache.fetch(REPO, SHA, github.url, TOKEN)
    assert second == first
    assert cache.downloads == 1
    assert len(tarball_requests(github)) == 1
    assert second.stat().st_mtime > 1_000.0  # used again: kept another 24 hours


async def test_jobs_needing_the_same_commit_at_once_share_one_download(
    cache: SourceCache, github: GitHubStandIn
) -> None:
    fetched = await asyncio.gather(*(cache.fetch(REPO, SHA, github.url, TOKEN) for _ in range(4)))
    assert set(fetched) == {cache.path(REPO, SHA)}
    assert cache.downloads == 1
    assert len(tarball_requests(github)) == 1


async def test_each_repository_and_commit_is_cached_on_its_own(
    cache: SourceCache, github: GitHubStandIn, tmp_path: Path
) -> None:
    github.add_repository("octo/bootloader", INSTALLATION)
    github.add_commit("octo/bootloader", SHA, {"boot.c": "/* boot */\n"})
    paths = await asyncio.gather(
        cache.fetch(REPO, SHA, github.url, TOKEN),
        cache.fetch(REPO, OTHER_SHA, github.url, TOKEN),
        cache.fetch("octo/bootloader", SHA, github.url, TOKEN),
    )
    assert len(set(paths)) == 3
    assert cache.downloads == 3
    unpack(paths[2], tmp_path / "boot")
    assert [path.name for path in (tmp_path / "boot").iterdir()] == ["boot.c"]


@pytest.mark.parametrize(
    ("repository", "sha", "token", "status"),
    [
        pytest.param(REPO, SHA, "ghs_wrong", "401", id="bad-token"),
        pytest.param(REPO, "0" * 40, TOKEN, "404", id="unknown-commit"),
        pytest.param("octo/unknown", SHA, TOKEN, "404", id="unknown-repository"),
    ],
)
async def test_a_refused_download_raises_source_error_and_caches_nothing(
    cache: SourceCache, github: GitHubStandIn, repository: str, sha: str, token: str, status: str
) -> None:
    with pytest.raises(SourceError, match=status):
        await cache.fetch(repository, sha, github.url, token)
    assert len(tarball_requests(github)) == 1  # GitHub's final word: not asked again
    assert cache.downloads == 0
    folder = cache.path(repository, sha).parent
    assert not folder.exists() or list(folder.iterdir()) == []  # no tarball, no partial download


async def test_a_download_that_gave_up_is_tried_again_by_the_next_job(
    tmp_path: Path, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    cache = SourceCache(tmp_path / "work", http, RetryBudget(0))  # no second try
    github.faults.inject("GET", "/tarball/", status=502)
    with pytest.raises(SourceError, match="502"):
        await cache.fetch(REPO, SHA, github.url, TOKEN)
    assert (await cache.fetch(REPO, SHA, github.url, TOKEN)).exists()
    assert len(tarball_requests(github)) == 2


async def test_an_unreachable_api_raises_source_error_once_the_budget_is_spent(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens on the port once the probe is closed.
    cache = SourceCache(tmp_path / "work", http, RetryBudget(0.2, base_s=0.01))
    with pytest.raises(SourceError, match=r"GET http://127\.0\.0\.1.*: no answer: .*\(gave up after"):
        await cache.fetch(REPO, SHA, f"http://127.0.0.1:{port}", TOKEN)


# -- GitHub misbehaving ------------------------------------------------------------------------------

SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."


@pytest.fixture
def patient(tmp_path: Path, http: aiohttp.ClientSession) -> SourceCache:
    """A cache that keeps trying for a while, with short backoff steps."""
    return SourceCache(tmp_path / "work", http, QUICK)


async def test_passing_failures_in_a_row_are_waited_out_and_the_download_succeeds(
    patient: SourceCache, github: GitHubStandIn, tmp_path: Path
) -> None:
    github.faults.inject("GET", "/tarball/", status=502)
    github.faults.inject("GET", "/tarball/", drop=True)
    github.faults.inject("GET", "/tarball/", status=403, headers={"Retry-After": "1"}, message=SECONDARY)
    tarball = await patient.fetch(REPO, SHA, github.url, TOKEN)
    assert [fault.hits for fault in github.faults] == [1, 1, 1]
    assert patient.downloads == 1
    unpack(tarball, tmp_path / "workspace")
    assert (tmp_path / "workspace" / "src" / "main.c").read_text() == FILES["src/main.c"]


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param({"status": 500}, id="500"),
        pytest.param({"status": 503, "headers": {"Retry-After": "0"}}, id="503-retry-after"),
        pytest.param({"status": 429, "headers": {"Retry-After": "0"}}, id="429"),
        pytest.param({"drop": True}, id="dropped"),
        pytest.param({"status": 502, "act_first": True}, id="502-after-acting"),
    ],
)
async def test_a_passing_failure_of_the_redirected_download_is_tried_again_from_the_api(
    patient: SourceCache, github: GitHubStandIn, failure: dict[str, Any]
) -> None:
    # The redirect GitHub answers with is short-lived: a failed second leg starts again at the API.
    [fault] = [github.faults.inject("GET", "/_codeload/", **failure)]
    assert (await patient.fetch(REPO, SHA, github.url, TOKEN)).exists()
    assert fault.hits == 1
    assert patient.downloads == 1


@pytest.mark.parametrize(
    "status",
    [
        pytest.param(404, id="not-found"),
        pytest.param(401, id="bad-credentials"),
        pytest.param(422, id="unprocessable"),
        pytest.param(403, id="forbidden-not-a-limit"),
    ],
)
async def test_a_final_answer_fails_the_download_at_once(
    patient: SourceCache, github: GitHubStandIn, status: int
) -> None:
    github.faults.inject("GET", "/tarball/", status=status, times=None)
    with pytest.raises(SourceError, match=f": {status}: "):
        await patient.fetch(REPO, SHA, github.url, TOKEN)
    assert len(tarball_requests(github)) == 1
    assert patient.downloads == 0


async def test_a_download_failing_past_its_budget_fails_saying_it_gave_up(
    tmp_path: Path, http: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    cache = SourceCache(tmp_path / "work", http, RetryBudget(0.3, base_s=0.05))
    github.faults.inject("GET", "/tarball/", status=502, times=None)
    with pytest.raises(SourceError, match=r"502: .*\(gave up after \d+ tries"):
        await cache.fetch(REPO, SHA, github.url, TOKEN)
    assert len(tarball_requests(github)) >= 2
    folder = cache.path(REPO, SHA).parent
    assert not folder.exists() or list(folder.iterdir()) == []


async def test_jobs_waiting_on_a_download_that_is_tried_again_share_it(
    patient: SourceCache, github: GitHubStandIn
) -> None:
    github.faults.inject("GET", "/tarball/", status=502, times=2)
    fetched = await asyncio.gather(*(patient.fetch(REPO, SHA, github.url, TOKEN) for _ in range(4)))
    assert set(fetched) == {patient.path(REPO, SHA)}
    assert patient.downloads == 1
    assert len(tarball_requests(github)) == 3


async def test_jobs_waiting_on_a_download_share_its_failure(
    patient: SourceCache, github: GitHubStandIn
) -> None:
    github.faults.inject("GET", "/tarball/", status=404, times=None)
    outcomes = await asyncio.gather(
        *(patient.fetch(REPO, SHA, github.url, TOKEN) for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(outcome, SourceError) for outcome in outcomes)
    assert len(tarball_requests(github)) == 1


async def test_a_job_stopped_while_it_waits_does_not_cancel_the_download_others_wait_for(
    patient: SourceCache, github: GitHubStandIn
) -> None:
    github.faults.inject("GET", "/tarball/", delay_s=0.3)
    first = asyncio.create_task(patient.fetch(REPO, SHA, github.url, TOKEN))
    second = asyncio.create_task(patient.fetch(REPO, SHA, github.url, TOKEN))
    await asyncio.sleep(0.05)
    first.cancel()
    assert (await second).exists()
    assert patient.downloads == 1


async def test_both_legs_of_the_download_carry_the_api_version_and_the_runners_name(
    cache: SourceCache, github: GitHubStandIn
) -> None:
    await cache.fetch(REPO, SHA, github.url, TOKEN)
    legs = [
        request for request in github.requests if "/tarball/" in request.path or "codeload" in request.path
    ]
    assert len(legs) == 2
    for request in legs:
        assert request.headers["Accept"] == "application/vnd.github+json"
        assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert request.headers["User-Agent"] == f"kerrigan-runner/{kerrigan.__version__}"


async def test_the_token_is_not_sent_to_the_host_the_api_redirects_to(
    cache: SourceCache, github: GitHubStandIn
) -> None:
    # GitHub redirects a tarball to codeload.github.com: another origin, which must not get the token.
    # A second loopback server (another port: another origin) stands in for it.
    seen: list[dict[str, str]] = []

    async def codeload(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        return await proxy_tarball(github, request)

    async def api(request: web.Request) -> web.StreamResponse:
        seen.append(dict(request.headers))
        raise web.HTTPFound(f"{codeload_url}/download")

    codeload_url, stop_codeload = await serve({"/download": codeload})
    api_url, stop_api = await serve({f"/repos/{REPO}/tarball/{SHA}": api})
    try:
        tarball = await cache.fetch(REPO, SHA, api_url, TOKEN)
    finally:
        await stop_api()
        await stop_codeload()
    assert tarball.exists()
    [to_api, to_codeload] = seen
    assert to_api["Authorization"] == f"token {TOKEN}"
    assert "Authorization" not in to_codeload
    assert to_codeload["X-GitHub-Api-Version"] == "2022-11-28"


async def proxy_tarball(github: GitHubStandIn, request: web.Request) -> web.Response:
    """The stand-in's tarball of REPO at SHA, fetched with the test's own token."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(
            f"{github.url}/repos/{REPO}/tarball/{SHA}", headers={"Authorization": f"token {TOKEN}"}
        ) as response,
    ):
        return web.Response(body=await response.read(), content_type="application/x-gzip")


async def serve(
    routes: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]],
) -> tuple[str, Callable[[], Awaitable[None]]]:
    """A loopback server answering GET on ``routes``: its URL and how to stop it."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return f"http://127.0.0.1:{port}", runner.cleanup


@pytest.mark.parametrize(
    ("repository", "sha"),
    [
        ("octo", SHA),
        ("octo/", SHA),
        ("/firmware", SHA),
        ("../firmware", SHA),
        ("octo/..", SHA),
        ("octo/firmware/extra", SHA),
        (REPO, ""),
        (REPO, ".."),
        (REPO, "../../etc"),
        (REPO, "a\0b"),
    ],
)
def test_cache_paths_refuse_names_that_would_leave_the_cache(
    cache: SourceCache, repository: str, sha: str
) -> None:
    with pytest.raises(SourceError, match="not a repository and commit"):
        cache.path(repository, sha)


async def test_tarballs_unused_for_24_hours_are_expired(cache: SourceCache, github: GitHubStandIn) -> None:
    tarball = await cache.fetch(REPO, SHA, github.url, TOKEN)
    used = 50_000.0
    os.utime(tarball, (used, used))
    assert cache.expire(used + SOURCE_RETENTION_S - 1) == 0
    assert tarball.exists()
    assert cache.expire(used + SOURCE_RETENTION_S) == 1
    assert not tarball.exists()
    await cache.fetch(REPO, SHA, github.url, TOKEN)
    assert cache.downloads == 2


# -- unpack ------------------------------------------------------------------------------------------


def member(
    name: str, kind: bytes = tarfile.REGTYPE, *, linkname: str = "", mode: int = 0o644
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, linkname, mode
    return info


def build_tarball(path: Path, *entries: tuple[tarfile.TarInfo, bytes]) -> Path:
    """A gzipped tarball wrapping ``entries`` in a ``top`` folder, as GitHub wraps a tree."""
    with tarfile.open(path, "w:gz") as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        for info, content in entries:
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content) if info.isreg() else None)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the workspace that nothing in a tarball may reach."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "keep.txt").write_text("untouched\n")
    return path


def untouched(outside: Path) -> bool:
    return [entry.name for entry in outside.iterdir()] == ["keep.txt"] and (
        (outside / "keep.txt").read_text() == "untouched\n"
    )


def refused(tarball: Path, workspace: Path, match: str, limits: UnpackLimits | None = None) -> None:
    """Unpacking ``tarball`` fails with ``match``, leaves ``workspace`` empty and drops the tarball."""
    with pytest.raises(SourceError, match=match):
        unpack(tarball, workspace) if limits is None else unpack(tarball, workspace, limits)
    assert list(workspace.iterdir()) == []
    assert not tarball.exists()  # fetched again by the next job rather than kept as good


def test_unpack_strips_the_top_folder_and_empties_the_workspace_first(tmp_path: Path, outside: Path) -> None:
    tarball = build_tarball(tmp_path / "t.tar.gz", (member("top/src/new.c"), b"new\n"))
    workspace = tmp_path / "workspace"
    (workspace / "stale" / "deep").mkdir(parents=True)
    (workspace / "stale" / "deep" / "old.o").write_bytes(b"old")
    (workspace / "old.txt").write_text("old\n")
    (workspace / "link-out").symlink_to(outside)
    unpack(tarball, workspace)
    assert sorted(str(path.relative_to(workspace)) for path in workspace.rglob("*")) == ["src", "src/new.c"]
    assert untouched(outside)  # the symlink was removed, not followed


def test_unpack_keeps_links_that_stay_inside_the_tree(tmp_path: Path) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/docs/readme.md"), b"read me\n"),
        (member("top/README", tarfile.SYMTYPE, linkname="docs/readme.md"), b""),
        (member("top/copy.md", tarfile.LNKTYPE, linkname="top/docs/readme.md"), b""),
    )
    workspace = tmp_path / "workspace"
    unpack(tarball, workspace)
    assert (workspace / "README").is_symlink()
    assert (workspace / "README").readlink() == Path("docs/readme.md")
    assert (workspace / "README").read_text() == "read me\n"
    assert (workspace / "copy.md").read_text() == "read me\n"
    assert (workspace / "copy.md").stat().st_ino == (workspace / "docs" / "readme.md").stat().st_ino


def test_unpack_keeps_a_chain_of_links_in_any_order_and_folders_with_their_modes(tmp_path: Path) -> None:
    # git archive sorts by name: a link may come before the link it goes through.
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/board", tarfile.DIRTYPE, mode=0o3777), b""),
        (member("top/board/include/regs.h"), b"#define X 1\n"),
        (member("top/include", tarfile.SYMTYPE, linkname="platform/include"), b""),
        (member("top/platform", tarfile.SYMTYPE, linkname="board"), b""),
        (member("top/tools/up", tarfile.SYMTYPE, linkname=".."), b""),
    )
    workspace = tmp_path / "workspace"
    unpack(tarball, workspace)
    assert (workspace / "include" / "regs.h").read_text() == "#define X 1\n"
    assert (workspace / "tools" / "up" / "board" / "include" / "regs.h").exists()
    assert stat.S_IMODE((workspace / "board").stat().st_mode) == 0o755  # no sticky or set-group-id bit


def test_unpack_keeps_the_contents_modes_and_times_of_a_github_tarball(tmp_path: Path) -> None:
    # GitHub's tarballs start with a pax global header carrying the commit (`git archive` writes it).
    path = tmp_path / f"{SHA}.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": SHA}) as archive:
        archive.addfile(member("octo-firmware-c7e2a9d/", tarfile.DIRTYPE, mode=0o775))
        for name, content, mode in [("ci/run.sh", b"#!/bin/sh\n", 0o775), ("big.bin", bytes(3 << 20), 0o664)]:
            info = member(f"octo-firmware-c7e2a9d/{name}", mode=mode)
            info.size, info.mtime = len(content), 1_700_000_000
            archive.addfile(info, io.BytesIO(content))
    workspace = tmp_path / "workspace"
    unpack(path, workspace)
    assert sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*")) == [
        "big.bin",
        "ci",
        "ci/run.sh",
    ]
    assert (workspace / "big.bin").read_bytes() == bytes(3 << 20)
    assert stat.S_IMODE((workspace / "ci" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((workspace / "big.bin").stat().st_mode) == 0o644
    assert (workspace / "big.bin").stat().st_mtime == 1_700_000_000
    assert path.exists()


def test_unpack_refuses_the_long_symlink_chain_of_cve_2025_4517(tmp_path: Path, outside: Path) -> None:
    # As the public write-ups build it: 16 nested folders of 247-character names, each reached through a
    # one-letter link, so the chain's real path is past PATH_MAX and os.path.realpath (which the `data`
    # filter relies on) stops resolving it; a link at its end climbs back to the top, and a link through
    # it climbs one more level, out of the workspace. Python 3.11.7's `data` filter let evil.txt be written
    # into outside/.
    folder, steps, path = "d" * 247, "abcdefghijklmnop", "top"
    entries: list[tuple[tarfile.TarInfo, bytes]] = []
    for step in steps:
        entries.append((member(f"{path}/{folder}", tarfile.DIRTYPE, mode=0o755), b""))
        entries.append((member(f"{path}/{step}", tarfile.SYMTYPE, linkname=folder), b""))
        path = f"{path}/{folder}"
    chain = "/".join(steps) + "/" + "l" * 254
    entries.append((member(f"top/{chain}", tarfile.SYMTYPE, linkname="../" * len(steps)), b""))
    entries.append((member("top/escape", tarfile.SYMTYPE, linkname=f"{chain}/../outside"), b""))
    entries.append((member("top/escape/evil.txt"), b"written outside\n"))
    tarball = build_tarball(tmp_path / "t.tar.gz", *entries)
    refused(tarball, tmp_path / "workspace", f"member '{chain}' passes through the link 'a'")
    assert untouched(outside)


def test_unpack_refuses_a_link_escaping_through_a_chain_of_links_inside(
    tmp_path: Path, outside: Path
) -> None:
    # Each link alone stays inside; followed through the others, the last one leaves.
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/deep/er/file"), b"x\n"),
        (member("top/a", tarfile.SYMTYPE, linkname="deep/er"), b""),
        (member("top/b", tarfile.SYMTYPE, linkname="a/../.."), b""),  # a/.. is deep, deep/.. the top
        (member("top/c", tarfile.SYMTYPE, linkname="b/../outside"), b""),
    )
    refused(tarball, tmp_path / "workspace", "member 'c' links outside the workspace")
    assert untouched(outside)


def test_unpack_refuses_absolute_member_names(tmp_path: Path, outside: Path) -> None:
    target = outside / "evil.txt"
    tarball = build_tarball(tmp_path / "t.tar.gz", (member(str(target)), b"evil\n"))
    refused(tarball, tmp_path / "workspace", f"member '{target}' has an absolute name")
    assert untouched(outside)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("top/../../outside/evil.txt", id="dot-dot"),
        pytest.param("top/src/../../../outside/evil.txt", id="dot-dot-deeper"),
        pytest.param("top/src/../src/fine.c", id="dot-dot-staying-inside"),
    ],
)
def test_unpack_refuses_members_with_dot_dot(tmp_path: Path, outside: Path, name: str) -> None:
    tarball = build_tarball(tmp_path / "t.tar.gz", (member(name), b"evil\n"))
    refused(tarball, tmp_path / "workspace", r"has '\.\.' in its name")
    assert untouched(outside)


def test_unpack_refuses_members_outside_the_top_folder(tmp_path: Path) -> None:
    tarball = build_tarball(tmp_path / "t.tar.gz", (member("top/a.c"), b"a\n"), (member("other/b.c"), b"b\n"))
    refused(tarball, tmp_path / "workspace", "member 'other/b.c' is outside the tarball's top folder 'top'")


@pytest.mark.parametrize(
    "linkname",
    [
        pytest.param("../outside", id="relative"),
        pytest.param("ABSOLUTE", id="absolute"),
        pytest.param("src/../../outside", id="through-a-folder"),
    ],
)
def test_unpack_refuses_symlinks_pointing_outside(tmp_path: Path, outside: Path, linkname: str) -> None:
    if linkname == "ABSOLUTE":
        linkname = str(outside)
    tarball = build_tarball(
        tmp_path / "t.tar.gz", (member("top/escape", tarfile.SYMTYPE, linkname=linkname), b"")
    )
    refused(tarball, tmp_path / "workspace", "member 'escape' links outside the workspace")
    assert untouched(outside)


@pytest.mark.parametrize(
    "linkname",
    [pytest.param("../outside", id="outside"), pytest.param("src", id="inside")],
)
def test_unpack_refuses_a_file_written_through_a_symlink(
    tmp_path: Path, outside: Path, linkname: str
) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/src/main.c"), b"int main;\n"),
        (member("top/escape", tarfile.SYMTYPE, linkname=linkname), b""),
        (member("top/escape/evil.txt"), b"written through the link\n"),
    )
    refused(tarball, tmp_path / "workspace", "member 'escape/evil.txt' passes through the link 'escape'")
    assert untouched(outside)


def test_unpack_refuses_a_loop_of_links(tmp_path: Path) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/a", tarfile.SYMTYPE, linkname="b/x"), b""),
        (member("top/b", tarfile.SYMTYPE, linkname="a/y"), b""),
    )
    refused(tarball, tmp_path / "workspace", "member 'a' starts a loop of links")


@pytest.mark.parametrize(
    ("linkname", "error"),
    [
        pytest.param("top/../outside/keep.txt", "which is not a file earlier in the tarball", id="dot-dot"),
        pytest.param("ABSOLUTE", "which is not a file earlier in the tarball", id="absolute"),
        pytest.param("top/missing", "which is not a file earlier in the tarball", id="missing"),
        pytest.param("top/src", "which is not a file earlier in the tarball", id="a-folder"),
        pytest.param("top/link", "which is not a file earlier in the tarball", id="a-symlink"),
    ],
)
def test_unpack_refuses_hard_links_to_anything_but_a_file_of_the_tarball(
    tmp_path: Path, outside: Path, linkname: str, error: str
) -> None:
    if linkname == "ABSOLUTE":
        linkname = str(outside / "keep.txt")
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/src/main.c"), b"int main;\n"),
        (member("top/link", tarfile.SYMTYPE, linkname="src/main.c"), b""),
        (member("top/copy", tarfile.LNKTYPE, linkname=linkname), b""),
    )
    refused(tarball, tmp_path / "workspace", error)
    assert untouched(outside)
    assert (outside / "keep.txt").stat().st_nlink == 1  # not linked into the workspace


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        pytest.param(tarfile.CHRTYPE, "member 'null' is a character device", id="character-device"),
        pytest.param(tarfile.BLKTYPE, "member 'null' is a block device", id="block-device"),
        pytest.param(tarfile.FIFOTYPE, "member 'null' is a FIFO", id="fifo"),
        pytest.param(b"Q", "member 'null' is a member of a type other than", id="unknown-type"),
    ],
)
def test_unpack_refuses_special_files(tmp_path: Path, kind: bytes, error: str) -> None:
    device = member("top/null", kind)
    device.devmajor, device.devminor = 1, 3
    tarball = build_tarball(tmp_path / "t.tar.gz", (member("top/a.c"), b"a\n"), (device, b""))
    refused(tarball, tmp_path / "workspace", error)


def test_unpack_refuses_sparse_files(tmp_path: Path) -> None:
    # A sparse member's header size is not the size it unpacks to.
    path = tmp_path / "t.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        archive.addfile(member("top/holes.img", tarfile.GNUTYPE_SPARSE))
    refused(path, tmp_path / "workspace", "member 'holes.img' is a sparse file")


def test_unpack_refuses_the_same_path_twice(tmp_path: Path, outside: Path) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/run.sh"), b"echo fine\n"),
        (member("top/run.sh", tarfile.SYMTYPE, linkname="../outside/keep.txt"), b""),
    )
    refused(tarball, tmp_path / "workspace", "member 'run.sh' appears twice in the tarball")
    assert untouched(outside)


def test_unpack_drops_set_id_and_sticky_bits(tmp_path: Path) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz",
        (member("top/tool", mode=0o6755), b"#!/bin/sh\n"),
        (member("top/data", mode=0o7666), b"data\n"),
    )
    workspace = tmp_path / "workspace"
    unpack(tarball, workspace)
    assert stat.S_IMODE((workspace / "tool").stat().st_mode) == 0o755
    assert stat.S_IMODE((workspace / "data").stat().st_mode) == 0o644


class Zeros(io.RawIOBase):
    """``size`` zero bytes, read in chunks: a member's contents that are never held whole."""

    def __init__(self, size: int) -> None:
        self.left = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        count = min(len(buffer), self.left)
        buffer[:count] = bytes(count)
        self.left -= count
        return count


def test_unpack_stops_a_gzip_bomb_at_the_byte_limit(tmp_path: Path) -> None:
    # 256 MiB of zeros in 64 files of 4 MiB, well under 1 MiB gzipped; the limit is 32 MiB.
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        for number in range(64):
            info = member(f"top/zeros-{number:02}.bin")
            info.size = 4 << 20
            archive.addfile(info, Zeros(info.size))
    assert path.stat().st_size < 1 << 20
    refused(path, tmp_path / "workspace", "unpacks to more than 32 MiB", UnpackLimits(max_bytes=32 << 20))


def test_unpack_refuses_a_file_whose_header_alone_passes_the_byte_limit(tmp_path: Path) -> None:
    tarball = build_tarball(tmp_path / "t.tar.gz", (member("top/big.bin"), bytes(5000)))
    refused(tarball, tmp_path / "workspace", "unpacks to more than 4000 bytes", UnpackLimits(max_bytes=4000))


def test_unpack_stops_20000_tiny_files_at_the_file_limit(tmp_path: Path) -> None:
    path = tmp_path / "many.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        for number in range(20_000):
            info = member(f"top/f{number // 100}/{number}")
            info.size = 1
            archive.addfile(info, io.BytesIO(b"x"))
    limits = UnpackLimits(max_files=1000)  # the default, 200,000, would take long to build here
    refused(path, tmp_path / "workspace", "the repository's tarball has more than 1000 files", limits)


def test_unpack_stops_a_huge_pax_header_before_tarfile_reads_it_whole(tmp_path: Path) -> None:
    # tarfile reads a member's pax header into memory in one piece: the stream it reads is counted.
    path = tmp_path / "pax.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        info = member("top/a.txt")
        info.pax_headers = {"comment": "x" * (1 << 20)}
        archive.addfile(info, io.BytesIO(b""))
    limits = UnpackLimits(max_bytes=1000, max_files=10)
    refused(path, tmp_path / "workspace", "unpacks to more than 1000 bytes", limits)


def test_unpack_takes_an_uncompressed_tarball_too(tmp_path: Path) -> None:
    path = tmp_path / "plain.tar"
    with tarfile.open(path, "w") as archive:
        archive.addfile(member("top", tarfile.DIRTYPE, mode=0o755))
        info = member("top/a.txt")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"a\n"))
    unpack(path, tmp_path / "workspace")
    assert (tmp_path / "workspace" / "a.txt").read_text() == "a\n"


def test_unpack_within_the_limits_keeps_everything(tmp_path: Path) -> None:
    tarball = build_tarball(
        tmp_path / "t.tar.gz", (member("top/a/b.txt"), b"1234"), (member("top/c"), b"5678")
    )
    workspace = tmp_path / "workspace"
    unpack(tarball, workspace, UnpackLimits(max_bytes=8, max_files=3))  # a/, a/b.txt and c: three members
    assert (workspace / "a" / "b.txt").read_bytes() + (workspace / "c").read_bytes() == b"12345678"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"<html>rate limited</html>\n" * 40, id="not-a-tarball"),
        pytest.param(b"\x1f\x8b\x08\x00" + b"\x00" * 60, id="bad-gzip"),
    ],
)
def test_unpack_raises_source_error_for_a_corrupt_file(tmp_path: Path, content: bytes) -> None:
    corrupt = tmp_path / f"{SHA}.tar.gz"
    corrupt.write_bytes(content)
    refused(corrupt, tmp_path / "workspace", f"cannot unpack {SHA}.tar.gz")


def test_unpack_raises_source_error_for_a_truncated_tarball(tmp_path: Path) -> None:
    whole = build_tarball(
        tmp_path / "whole.tar.gz",
        (member("top/a.bin"), os.urandom(100_000)),
        (member("top/b.txt"), b"b\n"),
    ).read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    refused(truncated, tmp_path / "workspace", "cannot unpack truncated.tar.gz")
