"""Who may sign in: the rule of ``kerrigan.core.sign_in``, with GitHub's answers handed in."""

from __future__ import annotations

import pytest

from kerrigan.core.sign_in import (
    AccountKind,
    Admission,
    Installation,
    Outcome,
    SignInRule,
    admission,
    verdict,
    who_may,
)

OCTO = Installation(1, "Octo", AccountKind.ORGANIZATION)
LAB = Installation(2, "octo-lab", AccountKind.ORGANIZATION)
SUSPENDED = Installation(3, "octo-old", AccountKind.ORGANIZATION, suspended=True)
MONA = Installation(4, "mona", AccountKind.USER)
INSTALLED = (OCTO, LAB, SUSPENDED, MONA)
DEFAULT = SignInRule(admins=frozenset({"alice"}))
LISTED = SignInRule(
    admins=frozenset({"alice"}), orgs=frozenset({"octo", "elsewhere"}), logins=frozenset({"guest"})
)


@pytest.mark.parametrize(
    ("rule", "login", "grounds"),
    [
        (DEFAULT, "Alice", "a System Admin"),
        (DEFAULT, "olga", "an owner of a pool"),
        (DEFAULT, "Mona", "the Kerrigan App is installed on your account"),
        (LISTED, "GUEST", "named in KERRIGAN_ALLOWED_LOGINS"),
        (LISTED, "olga", "an owner of a pool"),
    ],
)
def test_some_people_need_no_question_to_github(rule: SignInRule, login: str, grounds: str) -> None:
    found = admission(rule, login, owners={"olga"}, installations=INSTALLED)
    assert found == Admission(grounds)
    assert verdict(login, found, {}).allowed


def test_by_default_the_organizations_the_app_is_installed_on_are_asked_with_their_installation() -> None:
    found = admission(DEFAULT, "rita", owners=set(), installations=INSTALLED)
    assert found.grounds is None
    assert found.ask == (("octo", 1), ("octo-lab", 2))
    assert found.unaskable == ("octo-old",)  # suspended: its installation cannot ask


def test_with_the_settings_only_their_organizations_count_and_one_without_the_app_cannot_be_asked() -> None:
    found = admission(LISTED, "rita", owners=set(), installations=INSTALLED)
    assert found.ask == (("octo", 1),)
    assert found.unaskable == ("elsewhere",)
    # A user the App is installed on is nobody special once the lab names who may sign in.
    assert admission(LISTED, "mona", owners=set(), installations=INSTALLED).grounds is None


def test_a_member_of_any_organization_asked_is_allowed() -> None:
    found = admission(DEFAULT, "rita", owners=set(), installations=INSTALLED)
    answer = verdict("rita", found, {"octo": False, "octo-lab": True})
    assert answer.outcome is Outcome.ALLOWED
    assert answer.words == "a member of octo-lab"
    # A member where GitHub answered counts even when another organization did not answer.
    assert verdict("rita", found, {"octo": None, "octo-lab": True}).allowed


def test_a_login_that_is_nowhere_a_member_is_refused_with_the_reasons() -> None:
    found = admission(LISTED, "mallory", owners=set(), installations=INSTALLED)
    answer = verdict("mallory", found, {"octo": False})
    assert answer.outcome is Outcome.REFUSED
    assert answer.words == (
        "GitHub says mallory is not a member of octo; the Kerrigan App is not installed on elsewhere (or is "
        "suspended there), so membership there cannot be checked."
    )


def test_a_login_the_rule_has_no_organization_for_is_refused() -> None:
    rule = SignInRule(logins=frozenset({"guest"}))
    found = admission(rule, "mallory", owners=set(), installations=INSTALLED)
    assert found == Admission(None)
    answer = verdict("mallory", found, {})
    assert (answer.outcome, answer.words) == (
        Outcome.REFUSED,
        "This lab does not name mallory among the people it lets in.",
    )


def test_an_unanswered_question_is_not_a_refusal() -> None:
    found = admission(DEFAULT, "rita", owners=set(), installations=INSTALLED)
    answer = verdict("rita", found, {"octo": False, "octo-lab": None})
    assert answer.outcome is Outcome.UNKNOWN
    assert "could not ask GitHub whether rita is a member of octo-lab" in answer.words


def test_who_may_sign_in_names_organizations_and_never_a_person() -> None:
    assert who_may(DEFAULT, INSTALLED) == (
        "The people who may sign in here are the members of the GitHub organizations the Kerrigan App is "
        "installed on (Octo and octo-lab), the users it is installed on, this lab's System Admins and the "
        "owners of its pools."
    )
    listed = who_may(LISTED, INSTALLED)
    assert "elsewhere and octo" in listed
    assert "KERRIGAN_ALLOWED_LOGINS" in listed
    assert "guest" not in listed
    assert "alice" not in listed
    assert who_may(DEFAULT, ()).startswith("The people who may sign in here are the users the Kerrigan App")
