"""The token an accepted job fetches its repository with: minted once per lease, handed again only to the
same host's repeated accept of that lease, forgotten (and revoked by the runner) when the job leaves the
host's hands, however it leaves them."""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from cachetools import TTLCache

from kerrigan.core.github_retry import retry_after
from kerrigan.core.lifecycle import JobState
from kerrigan.core.runner_protocol import JobCredentials
from kerrigan.store.database import Database
from kerrigan.store.jobs.holders import HeldLease, accepted_lease, job_repository
from kerrigan.store.signals import Fact, JobMoved

log = logging.getLogger(__name__)

Credentials = Callable[[int, str], Awaitable[JobCredentials]]
MINT_RETRY_S: Final = 20.0  # how long an accept keeps minting its token through GitHub's transient errors
IN_HAND: Final = frozenset({JobState.ACCEPTED, JobState.RUNNING})  # a job whose lease its token is minted for


class Answer(Protocol):
    """What GitHub answered to a failed mint (see ``kerrigan.github.client.GitHubAnswer``)."""

    @property
    def status(self) -> int | None: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    @property
    def message(self) -> str: ...


class MintFailedError(Exception):
    """GitHub would not mint the job's token in time; the accept is answered 503 and the runner retries."""


class LeaseEndedError(Exception):
    """The lease the token was being minted for ended meanwhile: the token is handed to no one."""


@dataclass(frozen=True, slots=True)
class _Minted:
    lease: HeldLease
    installation_id: int
    credentials: JobCredentials


class JobTokens:
    """The repository-scoped tokens of accepted jobs, one per lease.

    ``credentials`` mints one (the app wires the GitHub App; without it no job gets a token), ``answer_of``
    reads GitHub's answer out of a failed mint, and ``revoking`` is told the installation of each token
    the runner revokes (the app counts the runner's DELETE in that installation's GitHub budget, which the
    server's own requests share).

    A token is handed again only to a repeated accept of the lease it was minted for (the same host, the
    lease granted at the same time): a job its host lost and that was leased again, to another host or to
    the same one, gets a new token, and the one the old host holds dies with the old host's revocation
    alone. A token is forgotten when its job leaves the host's hands by any path (its runner's calls, a
    cancel, a lost lease, a withdrawal, the queue-wait budget), as the store's committed job moves say.
    Each server process keeps its own: a lease another process ended is found stale by its key here.
    """

    def __init__(self, database: Database, *, retry_s: float = MINT_RETRY_S, backoff_s: float = 0.5) -> None:
        self.database = database
        self.retry_s = retry_s
        self.backoff_s = backoff_s
        self.credentials: Credentials | None = None
        self.answer_of: Callable[[BaseException], Answer | None] = lambda _exc: None
        self.revoking: Callable[[int], None] | None = None
        # job id -> the token minted for its lease (tokens live an hour)
        self._minted: TTLCache[str, _Minted] = TTLCache(maxsize=10_000, ttl=50 * 60)
        # One mint per job at a time: two accepts at once share one token. Held by the accepts waiting.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self._minting: dict[str, bool] = {}  # job id -> whether its lease still holds, while GitHub mints
        database.signals.listen_facts(self._heard)

    async def of(self, lease: HeldLease) -> JobCredentials | None:
        """The token for the repository of the job ``lease`` holds, minted when its host first accepts it and
        handed again to the same host's repeated accept of that lease. GitHub's transient errors are retried
        with its backoff for ``retry_s``; then :class:`MintFailedError` (the runner retries its accept). A
        permanent refusal gives no token: the runner then fails the job rather than run stale files. A lease
        that ended while the token was minted raises :class:`LeaseEndedError`."""
        if self.credentials is None:
            return None
        lock = self._locks.get(lease.job_id)
        if lock is None:
            lock = self._locks[lease.job_id] = asyncio.Lock()
        async with lock:
            cached = self._minted.get(lease.job_id)
            if cached is not None and cached.lease == lease:
                return cached.credentials
            async with self.database.sessions() as session:
                found = await job_repository(session, lease.job_id)
            if found is None:
                return None
            installation_id, repository = found
            if installation_id is None or not repository:  # a health check: no repository, so no token
                return None
            self._minting[lease.job_id] = True
            try:
                minted = await self._mint(installation_id, repository, lease.job_id)
                if minted is None:
                    return None
                # The accept committed before the mint: has the lease ended since? A move this process
                # committed says so at once (even one after the read below), the database for the others'.
                async with self.database.sessions() as session:
                    current = await accepted_lease(session, lease.job_id)
                held = self._minting[lease.job_id] and current == lease
            finally:
                del self._minting[lease.job_id]
            if not held:
                # Nobody was handed it, so no runner revokes it; it never left this process and expires
                # within the hour (the App's key, which mints any token, is here anyway).
                log.info(
                    "job %s: its lease ended while its token was minted; the token is not handed",
                    lease.job_id,
                )
                raise LeaseEndedError(f"job {lease.job_id} is no longer {lease.host}'s")
            if lease.job_id in self._minted:  # an earlier lease that ended unheard here (another process)
                self.forget(lease.job_id)
            self._minted[lease.job_id] = _Minted(lease, installation_id, minted)
            return minted

    async def _mint(self, installation_id: int, repository: str, job_id: str) -> JobCredentials | None:
        """A token for ``repository``, through GitHub's transient errors for ``retry_s``."""
        assert self.credentials is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_s
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self.credentials(installation_id, repository)
            except Exception as exc:
                answer = self.answer_of(exc)
                retry = (
                    retry_after(
                        answer.status,
                        answer.headers,
                        answer.message,
                        attempt,
                        time.time(),
                        base_s=self.backoff_s,
                    )
                    if answer is not None
                    else None
                )
                if retry is None:
                    log.exception("could not mint a token for %s (job %s)", repository, job_id)
                    return None
                if loop.time() + retry.delay_s > deadline:
                    raise MintFailedError(
                        f"GitHub did not mint a token for {repository}: {retry.reason}"
                    ) from exc
                log.warning(
                    "minting a token for %s (job %s): %s; again in %.1f s",
                    repository,
                    job_id,
                    retry.reason,
                    retry.delay_s,
                )
                await asyncio.sleep(retry.delay_s)

    def _heard(self, fact: Fact) -> None:
        """A committed job move: a job that left its host's hands (ended, or back in the queue) has its
        token forgotten, and one being minted for it is not handed out."""
        if not isinstance(fact, JobMoved) or fact.after in IN_HAND:
            return
        job_id = str(fact.job_id)
        if job_id in self._minting:
            self._minting[job_id] = False
        self.forget(job_id)

    def forget(self, job_id: str) -> None:
        """The job left its host's hands: its token is not handed out again, and the server counts the
        runner's revocation of it now.

        The runner revokes a job's tokens when the job is over on its host: it ended there (its end
        reported, withdrawn, or refused before it started), or the server showed the job is no longer the
        host's (a heartbeat's answer lacks it, or a start or repeated accept is refused or answers another
        state: its lease was lost, or it was cancelled before it started). So
        each token handed out is revoked once, by the host it was handed to, whoever ended the job: it is
        counted once, here. A host that never comes back never sends that DELETE; counting it anyway keeps
        the budget on the safe side.
        """
        minted = self._minted.pop(job_id, None)
        if minted is not None and self.revoking is not None:
            self.revoking(minted.installation_id)
