"""The README's first commands work as written on a stock Debian 12 machine (Python 3.11.2, its pip)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

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


def _ours() -> dict[str, Requirement]:
    project = PYPROJECT["project"]
    listed = [*project["dependencies"], *project["optional-dependencies"]["test"]]
    return {canonicalize_name(requirement.name): requirement for requirement in map(Requirement, listed)}


def _caps(specifier: SpecifierSet) -> list[Version]:
    return [Version(item.version) for item in specifier if item.operator in ("<", "<=")]


def test_every_dependency_names_a_lower_bound() -> None:
    # Without one a resolver that backtracks may walk back through every release ever made.
    loose = [str(r) for r in _ours().values() if not any(s.operator in (">=", "~=") for s in r.specifier)]
    assert not loose


def test_no_dependency_admits_a_release_another_of_ours_refuses() -> None:
    """Where an installed dependency caps one of ours (schemathesis: ``pytest<10``), ours is capped as low:
    a resolver that picks the newest pytest first and only then meets the cap must backtrack, and pip 23.2
    (a new venv's) backtracked through dozens of unrelated releases for minutes."""
    ours = _ours()
    problems = []
    for distribution in importlib.metadata.distributions():
        name = canonicalize_name(distribution.metadata["Name"])
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
                continue
            wanted = canonicalize_name(requirement.name)
            if wanted not in ours or wanted == name or not (theirs := _caps(requirement.specifier)):
                continue
            own = _caps(ours[wanted].specifier)
            if not own or min(own) > min(theirs):
                problems.append(
                    f"{distribution.metadata['Name']} requires {requirement}; ours: {ours[wanted]}"
                )
    assert not problems
