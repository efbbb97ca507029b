"""The README's first commands work as written on a stock Debian 12 machine (Python 3.11.2, its pip)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("version", ["3.11.0", "3.11.2", "3.11.7", "3.11.13", "3.12.3", "3.13.1"])
def test_requires_python_admits_every_3_11_and_later(version: str) -> None:
    # An older 3.11 is safe: the runner unpacks tarballs with checks of its own (kerrigan.core.unpacking).
    assert version in SpecifierSet(PYPROJECT["project"]["requires-python"])


@pytest.mark.parametrize("path", ["README.md", ".ci/run", "docs/runner.md", "docs/github-app.md"])
def test_no_install_command_needs_ignore_requires_python(path: str) -> None:
    assert "--ignore-requires-python" not in (REPO / path).read_text(encoding="utf-8")


def test_readme_commands_are_the_ones_checked_here() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(.*?)```", readme, re.DOTALL)
    assert "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && kerrigan demo\n" in commands
    assert "pip install -e '.[test]' && python -m pytest\n" in commands
