"""Who reads which repository's sessions: read access to the repository on GitHub, as for GitHub Actions
logs.

A repository's sessions, jobs, output, raw logs, uploaded files and results are shown to System Admins, and
to anyone else (signed in on the pages, an API token's login, or nobody under ``KERRIGAN_PUBLIC_READ``) only
when the repository is public or GitHub says their permission there is read or more; GitHub's answers are
kept five minutes (:mod:`kerrigan.github.people`). The lab's own sessions (health checks: no repository)
are everyone's. A session of a repository someone may not read is answered as if there were none (404, the
same words), so its name and its sessions do not leak; a list leaves it out, and a page that shows the lab
(a device's jobs, the queue) shows its jobs without their repository, session or task. On a server without
the GitHub App nothing can be asked, and only System Admins read repositories' sessions.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Protocol, TypeVar

from aiohttp import web

from kerrigan.core.host_outage import HostOutage, StrandedJob
from kerrigan.core.inventory import REPOSITORY_PATTERN
from kerrigan.core.roles import Principal
from kerrigan.store.audit import AuditEntry
from kerrigan.store.history import JobEntry
from kerrigan.store.installations import repository_installations
from kerrigan.store.queue_view import HeldJob
from kerrigan.store.runners import HostReport
from kerrigan.web.errors import ApiError
from kerrigan.web.membership import ASK_TIMEOUT_S, People, people_of
from kerrigan.web.state import DATABASE

log = logging.getLogger(__name__)

HIDDEN: Final = "a job of a repository you cannot read"
"""What a page shows in place of a job's repository, session and task when its reader may not read it."""
_QUESTIONS_AT_ONCE: Final = 8
_REPOSITORY: Final = re.compile(REPOSITORY_PATTERN)


class OfRepository(Protocol):
    """Something shown of a repository's session (a job, a queue row)."""

    @property
    def repository(self) -> str:
        """The repository's ``owner/name`` (``""``: the lab's own)."""
        ...


T = TypeVar("T", bound=OfRepository)


@dataclass
class ReadAccess:
    """What one request's caller may read; GitHub's answers are kept for the rest of the request."""

    request: web.Request
    principal: Principal | None
    answers: dict[str, bool | None] = field(default_factory=lambda: {"": True})

    @property
    def everything(self) -> bool:
        """A System Admin reads every repository."""
        return self.principal is not None and self.principal.admin

    async def readable(self, names: Iterable[str]) -> frozenset[str]:
        """The repositories of ``names`` the caller may read (``""``, the lab's own, always)."""
        wanted = set(names)
        if self.everything:
            return frozenset(wanted)
        await self._ask(wanted - set(self.answers))
        return frozenset(name for name in wanted if self.answers.get(name))

    async def shown(self, items: Sequence[T], hide: Callable[[T], T]) -> list[T]:
        """``items`` as the caller may see them: those of repositories they may not read through ``hide``
        (their repository, session and task left out)."""
        readable = await self.readable(item.repository for item in items)
        return [item if item.repository in readable else hide(item) for item in items]

    async def hosts(self, reports: Sequence[HostReport]) -> list[HostReport]:
        """Runner hosts' reports without the lines of their health report (per-repository use, underused
        reservations) about repositories the caller may not read."""
        if self.everything:
            return list(reports)
        named = {
            str(item.get("repository", ""))
            for report in reports
            for key in _HEALTH_LISTS
            for item in _items(report.health, key)
        }
        readable = await self.readable(named)
        return [replace(report, health=_health_for(report.health, readable)) for report in reports]

    async def outages(self, outages: Mapping[str, HostOutage]) -> dict[str, HostOutage]:
        """Offline hosts with their stranded jobs as the caller may see them (:func:`hide_stranded`)."""
        jobs = [job for outage in outages.values() for job in outage.jobs]
        shown = dict(zip((job.id for job in jobs), await self.shown(jobs, hide_stranded), strict=True))
        return {
            host: replace(outage, jobs=tuple(shown[job.id] for job in outage.jobs))
            for host, outage in outages.items()
        }

    async def audit(self, entries: Sequence[AuditEntry]) -> list[AuditEntry]:
        """Audit rows without those about the secrets of repositories the caller may not read (a secret's
        row names its repository and the secret)."""
        secrets = {entry.subject_id for entry in entries if entry.subject_type == "secret"}
        readable = await self.readable(secrets)
        return [e for e in entries if e.subject_type != "secret" or e.subject_id in readable]

    def unanswered(self, names: Iterable[str]) -> frozenset[str]:
        """Those of ``names`` GitHub did not say whether the caller may read."""
        return frozenset(name for name in names if name in self.answers and self.answers[name] is None)

    async def all_readable(self, only: str | None = None) -> frozenset[str] | None:
        """Every repository with sessions the caller may read (with ``""``), or of ``only`` when a list is
        of that one repository (GitHub is asked about it alone); ``None``: every one."""
        if self.everything:
            return None
        if only is not None:
            return await self.readable([only])
        async with self.request.config_dict[DATABASE].sessions() as db:
            known = await repository_installations(db)
        return await self.readable([*known, ""])

    async def check(self, repository: str, missing: ApiError) -> None:
        """Raise ``missing`` (the answer for something that does not exist) unless the caller may read
        ``repository``; a 503 when GitHub did not say."""
        if await self.readable([repository]):
            return
        if self.answers.get(repository, False) is None:
            raise ApiError(
                503,
                "github_unavailable",
                "Kerrigan could not ask GitHub whether you may read this repository; try again in a minute.",
            )
        raise missing

    async def _ask(self, names: set[str]) -> None:
        if not names:
            return
        people = people_of(self.request)
        if people is None:  # no GitHub App: nobody but the admins reads a repository's sessions
            self.answers.update(dict.fromkeys(names, False))
            return
        malformed = {
            name for name in names if not _REPOSITORY.fullmatch(name) or name.endswith(("/.", "/.."))
        }
        self.answers.update(dict.fromkeys(malformed, False))  # a filter's or report's text: never asked
        names -= malformed
        if not names:
            return
        async with self.request.config_dict[DATABASE].sessions() as db:
            installations = await repository_installations(db, names)
        if names - set(installations):  # no session names its installation: the one on its owner
            installations = await self._by_owner(people, names - set(installations)) | installations
        login = self.principal.login if self.principal is not None else None
        limit = asyncio.Semaphore(_QUESTIONS_AT_ONCE)

        async def ask(name: str) -> None:
            installation = installations.get(name)
            if installation is None:  # no installation to ask with: nobody may know it
                self.answers[name] = False
                return
            async with limit:
                try:
                    async with asyncio.timeout(ASK_TIMEOUT_S):
                        self.answers[name] = await people.may_read(installation, name, login)
                except Exception as exc:  # whatever GitHub's client raised: not known, so not shown
                    log.warning(
                        "cannot ask GitHub whether %s may read %s: %s", login, name, type(exc).__name__
                    )
                    self.answers[name] = None

        await asyncio.gather(*(ask(name) for name in sorted(names)))

    async def _by_owner(self, people: People, names: set[str]) -> dict[str, int]:
        """The App's live installation on each repository's owner, where there is one."""
        try:
            async with asyncio.timeout(ASK_TIMEOUT_S):
                installed = await people.installations()
        except Exception as exc:  # as in _ask: not known, so not shown
            log.warning("cannot list the App's installations: %s", type(exc).__name__)
            return {}
        owners = {i.account.lower(): i.id for i in installed if not i.suspended}
        found = {name: owners.get(name.partition("/")[0].lower()) for name in names}
        return {name: number for name, number in found.items() if number is not None}


_ACCESS = web.RequestKey("read_access", ReadAccess)


def read_access(request: web.Request, principal: Principal | None) -> ReadAccess:
    """The caller's read access, one for the request."""
    if _ACCESS not in request:
        request[_ACCESS] = ReadAccess(request, principal)
    return request[_ACCESS]


def hide_job(job: JobEntry) -> JobEntry:
    """A job as a reader who may not read its repository sees it: when, where and how it ended, and
    nothing of the repository (its page shows :data:`HIDDEN` for it)."""
    return replace(job, session_id="", repository="", workflow="", task_id="", reason=None, detail=None)


def hide_held(job: HeldJob) -> HeldJob:
    """A job holding a device, as a reader who may not read its repository sees it."""
    return replace(job, repository="", session_id="", task_id="")


def hide_stranded(job: StrandedJob) -> StrandedJob:
    """A job on a silent runner host, as a reader who may not read its repository sees it."""
    return replace(job, repository="", session_id="", task_id="")


_HEALTH_LISTS: Final = ("repositories", "underused_reservations")  # an agent's report lines by repository


def _items(health: Mapping[str, Any] | None, key: str) -> list[Mapping[str, Any]]:
    listed = health.get(key) if isinstance(health, Mapping) else None
    return [item for item in listed if isinstance(item, Mapping)] if isinstance(listed, list) else []


def _health_for(health: Mapping[str, Any] | None, readable: frozenset[str]) -> Mapping[str, Any] | None:
    if not isinstance(health, Mapping):
        return health
    kept = dict(health)
    for key in _HEALTH_LISTS:
        if isinstance(health.get(key), list):
            kept[key] = [item for item in _items(health, key) if str(item.get("repository", "")) in readable]
    return kept
