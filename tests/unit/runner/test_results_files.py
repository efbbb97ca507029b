"""The files a manifest's globs name in a workspace: regular files only, no link followed."""

from __future__ import annotations

from pathlib import Path

from kerrigan.runner.results import results_files


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
