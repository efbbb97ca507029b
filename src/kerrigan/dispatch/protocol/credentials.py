"""The token an accepted job fetches its repository with: minted once per acceptance, handed again to a
repeated accept, forgotten (and revoked by the runner) when the job ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final, Protocol

from cachetools import TTLCache

from kerrigan.core.github_retry import retry_after
from kerrigan.core.runner_protocol import JobCredentials
from kerrigan.store.database import Database
from kerrigan.store.jobs.holders import job_repository

log = logging.getLogger(__name__)

Credentials = Callable[[int, str], Awaitable[JobCredentials]]
MINT_RETRY_S: Final = 20.0  # how long an accept keeps minting its token through GitHub's transient errors


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


class JobTokens:
    """The repository-scoped tokens of accepted jobs.

    ``credentials`` mints one (the app wires the GitHub App; without it no job gets a token), ``answer_of``
    reads GitHub's answer out of a failed mint, and ``revoking`` is told the installation of each token
    the runner revokes when its job ends (the app counts the runner's DELETE in that installation's GitHub
    budget, which the server's own requests share).
    """

    def __init__(self, database: Database, *, retry_s: float = MINT_RETRY_S, backoff_s: float = 0.5) -> None:
        self.database = database
        self.retry_s = retry_s
        self.backoff_s = backoff_s
        self.credentials: Credentials | None = None
        self.answer_of: Callable[[BaseException], Answer | None] = lambda _exc: None
        self.revoking: Callable[[int], None] | None = None
        # job id -> (installation, the token minted when it was accepted): tokens live an hour
        self._minted: TTLCache[str, tuple[int, JobCredentials]] = TTLCache(maxsize=10_000, ttl=50 * 60)

    async def of(self, job_id: str) -> JobCredentials | None:
        """The token for the job's repository, minted when the runner first accepts it and handed again to a
        repeated accept. GitHub's transient errors are retried with its backoff for ``retry_s``; then
        :class:`MintFailedError` (the runner retries its accept). A permanent refusal gives no token: the
        runner then fails the job rather than run stale files."""
        if self.credentials is None:
            return None
        cached = self._minted.get(job_id)
        if cached is not None:
            return cached[1]
        async with self.database.sessions() as session:
            found = await job_repository(session, job_id)
        if found is None:
            return None
        installation_id, repository = found
        if installation_id is None or not repository:  # a health check: no repository, so no token
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_s
        attempt = 0
        while True:
            attempt += 1
            try:
                minted = await self.credentials(installation_id, repository)
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
                continue
            self._minted[job_id] = (installation_id, minted)
            return minted

    def forget(self, job_id: str) -> None:
        """The job ended: its token is not handed out again, and the runner revokes it."""
        minted = self._minted.pop(job_id, None)
        if minted is not None and self.revoking is not None:
            self.revoking(minted[0])
