"""The files a manifest's globs name in a workspace: regular files only, no link followed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerrigan.core.masking import Masker
from kerrigan.runner.host_state import may_have_secrets
from kerrigan.runner.results import results_files, shows_secret


def names(workspace: Path, *globs: str, limit: int = 100) -> list[str]:
    return [path for path, _ in results_files(workspace, globs, limit)]


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
