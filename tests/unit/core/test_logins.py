"""GitHub logins: one rule for KERRIGAN_ADMINS, pool owners, the inventory file and the API."""

from __future__ import annotations

import pytest

from kerrigan.core.logins import is_login


@pytest.mark.parametrize("login", ["octocat", "a", "Lab-Bot", "x" * 39, "trailing-", "double--hyphen"])
def test_logins_github_has(login: str) -> None:
    assert is_login(login)


@pytest.mark.parametrize("login", ["", "-leading", "x" * 40, "with space", "émile", "a_b", "a.b", "a\n"])
def test_texts_that_are_no_login(login: str) -> None:
    assert not is_login(login)
