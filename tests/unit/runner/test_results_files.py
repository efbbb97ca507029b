"""The files a manifest's globs name in a workspace: regular files only, no link followed, and only the job's
own read (the agent is root; what it reads there, it reads on the job's behalf)."""

from __future__ import annotations

import os
import resource
import shutil
from pathlib import Path

import pytest

from kerrigan.core.masking import Masker
from kerrigan.runner.host_state import may_have_secrets
from kerrigan.runner.isolation.users import give_to
from kerrigan.runner.results import JobFileRefusedError, open_job_file, results_files, shows_secret

JOB_UID = 61170  # in the job users' range, held by no live job of this test


def names(workspace: Path, *globs: str, limit: int = 100) -> list[str]:
    return results_files(workspace, globs, limit)


def read(workspace: Path, path: str, owner: int | None) -> bytes:
    with open_job_file(workspace, path, owner) as opened:
        return opened.head(1 << 20)


def test_globs_match_as_documented_and_links_are_passed_over(tmp_path: Path) -> None:
    for path in ("results/a.xml", "results/deep/b.xml", "logs/console.log", "logs/uart/rx.txt", "top.xml"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    (tmp_path / "etc").symlink_to("/etc")  # a link to a folder of the host: never walked
    (tmp_path / "results" / "passwd.xml").symlink_to("/etc/passwd")
    assert names(tmp_path, "results/*.xml") == ["results/a.xml"]
    assert names(tmp_path, "**/*.xml") == ["results/a.xml", "results/deep/b.xml", "top.xml"]
    assert names(tmp_path, "logs/**") == ["logs/console.log", "logs/uart/rx.txt"]
    assert names(tmp_path, "etc/**", "etc/passwd") == []
    assert names(tmp_path, "**", limit=2) == ["logs/console.log", "logs/uart/rx.txt"]
    assert names(tmp_path, "results/?.xml", "./top.xml") == ["results/a.xml", "top.xml"]


def test_a_files_head_and_whole_size_are_read_from_the_descriptor(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "unit.xml").write_bytes(b"<testsuite/>" * 10)
    with open_job_file(tmp_path, "results/unit.xml", None) as opened:
        assert (opened.head(12), opened.size) == (b"<testsuite/>", 120)
        with opened.reader() as first, opened.reader() as second:  # each try of an upload from the start
            assert first.read(5) == b"<test"
            assert second.read() == b"<testsuite/>" * 10


def test_a_link_a_fifo_or_a_folder_where_a_file_was_listed_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "passwd.xml").symlink_to("/etc/passwd")
    os.mkfifo(tmp_path / "results" / "fifo.xml")  # an open for reading would wait for a writer forever
    (tmp_path / "results" / "folder.xml").mkdir()
    refused = {"passwd.xml": "symbolic link", "fifo.xml": "not a regular file", "folder.xml": "not a regular"}
    for name, why in refused.items():
        with pytest.raises(JobFileRefusedError, match=why):
            read(tmp_path, f"results/{name}", None)
    with pytest.raises(FileNotFoundError):
        read(tmp_path, "results/gone.xml", None)


def test_a_folder_swapped_for_a_link_after_the_walk_is_not_entered(tmp_path: Path) -> None:
    # The job still runs while the agent walks (a cgroup that would not empty): it lists logs/console.log,
    # then the job puts a link to a folder of the host where logs was.
    workspace, host = tmp_path / "workspace", tmp_path / "host"
    (workspace / "logs").mkdir(parents=True)
    (workspace / "logs" / "console.log").write_text("the job's\n")
    host.mkdir()
    (host / "console.log").write_text("the host's\n")
    assert names(workspace, "logs/**") == ["logs/console.log"]
    shutil.rmtree(workspace / "logs")
    (workspace / "logs").symlink_to(host)

    with pytest.raises(JobFileRefusedError, match="symbolic link"):
        read(workspace, "logs/console.log", None)


def test_a_workspace_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a.xml").write_text("x")
    (tmp_path / "workspace").symlink_to(tmp_path / "elsewhere")
    assert names(tmp_path / "workspace", "*.xml") == []
    with pytest.raises(JobFileRefusedError, match="symbolic link"):
        read(tmp_path / "workspace", "a.xml", None)


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user, and a link made as root, need root")
def test_a_hard_link_to_a_root_file_in_the_jobs_workspace_is_not_read(tmp_path: Path) -> None:
    # With fs.protected_hardlinks=0 (the kernel's default) a job may link any file it can name into its
    # workspace: root makes the link here, as the kernel would let the job. The agent, root, must not send
    # it: only the job's own files are read, checked on the descriptor that is read.
    secret = tmp_path / "devices.yml"
    secret.write_text("PDU_PASSWORD: hunter2\n")
    secret.chmod(0o600)
    workspace = tmp_path / "workspace"
    (workspace / "logs").mkdir(parents=True)
    (workspace / "logs" / "console.log").write_text("the job's own\n")
    give_to(workspace, JOB_UID)
    os.link(secret, workspace / "logs" / "x")
    os.link(workspace / "logs" / "console.log", workspace / "logs" / "again.log")  # the job's own, twice

    assert names(workspace, "logs/**") == ["logs/again.log", "logs/console.log", "logs/x"]
    with pytest.raises(JobFileRefusedError, match="belongs to uid 0, not the job's 61170"):
        read(workspace, "logs/x", JOB_UID)
    assert read(workspace, "logs/console.log", JOB_UID) == b"the job's own\n"
    assert read(workspace, "logs/again.log", JOB_UID) == b"the job's own\n"
    assert read(workspace, "logs/x", None) == b"PDU_PASSWORD: hunter2\n"  # a job run as the agent's user


def test_a_wide_workspace_is_walked_holding_only_the_folders_on_the_way_down_open(tmp_path: Path) -> None:
    for index in range(300):
        (tmp_path / f"run-{index:03}").mkdir()
        (tmp_path / f"run-{index:03}" / "result.xml").write_text("x")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 200), hard))  # fewer than the folders
    try:
        found = names(tmp_path, "*/result.xml", limit=1000)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert len(found) == 300


def test_a_file_or_folder_not_named_in_utf8_is_passed_over(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "own.xml").write_text("x")
    odd = os.fsdecode(b"odd-\xff")  # a name no URL of the runner protocol can carry
    (tmp_path / "results" / f"{odd}.xml").write_text("x")
    (tmp_path / odd).mkdir()
    (tmp_path / odd / "deep.xml").write_text("x")
    assert names(tmp_path, "**/*.xml") == ["results/own.xml"]


PASSWORD = "pdu-pass-9c4e1a77"


@pytest.mark.parametrize(
    ("written", "shows"),
    [
        ("".join(f"&#{ord(c)};" for c in PASSWORD), True),
        (f"{PASSWORD[:6]}<![CDATA[{PASSWORD[6:]}]]>", True),
        (f"{PASSWORD[:6]}<!-- -->{PASSWORD[6:]}", True),
        ("***", False),  # already masked in the bytes
        ("nothing of it", False),
    ],
)
def test_a_file_shows_a_secret_when_its_parsed_text_holds_one(written: str, shows: bool) -> None:
    data = f"<testsuite><testcase name='t'><failure>{written}</failure></testcase></testsuite>".encode()
    masker = Masker.for_secrets({"PDU_PASSWORD": PASSWORD})
    assert shows_secret(data, "results/r.xml", masker, "/ws") is shows


def test_an_offer_says_whether_its_job_may_have_secrets_and_saying_nothing_is_no() -> None:
    assert may_have_secrets({"secrets_allowed": True})
    assert not may_have_secrets({"secrets_allowed": False})
    assert not may_have_secrets({})  # an older server
    assert not may_have_secrets({"secrets_allowed": "true"})
