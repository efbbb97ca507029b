"""What GitHub says about people, for the web pages: the App's installations (whose accounts decide who may
sign in by default), whether a login belongs to an organization, and whether it may read a repository.

Every question is put as the App: the installations with its JWT, membership with the installation on that
organization (``GET /orgs/{org}/members/{username}``, which needs the ``members: read`` permission), read
access with the repository's installation (``GET /repos/{owner}/{repo}``: a public repository is readable
by anyone; else ``GET .../collaborators/{username}/permission``: read, triage, write, maintain or admin).
No user's own token is kept.

Answers are kept briefly, on the clock given (the database's, so a test's fake clock moves them too): the
installations for :data:`INSTALLATIONS_TTL_S`, read access for :data:`READ_TTL_S` (a list of sessions asks
about every repository with sessions: kept shorter, a reader refreshing it would spend the installation's
hourly allowance). Membership is never
kept: it is asked at sign-in and at each hourly check, which must see a change. A question GitHub did not
answer raises (and is not kept); a repository or installation that is gone reads as no access.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from cachetools import TTLCache
from gidgethub import BadRequest, RedirectionException

from kerrigan.core.inventory import RepositoryGlobError, validate_repository
from kerrigan.core.sign_in import AccountKind, Installation
from kerrigan.github.budget import APP
from kerrigan.github.client import acting_for
from kerrigan.github.github_app import GitHubApp

T = TypeVar("T")

INSTALLATIONS_TTL_S: Final = 300.0
READ_TTL_S: Final = 300.0
READ_PERMISSIONS: Final = frozenset({"read", "triage", "write", "maintain", "admin"})
GONE: Final = frozenset({403, 404})  # an installation suspended or deleted: its token cannot be minted


class GitHubPeople:
    """The questions the web pages put to GitHub about people, as the App ``app``."""

    def __init__(self, app: GitHubApp, clock: Callable[[], float]) -> None:
        self.app = app
        self._installations: TTLCache[str, tuple[Installation, ...]] = TTLCache(
            maxsize=1, ttl=INSTALLATIONS_TTL_S, timer=clock
        )
        self._private: TTLCache[tuple[int, str], bool | None] = TTLCache(
            maxsize=4096, ttl=READ_TTL_S, timer=clock
        )
        self._readers: TTLCache[tuple[int, str, str], bool] = TTLCache(
            maxsize=16384, ttl=READ_TTL_S, timer=clock
        )

    async def installations(self) -> tuple[Installation, ...]:
        """Every installation of the App, with its account and whether it is suspended."""
        cached = self._installations.get("all")
        if cached is not None:
            return cached
        client = self.app.client
        found = []
        with acting_for(APP):
            async for item in client.getiter(
                "/app/installations{?per_page}", {"per_page": 100}, jwt=self.app.tokens.app_jwt()
            ):
                found.append(_installation(item))
        answer = tuple(item for item in found if item is not None)
        self._installations["all"] = answer
        return answer

    async def is_member(self, installation_id: int, org: str, login: str) -> bool:
        """Whether GitHub says ``login`` is a member of ``org`` (asked with its installation)."""

        async def ask(token: str) -> Any:
            return await self.app.client.getitem(
                "/orgs/{org}/members/{username}", {"org": org, "username": login}, oauth_token=token
            )

        try:
            await self._as(installation_id, ask)
        except BadRequest as exc:
            if int(exc.status_code) == 404:
                return False
            raise
        except RedirectionException:  # 302: GitHub would show public members only; not a yes
            return False
        return True

    async def may_read(self, installation_id: int, full_name: str, login: str | None) -> bool:
        """Whether ``login`` (``None``: someone not signed in) may read the repository on GitHub: it is
        public, or the login's permission there is read or more. A name that is no repository's is never
        asked about (it goes into the request's path)."""
        if not is_repository(full_name):
            return False
        try:
            private = await self._is_private(installation_id, full_name)
            if not private:
                return private is False  # public: anyone; None: the installation cannot see it
            if login is None:
                return False
            key = (installation_id, full_name.lower(), login.lower())
            known = self._readers.get(key)
            if known is None:
                permission, _ = await self.app.repository(installation_id, full_name).access(login)
                known = permission in READ_PERMISSIONS
                self._readers[key] = known
        except BadRequest as exc:
            if int(exc.status_code) in GONE:
                return False
            raise
        return known

    async def _is_private(self, installation_id: int, full_name: str) -> bool | None:
        key = (installation_id, full_name.lower())
        if key in self._private:
            return self._private[key]
        private = await self.app.repository(installation_id, full_name).private()
        self._private[key] = private
        return private

    async def _as(self, installation_id: int, call: Callable[[str], Awaitable[T]]) -> T:
        """``call`` with the installation's token, counted against its budget; a token GitHub refused is
        dropped and the call made once more with a new one."""
        tokens = self.app.tokens
        with acting_for(installation_id):
            try:
                return await call(await tokens.token(installation_id))
            except BadRequest as exc:
                if int(exc.status_code) != 401:
                    raise
                tokens.forget(installation_id)
                return await call(await tokens.token(installation_id))


def is_repository(full_name: str) -> bool:
    """Whether ``full_name`` is a repository's ``owner/name`` (and no ``.`` or ``..``, which a path would
    take for a step)."""
    try:
        validate_repository(full_name)
    except RepositoryGlobError:
        return False
    return full_name.partition("/")[2] not in (".", "..")


def _installation(item: Any) -> Installation | None:
    """An installation from GitHub's ``installation`` object; ``None`` for one without what it needs."""
    if not isinstance(item, dict) or not isinstance(item.get("id"), int):
        return None
    account = item.get("account")
    if not isinstance(account, dict) or not isinstance(account.get("login"), str):
        return None
    try:
        kind = AccountKind(account.get("type"))
    except ValueError:  # an Enterprise, say: it has no members to ask about here
        return None
    return Installation(
        int(item["id"]), account["login"], kind, suspended=item.get("suspended_at") is not None
    )
