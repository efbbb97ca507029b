"""Who may sign in to the web pages (DESIGN.md, "Who may sign in"): the rule, given GitHub's answers.

``KERRIGAN_ALLOWED_ORGS`` and ``KERRIGAN_ALLOWED_LOGINS`` say who may sign in: the members of those
organizations and those logins. When neither is set, the App's installations say it: the members of the
organizations it is installed on and the users it is installed on. System Admins and the owners of a pool
may always sign in (they run the lab). An organization's membership is GitHub's answer, asked with the
App's installation on that organization, so an organization the App is not installed on (or whose
installation is suspended) cannot be asked, and nobody gets in through it.

Everything here is pure: the caller asks GitHub and hands the answers in.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


class AccountKind(enum.Enum):
    """What an installation's account is, as GitHub names it."""

    USER = "User"
    ORGANIZATION = "Organization"


@dataclass(frozen=True, slots=True)
class Installation:
    """An installation of the App: on whose account, and whether it is suspended."""

    id: int
    account: str
    kind: AccountKind
    suspended: bool = False


@dataclass(frozen=True, slots=True)
class SignInRule:
    """The settings that say who may sign in (logins and organizations lower-cased)."""

    admins: frozenset[str] = frozenset()
    orgs: frozenset[str] = frozenset()
    logins: frozenset[str] = frozenset()

    @property
    def by_installations(self) -> bool:
        """Neither list is set: the App's installations say who may sign in."""
        return not (self.orgs or self.logins)


@dataclass(frozen=True, slots=True)
class Admission:
    """What is known of a login before GitHub is asked: why it may sign in (``grounds``), else the
    organizations to ask about (each with the installation to ask with) and those that cannot be asked."""

    grounds: str | None
    ask: tuple[tuple[str, int], ...] = ()
    unaskable: tuple[str, ...] = ()


def admission(
    rule: SignInRule, login: str, *, owners: Collection[str], installations: Iterable[Installation]
) -> Admission:
    """The first step for ``login``; ``owners`` are the pools' owners, lower-cased."""
    found = tuple(installations)
    low = login.lower()
    if low in rule.admins:
        return Admission("a System Admin")
    if low in owners:
        return Admission("an owner of a pool")
    if rule.by_installations:
        users = {i.account.lower() for i in found if i.kind is AccountKind.USER and not i.suspended}
        if low in users:
            return Admission("the Kerrigan App is installed on your account")
        orgs = sorted({i.account.lower() for i in found if i.kind is AccountKind.ORGANIZATION})
    else:
        if low in rule.logins:
            return Admission("named in KERRIGAN_ALLOWED_LOGINS")
        orgs = sorted(rule.orgs)
    live = {i.account.lower(): i.id for i in found if i.kind is AccountKind.ORGANIZATION and not i.suspended}
    return Admission(
        None,
        ask=tuple((org, live[org]) for org in orgs if org in live),
        unaskable=tuple(org for org in orgs if org not in live),
    )


class Outcome(enum.Enum):
    """Whether a login may sign in: yes, no, or not known (GitHub did not answer)."""

    ALLOWED = "allowed"
    REFUSED = "refused"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Verdict:
    """The answer for one login, with its words: the grounds it may sign in on, or why not."""

    outcome: Outcome
    words: str

    @property
    def allowed(self) -> bool:
        """Whether the login may sign in."""
        return self.outcome is Outcome.ALLOWED


def _listed(names: Iterable[str], conjunction: str = "and") -> str:
    items = sorted(names)
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} {conjunction} {items[-1]}"


def verdict(login: str, first: Admission, answers: Mapping[str, bool | None]) -> Verdict:
    """The answer once GitHub was asked about the organizations of ``first.ask``: ``answers`` maps each
    to whether ``login`` is a member (``None``: GitHub did not answer)."""
    if first.grounds is not None:
        return Verdict(Outcome.ALLOWED, first.grounds)
    members = sorted(org for org, member in answers.items() if member)
    if members:
        return Verdict(Outcome.ALLOWED, f"a member of {members[0]}")
    unanswered = sorted(org for org, member in answers.items() if member is None)
    if unanswered:
        return Verdict(
            Outcome.UNKNOWN,
            f"Kerrigan could not ask GitHub whether {login} is a member of {_listed(unanswered, 'or')} "
            "(GitHub did not answer); try again in a minute.",
        )
    said_no = sorted(org for org, member in answers.items() if member is False)
    reasons = []
    if said_no:
        reasons.append(f"GitHub says {login} is not a member of {_listed(said_no, 'or')}")
    if first.unaskable:
        reasons.append(
            f"the Kerrigan App is not installed on {_listed(first.unaskable, 'or')} (or is suspended there), "
            "so membership there cannot be checked"
        )
    if not reasons:
        reasons.append(f"this lab does not name {login} among the people it lets in")
    text = "; ".join(reasons)
    return Verdict(Outcome.REFUSED, text[0].upper() + text[1:] + ".")


def who_may(rule: SignInRule, installations: Iterable[Installation]) -> str:
    """Who may sign in, in one sentence for the page that refuses someone (it names no person)."""
    if rule.by_installations:
        orgs = sorted(
            {i.account for i in installations if i.kind is AccountKind.ORGANIZATION and not i.suspended}
        )
        users = "the users the Kerrigan App is installed on"
        if orgs:
            users = (
                "the members of the GitHub organizations the Kerrigan App is installed on "
                f"({_listed(orgs)}), the users it is installed on"
            )
        return (
            f"The people who may sign in here are {users}, this lab's System Admins and the owners of its "
            "pools."
        )
    people = []
    if rule.orgs:
        plural = "s" if len(rule.orgs) > 1 else ""
        people.append(f"the members of the GitHub organization{plural} {_listed(rule.orgs)}")
    if rule.logins:
        people.append("the people this lab names (KERRIGAN_ALLOWED_LOGINS)")
    people.append("this lab's System Admins and the owners of its pools")
    return f"The people who may sign in here are {_listed_in_order(people)}."


def _listed_in_order(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"
