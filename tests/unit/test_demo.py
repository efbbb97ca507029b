"""``kerrigan demo``'s GitHub stand-in: a newcomer's checkout has no ``../shared``; nothing says so."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from kerrigan.demo import demo_github
from kerrigan.testing.github import schema


def test_without_github_s_description_the_demo_says_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(tmp_path / "missing.json"))
    schema._missing.cache_clear()  # another test may have had the stand-in warn already
    with caplog.at_level(logging.DEBUG):
        github = demo_github()
    assert github.description is None
    assert caplog.records == []


def test_with_github_s_description_the_demo_checks_kerrigan_s_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = schema.find_description()
    if found is None:
        pytest.skip("../shared/github-openapi is not beside this checkout")
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(found))
    assert demo_github().description is not None


def test_without_the_test_extras_the_demo_says_nothing_of_its_validator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # `pip install -e .` (the README's first command) installs no jsonschema, even beside ../shared.
    found = schema.find_description()
    if found is None:
        pytest.skip("../shared/github-openapi is not beside this checkout")
    monkeypatch.setenv(schema.ENVIRONMENT_VARIABLE, str(found))
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # what an import finds when it is not installed
    with caplog.at_level(logging.DEBUG):
        github = demo_github()
    assert github.description is None
    assert caplog.records == []
