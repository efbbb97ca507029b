"""Which devices fail a workflow task more often than their peers: :mod:`kerrigan.core.flaky` fed from the
job history.

One :class:`SuspectTracker` per database and process keeps the counts of the last 7 days per task, device
and day. The first look loads them with one ``GROUP BY``; each later look (at most every
``REFRESH_S``) reads only the jobs that ended since the last one, so an update costs what those jobs cost.
A task is ``owner/name:workflow:task`` (the same task of another workflow is another task). A job counts
as a run when it passed (``succeeded``) or failed (``failed``, ``retried``, ``timed_out``); a cancel or a job
that never ran says nothing about its device.

A pair once named stays named while its evidence holds (:data:`kerrigan.core.flaky.RELEASE_RATE`). The
names are kept in ``suspect_names``, so that every replica and a restarted process keep the same ones: each
look reads them, and the dispatcher's round (:meth:`SuspectTracker.keep_names`, every 30 s) adds the pairs
newly named and drops those whose evidence cleared. Until then a process keeps the pairs it named itself.
"""

from __future__ import annotations

import asyncio
import weakref
from datetime import UTC, date, datetime, timedelta
from typing import Final

from sqlalchemy import case, delete, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.flaky import WINDOW_DAYS, FailureStats, Suspect
from kerrigan.core.lifecycle import JobState
from kerrigan.store.models import JobRow, SessionRow, SuspectNameRow
from kerrigan.store.signals import Signals

REFRESH_S: Final = 30.0
EPOCH: Final = date(1970, 1, 1)
PASSED: Final = frozenset({JobState.SUCCEEDED})
FAILED: Final = frozenset({JobState.FAILED, JobState.RETRIED, JobState.TIMED_OUT})
_OVERLAP: Final = timedelta(seconds=5)  # jobs that end in the same instant as the last look are read again


def task_key(repository: str, workflow: str, task: str) -> str:
    """The task a device is compared with its peers on."""
    return f"{repository.lower()}:{workflow}:{task}"


def day_of(at: datetime) -> int:
    """Whole days since the epoch (UTC)."""
    return int(at.replace(tzinfo=at.tzinfo or UTC).timestamp() // 86_400)


class SuspectTracker:
    """The suspects of one database, refreshed from the jobs that ended since the last look."""

    def __init__(self) -> None:
        self.stats = FailureStats()
        self._loaded_at: datetime | None = None  # the ``finished_at`` the counts reach
        # Jobs at the edge already counted, with when they ended: kept until the edge passes them, so a look
        # that could not see one yet (a transaction still open when another counted it) never drops it.
        self._seen: dict[int, datetime] = {}
        self._looked: datetime | None = None
        self._newest_pk = 0  # the newest job when last looked: one stored later is read whenever it ended
        self._suspects: dict[tuple[str, str], Suspect] = {}
        self._stored: dict[tuple[str, str], int] = {}  # suspect_names as the last look read them: their pk
        # Pairs this process named that are not stored yet: named for it until the dispatcher's round
        # stores them (or their evidence clears), so passes within those seconds unname nothing.
        self._pending: frozenset[tuple[str, str]] = frozenset()
        # One look at a time: two reading the same new jobs at once would count them twice.
        self._lock = asyncio.Lock()

    async def suspects(
        self, session: AsyncSession, now: datetime, *, ended_at: datetime | None = None
    ) -> dict[tuple[str, str], Suspect]:
        """(task, device) → suspect, as of ``now``; read from the database at most every ``REFRESH_S``, and
        at once when a job that ended at ``ended_at`` may not be counted yet (after the last look, or
        within the few seconds it reads back): a check run is rendered with its own job's end counted, so
        the failure that makes a device suspect names it (issue 28)."""
        async with self._lock:
            return await self._look(session, now, ended_at)

    async def keep_names(self, session: AsyncSession, now: datetime) -> dict[tuple[str, str], Suspect]:
        """The suspects from a fresh look, with ``suspect_names`` brought in line in ``session``'s
        transaction: the pairs named since (by any look of this process) are added, those whose evidence
        cleared are dropped. Only the rows this look read are dropped, by their key, so a name another
        replica adds meanwhile, or drops and adds again, stays."""
        async with self._lock:
            found = await self._look(session, now, None, fresh=True)
            cleared = sorted(pk for pair, pk in self._stored.items() if pair not in found)
            if cleared:
                await session.execute(delete(SuspectNameRow).where(SuspectNameRow.pk.in_(cleared)))
            new = sorted(found.keys() - self._stored.keys())
            if new:
                insert = postgresql_insert if _is_postgres(session) else sqlite_insert
                await session.execute(
                    insert(SuspectNameRow)
                    .values([{"task": task, "device_id": device, "named_at": now} for task, device in new])
                    .on_conflict_do_nothing(index_elements=[SuspectNameRow.task, SuspectNameRow.device_id])
                )
            # _pending stays as it is: the next look reads these names stored, or, if this transaction
            # rolled back, keeps them pending still.
            return found

    async def _look(
        self, session: AsyncSession, now: datetime, ended_at: datetime | None, *, fresh: bool = False
    ) -> dict[tuple[str, str], Suspect]:
        if (
            fresh
            or self._looked is None
            or (now - self._looked).total_seconds() >= REFRESH_S
            or (ended_at is not None and not self.counted(ended_at))
        ):
            # The names before the jobs: a name another replica stored is then read with every job it was
            # named on, so this look never drops a name on counts older than the ones that made it.
            rows = await session.execute(
                select(SuspectNameRow.task, SuspectNameRow.device_id, SuspectNameRow.pk)
            )
            self._stored = {(str(task), str(device)): int(pk) for task, device, pk in rows}
            await self._refresh(session, now)
            self._looked = now
            found = self.stats.suspects(day_of(now), self._stored.keys() | self._pending)
            self._suspects = {(s.task, s.device): s for s in found}
            self._pending = frozenset(self._suspects.keys() - self._stored.keys())
        return self._suspects

    def counted(self, ended_at: datetime) -> bool:
        """Whether a job that ended at ``ended_at`` (and committed) is in the counts: it ended before the
        last look by more than the time the next look reads back."""
        return self._loaded_at is not None and ended_at <= self._loaded_at - _OVERLAP

    async def _refresh(self, session: AsyncSession, now: datetime) -> None:
        since = now - timedelta(days=WINDOW_DAYS)
        ended = (
            JobRow.state.in_(PASSED | FAILED),
            JobRow.device_id.is_not(None),
            JobRow.finished_at.is_not(None),
        )
        if self._loaded_at is None:
            newest_at_load = await session.scalar(select(func.max(JobRow.pk)))  # before the counts: none lost
            # The day in SQL (one row per task, device and day), in UTC on both databases.
            at = func.timezone("UTC", JobRow.finished_at) if _is_postgres(session) else JobRow.finished_at
            day = func.date(at)
            rows = await session.execute(
                select(
                    SessionRow.repository,
                    SessionRow.workflow,
                    JobRow.task_id,
                    JobRow.device_id,
                    day,
                    func.count(),
                    func.sum(case((JobRow.state.in_(FAILED), 1), else_=0)),
                )
                .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                # Only the jobs stored by the time the newest was read: one stored between the two
                # statements is read by the next look, by its number, and counted there, not twice.
                .where(
                    *ended,
                    JobRow.finished_at >= since,
                    JobRow.finished_at <= now,
                    JobRow.pk <= (newest_at_load or 0),
                )
                .group_by(SessionRow.repository, SessionRow.workflow, JobRow.task_id, JobRow.device_id, day)
            )
            for repository, workflow, task, device, on_day, runs, failures in rows:
                key = task_key(repository, workflow, task)
                self.stats.add(key, str(device), _day_number(on_day), int(runs), int(failures or 0))
            # The next look reads a few seconds back (a job may commit after its finished_at): these are in.
            at_edge = await session.execute(
                select(JobRow.pk, JobRow.finished_at).where(
                    *ended,
                    JobRow.finished_at > now - _OVERLAP,
                    JobRow.finished_at <= now,
                    JobRow.pk <= (newest_at_load or 0),
                )
            )
            self._seen = {pk: ended_at for pk, ended_at in at_edge if ended_at is not None}
            self._newest_pk = int(newest_at_load or 0)
            self._loaded_at = now
            return
        edge = self._loaded_at - _OVERLAP
        newest = await session.scalar(select(func.max(JobRow.pk)))
        rows = await session.execute(
            select(
                JobRow.pk,
                SessionRow.repository,
                SessionRow.workflow,
                JobRow.task_id,
                JobRow.device_id,
                JobRow.state,
                JobRow.finished_at,
            )
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            # Jobs that ended since the last look, and jobs stored since whenever they ended (history
            # brought in later): the first by their end, the second by their number.
            .where(
                *ended,
                (JobRow.finished_at > edge) | (JobRow.pk > self._newest_pk),
                JobRow.finished_at >= since,
                JobRow.finished_at <= now,
            )
        )
        for pk, repository, workflow, task, device, state, finished_at in rows:
            if pk in self._seen:
                continue
            self._seen[pk] = finished_at
            key = task_key(repository, workflow, task)
            self.stats.record(key, str(device), day_of(finished_at), failed=state in FAILED)
        self._newest_pk = max(self._newest_pk, int(newest or 0))
        self._loaded_at = now
        next_edge = now - _OVERLAP  # what the next look reads back to: older ones it never reads again
        self._seen = {pk: at for pk, at in self._seen.items() if _aware(at) > next_edge}


async def last_failure(session: AsyncSession, session_pk: int) -> datetime | None:
    """When the last job of a session that failed on a device (one its check run may name a suspect for)
    ended; ``None`` when none has."""
    return await session.scalar(
        select(func.max(JobRow.finished_at)).where(
            JobRow.session_pk == session_pk,
            JobRow.state.in_(FAILED),
            JobRow.device_id.is_not(None),
        )
    )


_trackers: weakref.WeakKeyDictionary[Signals, SuspectTracker] = weakref.WeakKeyDictionary()


def _aware(at: datetime) -> datetime:
    """SQLite hands back naive times (stored in UTC)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _day_number(value: object) -> int:
    """A SQL ``date()`` (a ``date`` on PostgreSQL, ``YYYY-MM-DD`` on SQLite) as whole days since the epoch."""
    found = value if isinstance(value, date) else date.fromisoformat(str(value))
    return (found - EPOCH).days


def _is_postgres(session: AsyncSession) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def tracker_of(signals: Signals) -> SuspectTracker:
    """The tracker of the database these signals belong to (one per database and process)."""
    found = _trackers.get(signals)
    if found is None:
        found = _trackers[signals] = SuspectTracker()
    return found
