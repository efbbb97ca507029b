"""The check-run reconciler: GitHub shows each session's latest state, whatever GitHub does meanwhile.

Every state change of a session records the check run's next version in the store, in the transaction of
the change (:mod:`kerrigan.store.transitions`). One reconciler per process claims the check runs that are
behind (:mod:`kerrigan.store.check_runs`), renders the latest version of each
(:mod:`kerrigan.github.projection`) and sends it, one request at a time per check run; versions that were
never sent are skipped, since only the latest is rendered. What it sends and when:

- a session without a check run gets one created with ``external_id`` = the session id. When a create's
  outcome is unknown (no answer, or a 5xx GitHub may have acted on), the next try first lists the commit's
  check runs of that name and adopts the one carrying the session id: one session, one check run;
- server errors, 429, secondary rate limits, dropped connections and timeouts are retried without a limit,
  as :func:`kerrigan.core.github_retry.retry_after` says (short waits in place, holding the claim; long ones
  recorded as the session's due time, so nothing is lost across a restart);
- an answer GitHub will never change (a 422 and the like) is logged with its body and kept on the session
  (its page shows it); GitHub is then sent a short body with the same state and conclusion, so the check run
  still ends right; a later version goes as usual;
- the GitHub budget (:class:`kerrigan.github.budget.Budget`) is asked before each request: an installation
  over its allowance waits, and its check runs' versions coalesce meanwhile;
- a sweep every minute makes due any session whose shown version is behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Final

import structlog
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.github_retry import retry_after
from kerrigan.core.sessions import SessionState
from kerrigan.github.checks import CheckRunBody, check_run_name
from kerrigan.github.client import GitHubAnswer, answer_of, paid_for
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.projection import render, render_short
from kerrigan.github.repository import Repository
from kerrigan.store import check_runs
from kerrigan.store.check_runs import Claim, Projection
from kerrigan.store.database import Database
from kerrigan.store.signals import Topic
from kerrigan.store.suspects import last_failure, tracker_of

log = logging.getLogger(__name__)

LEASE_S: Final = 30.0
WAIT_IN_PLACE_S: Final = 2.0  # retries sooner than this wait holding the claim; later ones are recorded
REFUSED_RETRY_S: Final = 600.0  # a version GitHub refused even in short form is tried again this much later
SWEEP_S: Final = 60.0
BATCH: Final = 16


class ClaimLostError(Exception):
    """Another reconciler took this check run over (this one was too slow to renew its claim)."""


async def current_view(session: AsyncSession, database: Database, claim: Claim) -> Projection:
    """The session of ``claim`` as its check run should show it now, with the suspect devices as of its
    own jobs' ends: a job that just failed is counted before its check run is rendered, so the failure
    that makes its device suspect names it (the tracker reads again for it, not only every 30 s)."""
    ended = await last_failure(session, claim.session_pk)
    tracker = tracker_of(database.signals)
    suspects = await tracker.suspects(session, database.clock(), ended_at=ended)
    return await check_runs.projection(session, claim, suspects)


class Reconciler:
    """Brings check runs up to date, until cancelled; woken by commits of this process that record a
    version, and polling every ``poll_s`` for those of other processes."""

    def __init__(
        self,
        app: GitHubApp,
        *,
        lease_s: float = LEASE_S,
        poll_s: float = 1.0,
        wait_in_place_s: float = WAIT_IN_PLACE_S,
        refused_retry_s: float = REFUSED_RETRY_S,
        sweep_s: float = SWEEP_S,
        backoff_base_s: float = 0.5,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.app = app
        self.lease = timedelta(seconds=lease_s)
        self.poll_s = poll_s
        self.wait_in_place_s = wait_in_place_s
        self.refused_retry = timedelta(seconds=refused_retry_s)
        self.sweep_s = sweep_s
        self.backoff_base_s = backoff_base_s
        self._clock = clock
        self._wake = asyncio.Event()
        self._random = random.Random()  # noqa: S311 -- jitter, not secrets
        self.sent = 0
        app.database.signals.listen(Topic.CHECK_RUNS, self.wake)

    def wake(self) -> None:
        """A version was recorded: look now."""
        self._wake.set()

    async def run(self) -> None:
        """Reconcile until cancelled: up to :data:`BATCH` check runs in flight at once, each claimed as soon
        as there is room (a slow check run does not hold up the others)."""
        next_sweep = 0.0
        loop = asyncio.get_running_loop()
        inflight: set[asyncio.Task[None]] = set()
        try:
            while True:
                self._wake.clear()  # before claiming: a wake while claiming means look again at once
                claimed = 0
                try:
                    if loop.time() >= next_sweep:
                        await self.sweep()
                        next_sweep = loop.time() + self.sweep_s
                    if len(inflight) < BATCH:
                        for claim in await self._claim(BATCH - len(inflight)):
                            task = asyncio.create_task(self._sync(claim))
                            inflight.add(task)
                            task.add_done_callback(inflight.discard)
                            claimed += 1
                except Exception:
                    log.exception("check-run reconciler: claiming failed; going on")
                if claimed and len(inflight) < BATCH:
                    continue  # there may be more due
                waiter = asyncio.ensure_future(self._wake.wait())
                try:
                    await asyncio.wait(
                        {waiter, *inflight}, timeout=self.poll_s, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    waiter.cancel()
        finally:
            for task in inflight:
                task.cancel()
            await asyncio.gather(*inflight, return_exceptions=True)

    async def sweep(self) -> int:
        """Make due every check run that is behind with nothing scheduled to send it."""
        database = self.app.database
        async with database.sessions() as session, session.begin():
            return await check_runs.sweep(session, database.clock())

    async def round(self) -> int:
        """Claim the check runs that are due and bring each up to date; how many were claimed (tests and
        tools drive the reconciler one round at a time; :meth:`run` claims as room frees up)."""
        claims = await self._claim(BATCH)
        if claims:
            await asyncio.gather(*(self._sync(claim) for claim in claims))
        return len(claims)

    async def _claim(self, limit: int) -> list[Claim]:
        database = self.app.database
        async with database.writing(), database.sessions() as session, session.begin():
            return await check_runs.claim_due(session, database.clock(), self.lease, limit)

    async def _sync(self, claim: Claim) -> None:
        # Each claim is synced in a task of its own: what it logs names its session.
        structlog.contextvars.bind_contextvars(session_id=claim.session_id)
        renewing = asyncio.create_task(self._renew(claim))
        sending = asyncio.create_task(self._send(claim))
        try:
            done, _ = await asyncio.wait({renewing, sending}, return_when=asyncio.FIRST_COMPLETED)
            if renewing in done and not sending.done():
                sending.cancel()  # the claim was taken over: write nothing more
                with contextlib.suppress(asyncio.CancelledError):
                    await sending
                log.warning(
                    "check run of session %s: claim taken over; left to its new holder", claim.session_id
                )
                return
            await sending
        except ClaimLostError:
            log.warning("check run of session %s: claim lost; left to its new holder", claim.session_id)
        except Exception:
            log.exception("check run of session %s: unexpected failure; trying again later", claim.session_id)
            await self._write(
                claim, lambda s: check_runs.retry_later(s, claim, self._due_in(5.0), failed=True)
            )
        finally:
            renewing.cancel()
            stopping = not sending.done()
            if stopping:  # stopped (cancelled) while sending: the send stops too, its claim left to run out
                sending.cancel()
            with contextlib.suppress(asyncio.CancelledError, ClaimLostError):
                await renewing
            if stopping:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await sending

    async def _renew(self, claim: Claim) -> None:
        database = self.app.database
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            async with database.sessions() as session, session.begin():
                if not await check_runs.renew(session, claim, database.clock() + self.lease):
                    return

    def _due_in(self, seconds: float) -> datetime:
        return self.app.database.clock() + timedelta(seconds=seconds)

    async def _retry_at(self, claim: Claim, due: datetime, attempts: int) -> None:
        await self._write(
            claim, lambda s: check_runs.retry_later(s, claim, due, failed=True, attempts=attempts)
        )

    async def _write(self, claim: Claim, write: Callable[[AsyncSession], Awaitable[bool]]) -> None:
        database = self.app.database
        async with database.writing(), database.sessions() as session, session.begin():
            if not await write(session):
                raise ClaimLostError(claim.session_id)

    async def _send(self, claim: Claim) -> None:
        """Send the latest version of one check run, retrying in place while the waits are short."""
        attempts = claim.attempts
        while True:
            database = self.app.database
            async with database.sessions() as session:
                view = await current_view(session, database, claim)
            delay = await self._attempt(claim, view, attempts)
            if delay is None:
                return
            attempts += 1
            if delay > self.wait_in_place_s:  # the failures retried in place count for the backoff too
                await self._retry_at(claim, self._due_in(delay), attempts)
                return
            await asyncio.sleep(delay)
            await self._still_ours(claim)

    async def _still_ours(self, claim: Claim) -> None:
        """Renew the claim, or raise :class:`ClaimLostError`: a check run taken over meanwhile (before the
        renewal noticed) gets no more requests from this reconciler."""
        until = self._due_in(self.lease.total_seconds())
        await self._write(claim, lambda s: check_runs.renew(s, claim, until))

    async def _attempt(self, claim: Claim, view: Projection, attempts: int) -> float | None:
        """One try at showing ``view``: ``None`` when done (shown, refused for good, or left to wait), else
        the seconds to wait before the next try."""
        session = view.session
        version = session.version
        now = self.app.database.clock()
        if session.installation_id is None:  # nothing to show it on (a session made without GitHub)
            await self._write(claim, lambda s: check_runs.shown(s, claim, version, now))
            return None
        repo = self.app.repository(session.installation_id, session.repository)
        creating = session.check_run_id is None
        essential = creating or session.state is SessionState.COMPLETED
        wait = repo.budget.wait_s(
            session.installation_id, creating=True, essential=essential, now=self._clock()
        )
        if wait > 0:  # over the budget: later, and the versions recorded meanwhile go as one
            await self._write(
                claim, lambda s: check_runs.retry_later(s, claim, self._due_in(wait), failed=False)
            )
            return None
        body = render(view, self.app.details_url(session.id))
        try:
            check_run_id = session.check_run_id
            if creating and view.create_sent_version is not None:
                found = await self._find(repo, view)
                if found is not None:
                    await self._write(claim, lambda s: check_runs.adopted(s, claim, found))
                    log.info("session %s: adopted check run %s after an unknown create", session.id, found)
                    if view.create_sent_version >= version:
                        await self._write(claim, lambda s: check_runs.shown(s, claim, version, now))
                        return None
                    check_run_id, creating = found, False
            if creating:
                await self._write(claim, lambda s: check_runs.create_sent(s, claim, version))
                created = await self._create(repo, body, session.installation_id, essential)
                await self._write(claim, lambda s: check_runs.adopted(s, claim, created))
            else:
                assert check_run_id is not None
                await self._update(repo, check_run_id, body, session.installation_id, essential)
        except ClaimLostError:
            raise
        except Exception as exc:
            answer = answer_of(exc)
            if answer is None:
                raise
            return await self._failed(claim, view, repo, answer, attempts, creating=creating)
        await self._write(claim, lambda s: check_runs.shown(s, claim, version, self.app.database.clock()))
        self.sent += 1
        return None

    async def _create(
        self, repo: Repository, body: CheckRunBody, installation_id: int, essential: bool
    ) -> int:
        if body.update_annotations:  # created with a completed body: its failed tests go with the create
            later = [annotation for batch in body.more_annotations for annotation in batch]
            own = [*body.fields["output"].get("annotations", ()), *later]
            body = body.with_annotations([*own, *body.update_annotations])
        repo.budget.spend(installation_id, creating=True, now=self._clock())
        with paid_for():
            return await repo.create_check_run(body)

    async def _update(
        self, repo: Repository, check_run_id: int, body: CheckRunBody, installation_id: int, essential: bool
    ) -> None:
        # The create's annotations go with the create only: GitHub adds those of every update to the ones
        # it has. An update carries its own (a completed check run's failed tests), once: GitHub is asked
        # first what it has, since an earlier try may have been done with its answer lost.
        if body.update_annotations:
            unsent = body.unsent(await repo.check_run(check_run_id))
            if unsent is None:
                log.info("check run %s: GitHub shows the completing update already", check_run_id)
                return
            plain = unsent
        else:
            plain = body.with_annotations([])
        repo.budget.spend(installation_id, creating=True, now=self._clock())
        with paid_for():
            await repo.update_check_run(check_run_id, plain)

    async def _find(self, repo: Repository, view: Projection) -> int | None:
        """The check run an earlier create made, if GitHub has it (found by its ``external_id``)."""
        session = view.session
        runs = await repo.check_runs_for_ref(session.head_sha, check_run_name(session.workflow))
        for run in runs:
            if run.get("external_id") == session.id:
                return int(run["id"])
        return None

    async def _failed(
        self,
        claim: Claim,
        view: Projection,
        repo: Repository,
        answer: GitHubAnswer,
        attempts: int,
        *,
        creating: bool,
    ) -> float | None:
        session = view.session
        retry = retry_after(
            answer.status,
            answer.headers,
            answer.message,
            attempts + 1,
            self._clock(),
            base_s=self.backoff_base_s,
            jitter=self._random.random(),
        )
        if retry is not None:
            log.warning(
                "check run of session %s (version %s): %s; trying again in %.1f s",
                session.id,
                session.version,
                retry.reason,
                retry.delay_s,
            )
            return retry.delay_s
        # GitHub's final word on this body: keep it, and show the state in a short body instead.
        refusal = f"{answer.status}: {answer.message}".strip()
        error = f"GitHub refused version {session.version} of the check run ({refusal}): " + _body_text(
            answer
        )
        log.error("check run of session %s: %s", session.id, error)
        short = render_short(view, self.app.details_url(session.id), refusal)
        installation_id = session.installation_id
        assert installation_id is not None
        try:
            if creating:
                # The full create made nothing, but the short one's outcome may be unknown in turn: until
                # it is known, a retry looks for it first (create_sent_version stays this version).
                await self._write(claim, lambda s: check_runs.create_sent(s, claim, session.version))
                created = await self._create(repo, short, installation_id, True)
                await self._write(claim, lambda s: check_runs.adopted(s, claim, created))
            else:
                assert session.check_run_id is not None
                await self._update(repo, session.check_run_id, short, installation_id, True)
        except ClaimLostError:
            raise
        except Exception as exc:
            again = answer_of(exc)
            if again is None:
                raise
            retry = retry_after(
                again.status,
                again.headers,
                again.message,
                attempts + 1,
                self._clock(),
                base_s=self.backoff_base_s,
                jitter=self._random.random(),
            )
            now = self.app.database.clock()
            if retry is not None:  # no refusal: no answer, or wait; the session keeps the refusal meanwhile
                log.warning(
                    "check run of session %s: the short body went unanswered (%s); trying again in %.1f s",
                    session.id,
                    retry.reason,
                    retry.delay_s,
                )
                await self._write(claim, lambda s: check_runs.refusal_noted(s, claim, now, error))
                return retry.delay_s
            log.error(
                "check run of session %s: the short body failed too (%s %s)",
                session.id,
                again.status,
                again.message,
            )
            if creating:  # GitHub refused it: it made nothing
                await self._write(claim, lambda s: check_runs.not_created(s, claim))
            await self._write(
                claim,
                lambda s: check_runs.refused(
                    s, claim, now, error, shown_version=None, retry_at=now + self.refused_retry
                ),
            )
            return None
        now = self.app.database.clock()
        await self._write(
            claim,
            lambda s: check_runs.refused(s, claim, now, error, shown_version=session.version, retry_at=now),
        )
        return None


def _body_text(answer: GitHubAnswer) -> str:
    if answer.body is None:
        return answer.message
    if isinstance(answer.body, str):
        return answer.body[:2000]
    return json.dumps(answer.body)[:2000]
