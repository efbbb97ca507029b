"""Telling this process that a committed transaction changed what one of its loops waits for.

A transaction that records a check run's new version, or frees or adds work for dispatch, marks its session
(:func:`mark`); when it commits, the database fires those topics' listeners (the reconciler's and the
dispatcher's ``wake``). Nothing fires for a transaction that rolls back. Other processes see the change on
their next poll.

A transaction may also :func:`note` facts (a job moved or ended, a session moved or concluded): once it
commits, the fact listeners hear them, in order (the metrics count them, the log writes the moves). A
rolled-back transaction's facts are forgotten.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session

from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState, SessionState

_MARKS: Final = "kerrigan.signals"
_FACTS: Final = "kerrigan.facts"


class Topic(enum.StrEnum):
    """What changed."""

    CHECK_RUNS = "check_runs"  # a session recorded a check-run version GitHub does not show yet
    DISPATCH = "dispatch"  # work was queued, or a device or runner host became free
    RUNNER_REQUESTS = "runner_requests"  # a job a runner holds was asked to stop (cancelled, withdrawn)


@dataclass(frozen=True, slots=True)
class JobStarted:
    """A job started on its device, ``waited_s`` after it was queued."""

    waited_s: float


@dataclass(frozen=True, slots=True)
class JobEnded:
    """A job ended in ``state``; it held ``devices`` (every one of a gang; none if it never got one) for
    ``ran_s`` (0 if it never started)."""

    state: JobState
    failure_class: FailureClass | None
    devices: tuple[str, ...]
    ran_s: float


@dataclass(frozen=True, slots=True)
class SessionConcluded:
    """A session completed with ``conclusion``."""

    conclusion: Conclusion


@dataclass(frozen=True, slots=True)
class ResultsReceived:
    """A results file of a job was stored: its tests by outcome (a file sent again counts again)."""

    passed: int
    failed: int
    errors: int
    skipped: int


@dataclass(frozen=True, slots=True)
class JobMoved:
    """A job of ``session_id`` (of ``repository``) moved from ``before`` to ``after``, for ``reason``."""

    job_id: int
    task_id: str
    session_id: str
    repository: str
    before: JobState
    after: JobState
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class SessionMoved:
    """A session moved from ``before`` to ``after`` (with ``conclusion`` once completed)."""

    session_id: str
    repository: str
    before: SessionState
    after: SessionState
    conclusion: Conclusion | None = None


@dataclass(frozen=True, slots=True)
class RecoveryEnded:
    """A recovery of ``device`` ended with ``outcome`` (:class:`kerrigan.core.recovery.RecoveryOutcome`)."""

    device: str
    outcome: str


Fact = JobStarted | JobEnded | SessionConcluded | ResultsReceived | JobMoved | SessionMoved | RecoveryEnded


class Signals:
    """Listeners per topic, called after a commit that marked the topic, and listeners of committed facts."""

    def __init__(self) -> None:
        self._listeners: dict[Topic, list[Callable[[], None]]] = {topic: [] for topic in Topic}
        self._fact_listeners: list[Callable[[Fact], None]] = []

    def listen_facts(self, callback: Callable[[Fact], None]) -> Callable[[], None]:
        """Call ``callback`` with each fact a committed transaction noted; returns what stops it."""
        self._fact_listeners.append(callback)
        return lambda: self._fact_listeners.remove(callback)

    def listen(self, topic: Topic, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after each commit that changes ``topic``; returns what stops it."""
        self._listeners[topic].append(callback)
        return lambda: self._listeners[topic].remove(callback)

    def fire(self, *topics: Topic) -> None:
        """Call the listeners of ``topics`` now."""
        for topic in topics:
            for callback in list(self._listeners[topic]):
                callback()

    def attach(self, session_class: type[Session]) -> None:
        """Fire marked topics after commits of ``session_class``'s sessions; forget them on rollback."""

        def committed(session: Session) -> None:
            marks: set[Topic] = session.info.pop(_MARKS, set())
            facts: list[Fact] = session.info.pop(_FACTS, [])
            self.fire(*sorted(marks))
            for fact in facts:
                for listener in list(self._fact_listeners):
                    listener(fact)

        def rolled_back(session: Session, *_: Any) -> None:
            session.info.pop(_MARKS, None)
            session.info.pop(_FACTS, None)

        event.listen(session_class, "after_commit", committed)
        event.listen(session_class, "after_soft_rollback", rolled_back)


def mark(session: AsyncSession, *topics: Topic) -> None:
    """Fire ``topics`` once the transaction under way commits."""
    session.sync_session.info.setdefault(_MARKS, set()).update(topics)


def note(session: AsyncSession, fact: Fact) -> None:
    """Tell the fact listeners ``fact`` once the transaction under way commits."""
    session.sync_session.info.setdefault(_FACTS, []).append(fact)
