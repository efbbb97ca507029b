"""Names in a job's environment: ``env`` names and secret names share one rule."""

from __future__ import annotations

import pytest

from kerrigan.core.variable_names import MAX_NAME, name_problem, secret_name


@pytest.mark.parametrize("name", ["A", "_x", "LAB_VPN_KEY", "baud2", "K" * MAX_NAME])
def test_shell_variable_names_pass(name: str) -> None:
    assert name_problem(name) is None
    assert name_problem(name, "environment name") is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "a secret name is 1 to 100 characters, not 0"),
        ("K" * (MAX_NAME + 1), "a secret name is 1 to 100 characters, not 101"),
        ("1A", "'1A' is not a secret name: letters, digits and '_', not starting with a digit"),
        ("A-B", "'A-B' is not a secret name: letters, digits and '_', not starting with a digit"),
        ("github_token", "'github_token' is not a secret name: names may not start with GITHUB_"),
        ("Kerrigan_Job", "'Kerrigan_Job' is not a secret name: names may not start with KERRIGAN_"),
    ],
)
def test_every_other_name_is_refused_naming_the_rule(name: str, message: str) -> None:
    assert name_problem(name) == message


def test_the_article_follows_what_is_named() -> None:
    assert name_problem("1A", "environment name") == (
        "'1A' is not an environment name: letters, digits and '_', not starting with a digit"
    )


def test_a_secret_name_is_stored_upper_case() -> None:
    assert secret_name("lab_vpn_key") == "LAB_VPN_KEY"
    with pytest.raises(ValueError, match="GITHUB_"):
        secret_name("GITHUB_X")
