"""Who may sign in to the web pages, asked of GitHub: at sign-in and again at least hourly.

The rule is :mod:`kerrigan.core.sign_in`; GitHub's answers come through :class:`People`, which the
application hands in once the GitHub App is connected (the web layer does not talk to GitHub itself).
Without it no organization can be asked, so only System Admins, the pools' owners and the logins named in
``KERRIGAN_ALLOWED_LOGINS`` may sign in.

Each question is given :data:`ASK_TIMEOUT_S`: a page never waits longer for GitHub. A question GitHub did
not answer leaves the outcome unknown: at sign-in that refuses (try again); at the hourly check a sign-in
keeps going for :data:`GRACE` past its due time, and then stops counting until GitHub answers
(fail-closed; the sign-in itself is not ended, so it counts again once GitHub answers yes).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Final, Protocol

from aiohttp import web
from cachetools import TTLCache

from kerrigan.config import Settings
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.sign_in import Installation, Outcome, SignInRule, Verdict, admission, verdict, who_may
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.inventory import pool_owners
from kerrigan.web.state import DATABASE, SETTINGS, writing

log = logging.getLogger(__name__)

ASK_TIMEOUT_S: Final = 10.0
RECHECK: Final = timedelta(hours=1)
"""A sign-in's login is asked about again this long after GitHub last confirmed it."""
GRACE: Final = timedelta(hours=1)
"""How long past its due check a sign-in keeps going while GitHub does not answer."""
UNANSWERED_S: Final = 60.0
REFUSED_S: Final = 60.0
"""A refusal at sign-in is remembered this long: signing in again and again asks GitHub (and writes the
audit log) once a minute at most."""


class People(Protocol):
    """What GitHub says about people (:class:`kerrigan.github.people.GitHubPeople`)."""

    async def installations(self) -> tuple[Installation, ...]:
        """Every installation of the App."""

    async def is_member(self, installation_id: int, org: str, login: str) -> bool:
        """Whether ``login`` is a member of ``org``, asked with the installation on it."""

    async def may_read(self, installation_id: int, full_name: str, login: str | None) -> bool:
        """Whether ``login`` (``None``: nobody signed in) may read the repository."""


class GitHubAnswers:
    """Where the application puts its :class:`People` once the GitHub App is connected (``None`` until
    then, and on a server without the App)."""

    def __init__(self, clock: Callable[[], float], people: People | None = None) -> None:
        self.people = people
        # Logins GitHub did not answer about lately, with that answer (see :func:`recheck`), kept on
        # ``clock`` (the database's, so a test's fake clock moves it too).
        self.unanswered: TTLCache[str, Verdict] = TTLCache(maxsize=4096, ttl=UNANSWERED_S, timer=clock)
        # Logins refused at sign-in lately, with the refusal (see :func:`admit`).
        self.refused: TTLCache[str, Verdict] = TTLCache(maxsize=4096, ttl=REFUSED_S, timer=clock)


PEOPLE = web.AppKey("github_people", GitHubAnswers)


def people_of(request: web.Request) -> People | None:
    """The application's :class:`People`, if it has one."""
    holder = request.config_dict.get(PEOPLE)
    return holder.people if holder is not None else None


def sign_in_rule(settings: Settings) -> SignInRule:
    """The rule the settings make."""
    return SignInRule(admins=settings.admins, orgs=settings.allowed_orgs, logins=settings.allowed_logins)


async def _installations(people: People | None) -> tuple[Installation, ...] | None:
    """The App's installations; ``None`` when GitHub did not say."""
    if people is None:
        return ()
    try:
        async with asyncio.timeout(ASK_TIMEOUT_S):
            return await people.installations()
    except Exception as exc:  # whatever GitHub's client raised (the web cannot name its errors)
        log.warning("cannot list the App's installations: %s", type(exc).__name__)
        return None


async def _member(people: People, installation_id: int, org: str, login: str) -> bool | None:
    try:
        async with asyncio.timeout(ASK_TIMEOUT_S):
            return await people.is_member(installation_id, org, login)
    except Exception as exc:  # as above: unknown, not a no
        log.warning("cannot ask GitHub whether %s is a member of %s: %s", login, org, type(exc).__name__)
        return None


async def decide(request: web.Request, login: str) -> Verdict:
    """Whether ``login`` may sign in, as the settings, the pools' owners and GitHub say now."""
    rule = sign_in_rule(request.config_dict[SETTINGS])
    people = people_of(request)
    async with request.config_dict[DATABASE].sessions() as db:
        owners = await pool_owners(db)
    first = admission(rule, login, owners=owners, installations=())
    if first.grounds is not None:
        return verdict(login, first, {})
    needs_installations = rule.by_installations or bool(rule.orgs)
    installations = await _installations(people) if needs_installations else ()
    if installations is None:
        return Verdict(
            Outcome.UNKNOWN,
            "Kerrigan could not ask GitHub which organizations it is installed on (GitHub did not answer); "
            "try again in a minute.",
        )
    first = admission(rule, login, owners=owners, installations=installations)
    answers: dict[str, bool | None] = {}
    if people is not None:  # else the organizations to ask (from GitHub's installations) are none
        # Asked at once: someone in none of many organizations waits for one answer, not for each.
        found = await asyncio.gather(*(_member(people, number, org, login) for org, number in first.ask))
        answers = {org: member for (org, _), member in zip(first.ask, found, strict=True)}
    return verdict(login, first, answers)


async def admit(request: web.Request, login: str) -> tuple[Verdict, bool]:
    """:func:`decide` at sign-in, and whether the answer is new (a refusal within :data:`REFUSED_S` of the
    last one is that one again: it is neither asked of GitHub nor audited twice)."""
    holder = request.config_dict.get(PEOPLE)
    refused = holder.refused if holder is not None else None
    if refused is not None and (known := refused.get(login.lower())) is not None:
        return known, False
    answer = await decide(request, login)
    if refused is not None and answer.outcome is Outcome.REFUSED:
        refused[login.lower()] = answer
    return answer, True


async def recheck(request: web.Request, login: str) -> Verdict:
    """:func:`decide` for a sign-in's hourly check; while GitHub does not answer about ``login``, it is
    asked at most once every :data:`UNANSWERED_S` (a page does not wait for GitHub on every request)."""
    holder = request.config_dict.get(PEOPLE)
    unanswered = holder.unanswered if holder is not None else None
    if unanswered is not None and (known := unanswered.get(login.lower())) is not None:
        return known
    answer = await decide(request, login)
    if unanswered is not None and answer.outcome is Outcome.UNKNOWN:
        unanswered[login.lower()] = answer
    return answer


async def who_may_sign_in(request: web.Request) -> str:
    """Who may sign in here, in one sentence naming no person (for the page that refuses someone)."""
    rule = sign_in_rule(request.config_dict[SETTINGS])
    installations = await _installations(people_of(request)) if rule.by_installations else ()
    return who_may(rule, installations or ())


async def audit_refusal(request: web.Request, login: str, reason: str, *, ended: bool = False) -> None:
    """Write to the audit log that ``login`` was refused sign-in, or (``ended``) that its sign-ins were
    ended because it may no longer sign in."""
    database = request.config_dict[DATABASE]
    at = database.clock()
    if ended:
        change = Change(KERRIGAN_ACTOR, at)
        entry = FieldChange(ChangeKind.REMOVE, "signin", login, "ended", None, reason)
    else:
        change = Change(login, at)
        entry = FieldChange(ChangeKind.ADD, "signin", login, "refused", None, reason)
    async with writing(request) as db:
        await record(db, change, entry)


def check_due(checked_at: datetime, now: datetime) -> bool:
    """Whether a sign-in last confirmed at ``checked_at`` is to be asked about again."""
    return now - checked_at >= RECHECK


def in_grace(checked_at: datetime, now: datetime) -> bool:
    """Whether a sign-in whose check GitHub did not answer still counts."""
    return now - checked_at < RECHECK + GRACE
