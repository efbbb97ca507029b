"""Artifacts unpacked by the runner host: into the folder the offer names, and nowhere else, whatever the
offer says (it may come from a manifest stored before a rule was added, or from a server that is wrong)."""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest

from kerrigan.core.artifact_archive import ZipCheck
from kerrigan.runner.artifacts import download_artifacts, unpack_artifact
from kerrigan.runner.github_requests import RetryBudget
from kerrigan.runner.sources import SourceError
from kerrigan.testing.github import GitHubStandIn

REPO: Final = "octo/firmware"
RUN_ID: Final = 12087000123
TOKEN: Final = "ghs_artifacttoken"
NAME: Final = "firmware-image"
HOSTILE: Final = [
    ("..", "'..' climbs out of the workspace with '..'"),
    ("../..", "'../..' climbs out of the workspace with '..'"),
    ("./..", "'./..' climbs out of the workspace with '..'"),
    ("../../../../../..", "'../../../../../..' climbs out of the workspace with '..'"),
    ("a/../../x", "'a/../../x' climbs out of the workspace with '..'"),
    ("/etc", "'/etc' is absolute: paths are relative to the job's workspace (the repository)"),
    ("/", "'/' is absolute: paths are relative to the job's workspace (the repository)"),
    ("a\\..\\..", "'a\\\\..\\\\..' holds a NUL or a backslash: write folders with '/'"),
    ("a\0b", "'a\\x00b' holds a NUL or a backslash: write folders with '/'"),
]


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def everything(top: Path) -> set[str]:
    """Every path below ``top`` (links not followed)."""
    return {str(path.relative_to(top)) for path in top.rglob("*")}


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace deep enough in ``tmp_path`` that every climb tried lands where the test sees it (and
    nowhere else, should the code under test let it climb)."""
    folder = tmp_path / "host" / "lab" / "var" / "lib" / "work" / "workspaces" / "octo-firmware--flash"
    folder.mkdir(parents=True)
    (folder / "README.md").write_text("# firmware\n", encoding="utf-8")
    return folder


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "artifact.zip"
    path.write_bytes(zipped({"image.bin": b"fw", "out/flash.sh": b"#!/bin/sh\n", "README.md": b"planted"}))
    return path


@pytest.mark.parametrize(("folder", "problem"), HOSTILE)
def test_a_folder_out_of_the_workspace_is_refused_and_nothing_is_written(
    tmp_path: Path, workspace: Path, archive: Path, folder: str, problem: str
) -> None:
    before = everything(tmp_path)
    with pytest.raises(SourceError) as refused:
        unpack_artifact(archive, workspace, folder, ZipCheck(NAME))
    assert str(refused.value) == f"artifact {NAME!r}: path {problem}"
    assert everything(tmp_path) == before
    assert (workspace / "README.md").read_text(encoding="utf-8") == "# firmware\n"


@pytest.mark.parametrize("folder", [".", "", "./", "build", "build/", "./build//out"])
def test_the_artifact_lands_in_the_folder_named(workspace: Path, archive: Path, folder: str) -> None:
    unpack_artifact(archive, workspace, folder, ZipCheck(NAME))
    target = workspace.joinpath(*[part for part in folder.split("/") if part not in ("", ".")])
    assert (target / "image.bin").read_bytes() == b"fw"
    assert (target / "out" / "flash.sh").read_bytes() == b"#!/bin/sh\n"


def test_a_folder_that_is_a_link_in_the_workspace_is_refused(
    tmp_path: Path, workspace: Path, archive: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "build").symlink_to(elsewhere)
    with pytest.raises(SourceError, match="'build' is a link"):
        unpack_artifact(archive, workspace, "build/deeper", ZipCheck(NAME))
    assert not any(elsewhere.iterdir())
    assert not (workspace / "build" / "deeper").exists()


def test_a_member_through_a_link_in_the_workspace_is_refused(
    tmp_path: Path, workspace: Path, archive: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "out").symlink_to(elsewhere)
    with pytest.raises(SourceError, match="'out' is a link"):
        unpack_artifact(archive, workspace, ".", ZipCheck(NAME))
    assert not any(elsewhere.iterdir())


def test_a_member_over_a_link_in_the_workspace_is_refused(tmp_path: Path, workspace: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("mine", encoding="utf-8")
    (workspace / "image.bin").symlink_to(victim)
    archive = tmp_path / "one.zip"
    archive.write_bytes(zipped({"image.bin": b"overwritten"}))
    with pytest.raises(SourceError, match=f"artifact {NAME!r} could not be unpacked"):
        unpack_artifact(archive, workspace, ".", ZipCheck(NAME))
    assert victim.read_text(encoding="utf-8") == "mine"


def test_a_workspace_that_is_a_link_is_refused(tmp_path: Path, archive: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "linked").symlink_to(real)
    with pytest.raises(SourceError):
        unpack_artifact(archive, tmp_path / "linked", ".", ZipCheck(NAME))
    assert not any(real.iterdir())


def test_files_get_their_modes_whatever_the_umask(tmp_path: Path, workspace: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        script = zipfile.ZipInfo("run.sh")
        script.external_attr = (stat.S_IFREG | 0o4777) << 16
        archive.writestr(script, b"#!/bin/sh\n")
        archive.writestr("data.txt", b"x")
    path = tmp_path / "modes.zip"
    path.write_bytes(buffer.getvalue())
    unpack_artifact(path, workspace, "bin", ZipCheck(NAME))
    assert stat.S_IMODE((workspace / "bin" / "run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((workspace / "bin" / "data.txt").stat().st_mode) == 0o644
    assert stat.S_IMODE((workspace / "bin").stat().st_mode) == 0o755


# -- the offer, through download_artifacts ---------------------------------------------------------------


@pytest.fixture
async def github() -> AsyncIterator[GitHubStandIn]:
    async with GitHubStandIn(public_key="unused") as stand_in:
        stand_in.add_installation(1, "octo")
        stand_in.add_repository(REPO, 1)
        stand_in.tokens[TOKEN] = (1, datetime.now(UTC) + timedelta(hours=1))
        stand_in.add_artifact(REPO, RUN_ID, NAME, {"image.bin": b"fw", "launch.py": b"import os\n"})
        yield stand_in


def offer(*downloads: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "812",
        "repository": REPO,
        "workflow_run_id": RUN_ID,
        "artifacts": {"download": list(downloads), "upload": []},
    }


async def fetch(github: GitHubStandIn, job: dict[str, Any], workspace: Path, tmp_path: Path) -> None:
    async with aiohttp.ClientSession() as http:
        await download_artifacts(
            http,
            job,
            api_url=github.url,
            token=TOKEN,
            workspace=workspace,
            scratch=tmp_path / "host" / "lab" / "var" / "lib" / "work" / "artifacts",
            limits=ZipCheck(NAME).limits,
            retry=RetryBudget(0.0),
        )


@pytest.mark.parametrize(("folder", "problem"), HOSTILE)
async def test_an_offer_naming_a_folder_out_of_the_workspace_fails_before_anything_is_fetched(
    github: GitHubStandIn, tmp_path: Path, workspace: Path, folder: str, problem: str
) -> None:
    before = everything(tmp_path)
    with pytest.raises(SourceError) as refused:
        await fetch(github, offer({"name": NAME, "path": folder}), workspace, tmp_path)
    assert str(refused.value) == f"artifact {NAME!r}: path {problem}"
    assert everything(tmp_path) - before <= {"host/lab/var/lib/work/artifacts"}
    assert not [request for request in github.requests if "/artifacts" in request.path]


async def test_one_hostile_folder_among_several_fails_the_offer_before_any_is_unpacked(
    github: GitHubStandIn, tmp_path: Path, workspace: Path
) -> None:
    job = offer({"name": NAME, "path": "build"}, {"name": NAME, "path": "../.."})
    with pytest.raises(SourceError, match=r"path '\.\./\.\.' climbs out"):
        await fetch(github, job, workspace, tmp_path)
    assert not (workspace / "build").exists()


@pytest.mark.parametrize("folder", [["../.."], 7, {"p": ".."}])
async def test_an_offer_whose_folder_is_not_text_fails_naming_it(
    github: GitHubStandIn, tmp_path: Path, workspace: Path, folder: object
) -> None:
    with pytest.raises(SourceError, match=f"artifact {NAME!r}: path .* is not a folder of the workspace"):
        await fetch(github, offer({"name": NAME, "path": folder}), workspace, tmp_path)


async def test_an_offer_folder_in_the_workspace_is_unpacked_there(
    github: GitHubStandIn, tmp_path: Path, workspace: Path
) -> None:
    await fetch(github, offer({"name": NAME, "path": "build/"}), workspace, tmp_path)
    assert (workspace / "build" / "image.bin").read_bytes() == b"fw"


async def test_a_zip_on_its_way_is_the_agents_alone(
    github: GitHubStandIn, tmp_path: Path, workspace: Path
) -> None:
    # Downloaded as root beside other jobs' zips: no job may read another repository's artifact there.
    await fetch(github, offer({"name": NAME, "path": "build"}), workspace, tmp_path)
    scratch = tmp_path / "host" / "lab" / "var" / "lib" / "work" / "artifacts"
    assert stat.S_IMODE(scratch.stat().st_mode) == 0o700
    assert not any(scratch.iterdir())  # and it goes once unpacked


def test_a_member_over_a_hard_link_in_the_workspace_replaces_the_name_not_what_it_links_to(
    tmp_path: Path, workspace: Path
) -> None:
    # A process left in the workspace could link a file it may not write (without fs.protected_hardlinks):
    # root writing "over" the name must not write through the link.
    victim = tmp_path / "victim"
    victim.write_text("mine", encoding="utf-8")
    (workspace / "image.bin").hardlink_to(victim)
    archive = tmp_path / "one.zip"
    archive.write_bytes(zipped({"image.bin": b"fw", "README.md": b"the artifact's"}))
    unpack_artifact(archive, workspace, ".", ZipCheck(NAME))
    assert victim.read_text(encoding="utf-8") == "mine"
    assert (workspace / "image.bin").read_bytes() == b"fw"
    assert (workspace / "README.md").read_bytes() == b"the artifact's"  # a file of the repository's: replaced


def test_a_member_over_a_folder_in_the_workspace_is_refused(tmp_path: Path, workspace: Path) -> None:
    (workspace / "image.bin").mkdir()
    archive = tmp_path / "one.zip"
    archive.write_bytes(zipped({"image.bin": b"fw"}))
    with pytest.raises(SourceError, match=r"unpacked: .*'image\.bin' is a folder in the workspace"):
        unpack_artifact(archive, workspace, ".", ZipCheck(NAME))
