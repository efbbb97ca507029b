"""The life of a job and of its session: typed states, the allowed transitions, and how a session's jobs
decide its state and conclusion.

This is the one place these rules live. The store applies a transition (and what follows from it: the
session's new state, the check run's next version) in one transaction; it asks :func:`check_transition`
first, so a transition the table does not allow is refused where it is attempted. The GitHub adapter only
renders what the store holds.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final


class JobState(enum.StrEnum):
    """Where a job stands. The last seven are ended: a job never leaves them, but for ``failed`` (and
    ``timed_out``) becoming ``retried`` when a new attempt takes its place."""

    WAITING = "waiting"  # held until the tasks its task needs have succeeded (``needs``)
    QUEUED = "queued"
    LEASED = "leased"  # a device is leased to it and it is offered to that device's runner host
    ACCEPTED = "accepted"  # the runner host took it; its source is being fetched, or it waits for CPUs
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    REFUSED_BEFORE_START = "refused_before_start"
    RETRIED = "retried"
    SKIPPED = "skipped"  # a task it needs ended without success: it never ran, and counts for nothing


class FailureClass(enum.StrEnum):
    """Why an ended job did not succeed (DESIGN.md, "Sessions and jobs: one state machine, ours")."""

    TEST = "test"  # the task's command failed
    INFRASTRUCTURE = "infrastructure"  # the lab failed it: lost runner, no source, full disk, device fault
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    QUEUE_WAIT_EXCEEDED = "queue_wait_exceeded"
    UNFIT = "unfit"  # it can never run where it was sent


class SessionState(enum.StrEnum):
    """Where a session stands; it is the check run's status."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class Conclusion(enum.StrEnum):
    """How a completed session ended; it is the check run's conclusion. The last two are the lab's
    (``KERRIGAN_LAB_CONCLUSION``): the session did not succeed, and the code is not to blame."""

    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"
    ACTION_REQUIRED = "action_required"  # blocks a merge on a required check without calling the code broken
    NEUTRAL = "neutral"  # lets a merge through: the lab chose not to block merges on its own outages


LAB_CONCLUSIONS: Final = (Conclusion.ACTION_REQUIRED, Conclusion.NEUTRAL)  # the default first
# The failure classes that are the lab's, not the code's: a job that ended so says nothing of the commit.
LAB_FAILURES: Final = frozenset(
    {FailureClass.INFRASTRUCTURE, FailureClass.QUEUE_WAIT_EXCEEDED, FailureClass.UNFIT}
)


ENDED: Final = frozenset(
    {
        JobState.SUCCEEDED,
        JobState.FAILED,
        JobState.TIMED_OUT,
        JobState.CANCELLED,
        JobState.REFUSED_BEFORE_START,
        JobState.RETRIED,
        JobState.SKIPPED,
    }
)
HOLDING_A_DEVICE: Final = frozenset({JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING})
NOT_STARTED: Final = frozenset({JobState.LEASED, JobState.ACCEPTED})  # in a runner's hands, not running

_J = JobState
JOB_TRANSITIONS: Final[Mapping[JobState, frozenset[JobState]]] = {
    # Its needs all succeeded (queued), one ended without success (skipped), or its session was cancelled.
    _J.WAITING: frozenset({_J.QUEUED, _J.SKIPPED, _J.CANCELLED, _J.REFUSED_BEFORE_START}),
    # Dispatch leases it; a cancel ends it; its queue-wait budget or an unschedulable session ends it.
    _J.QUEUED: frozenset({_J.LEASED, _J.CANCELLED, _J.REFUSED_BEFORE_START}),
    # The host accepts or refuses it (a capacity refusal, or its lease expiring, puts it back in the queue,
    # once for a lost lease; the second loss fails it).
    _J.LEASED: frozenset({_J.ACCEPTED, _J.QUEUED, _J.REFUSED_BEFORE_START, _J.CANCELLED, _J.FAILED}),
    # It starts, is withdrawn (queue wait), is lost before it started, fails to prepare, or is cancelled.
    _J.ACCEPTED: frozenset(
        {_J.RUNNING, _J.QUEUED, _J.REFUSED_BEFORE_START, _J.CANCELLED, _J.FAILED, _J.TIMED_OUT}
    ),
    _J.RUNNING: frozenset({_J.SUCCEEDED, _J.FAILED, _J.TIMED_OUT, _J.CANCELLED}),
    _J.FAILED: frozenset({_J.RETRIED}),
    _J.TIMED_OUT: frozenset({_J.RETRIED}),
    _J.SUCCEEDED: frozenset(),
    _J.CANCELLED: frozenset(),
    _J.REFUSED_BEFORE_START: frozenset(),
    _J.RETRIED: frozenset(),
    _J.SKIPPED: frozenset(),
}

SESSION_TRANSITIONS: Final[Mapping[SessionState, frozenset[SessionState]]] = {
    SessionState.QUEUED: frozenset({SessionState.IN_PROGRESS, SessionState.COMPLETED}),
    SessionState.IN_PROGRESS: frozenset({SessionState.COMPLETED}),
    SessionState.COMPLETED: frozenset(),
}


class TransitionError(ValueError):
    """A transition the state machine does not allow; the message names both states."""

    def __init__(self, kind: str, before: str, after: str) -> None:
        super().__init__(f"a {kind} cannot go from {before} to {after}")
        self.kind, self.before, self.after = kind, before, after


def check_transition(before: JobState, after: JobState) -> None:
    """Raise :class:`TransitionError` unless a job may go from ``before`` to ``after``."""
    if after not in JOB_TRANSITIONS[before]:
        raise TransitionError("job", before.value, after.value)


def check_session_transition(before: SessionState, after: SessionState) -> None:
    """Raise :class:`TransitionError` unless a session may go from ``before`` to ``after`` (staying put is
    always allowed)."""
    if after is not before and after not in SESSION_TRANSITIONS[before]:
        raise TransitionError("session", before.value, after.value)


def sources_of(after: JobState) -> frozenset[JobState]:
    """Every state a job may reach ``after`` from (for statements that move many jobs at once)."""
    return frozenset(before for before, targets in JOB_TRANSITIONS.items() if after in targets)


# -- why a job ended ---------------------------------------------------------------------------------

RUNNER_LOST: Final = "runner_lost"
QUEUE_WAIT_EXCEEDED: Final = "queue_wait_exceeded"
NOT_STARTED_REASON: Final = "not_started"  # it ended on its host before its command started
SOURCE_UNAVAILABLE: Final = "source_unavailable"  # its host could not fetch its source (GitHub, network)
DEVICE_FAULT_EXIT: Final = 75  # EX_TEMPFAIL: a task's way of saying "the device failed me, not the test"
# What the runner host's agent says went wrong with a job's board (DESIGN.md, "Device control"): sent as
# the finish's ``outcome`` to a server that announced ``board_faults``.
POWER_FAILED: Final = "power_failed"
BOOT_FAILED: Final = "boot_failed"
CONSOLE_LOST: Final = "console_lost"
BOARD_FAULTS: Final = frozenset({POWER_FAILED, BOOT_FAILED, CONSOLE_LOST})
INFRASTRUCTURE_REASONS: Final = frozenset(
    {RUNNER_LOST, NOT_STARTED_REASON, SOURCE_UNAVAILABLE, "runner_disk_full", "device_fault", *BOARD_FAULTS}
)
UNFIT_REASONS: Final = frozenset({"runner_full", "invalid_claim", "unschedulable", "session_unschedulable"})
CHECK_BROKEN: Final = "check_broken"  # a health check that cannot run (kerrigan.core.check_verdicts)
SECRET_MISSING: Final = "secret_missing"  # noqa: S105 -- a reason a job ended: a secret it names was deleted
# Reasons that say something of the commit or its repository, not of the lab, whatever their class: the
# commit's tarball or an artifact its host refused (every device would refuse it alike), and a secret the
# repository no longer holds (the repository's owners fix it, not the lab's).
REPOSITORY_REASONS: Final = frozenset({NOT_STARTED_REASON, SECRET_MISSING})


# Each reason in plain words, for a person reading a page or a check run that names it.
REASON_WORDS: Final = {
    QUEUE_WAIT_EXCEEDED: "its queue-wait budget ran out before it started",
    "timed_out": "it ran past its task's timeout",
    "cancelled": "it was cancelled",
    RUNNER_LOST: (
        "its runner host stopped answering: no heartbeat for the lease time (the host, its agent or its "
        "network went down), so the job's end is unknown; it is retried elsewhere while retries remain"
    ),
    "runner_full": "the runner host refused it: not enough CPUs",
    "runner_disk_full": "the runner host refused it: disk full",
    "invalid_claim": "the runner host refused its claim",
    NOT_STARTED_REASON: "it ended on its runner host before its command started (see its output)",
    SOURCE_UNAVAILABLE: "its runner host could not fetch the commit's source (GitHub or the network)",
    "device_fault": f"its command reported a device fault (exit status {DEVICE_FAULT_EXIT})",
    POWER_FAILED: "its board could not be powered (its PDU, hub or command failed or did not answer)",
    BOOT_FAILED: "its board did not boot (a failure on its console, or no ready line in time)",
    CONSOLE_LOST: "its board's console went away",
    "unschedulable": "no device can ever run it",
    "session_unschedulable": "another task of its session can never run",
    CHECK_BROKEN: (
        "the health check itself cannot run (exit 126 or 127, or the same failure on every device it ran on "
        "within an hour): the device keeps its health"
    ),
}


def reason_words(reason: str) -> str:
    """``reason`` in plain words; an unknown one as it is."""
    return REASON_WORDS.get(reason, reason)


def failure_class(state: JobState, reason: str | None, exit_status: int | None) -> FailureClass | None:
    """The failure class of a job that ended in ``state`` for ``reason``; ``None`` when it succeeded or
    has not ended."""
    if state is JobState.CANCELLED:
        return FailureClass.CANCELLED
    if state is JobState.TIMED_OUT:
        return FailureClass.TIMEOUT
    if state is JobState.REFUSED_BEFORE_START:
        if reason == QUEUE_WAIT_EXCEEDED:
            return FailureClass.QUEUE_WAIT_EXCEEDED
        if reason in INFRASTRUCTURE_REASONS:
            return FailureClass.INFRASTRUCTURE
        return FailureClass.UNFIT
    if state in (JobState.FAILED, JobState.RETRIED):
        if reason in INFRASTRUCTURE_REASONS or exit_status == DEVICE_FAULT_EXIT:
            return FailureClass.INFRASTRUCTURE
        if reason in UNFIT_REASONS:
            return FailureClass.UNFIT
        return FailureClass.TEST
    return None


def ended_by_runner(exit_status: int, outcome: str | None, *, started: bool) -> tuple[JobState, str | None]:
    """The state and reason of a job its runner host reports ended: ``outcome`` is the runner's word for a
    stop (``cancelled`` or ``timed_out``), for its board's fault (:data:`BOARD_FAULTS`), for a job it lost
    (:data:`RUNNER_LOST`: a restart or a killed launcher left its end unknown) or, for a job that
    never started, ``source_unavailable`` (the fetch of its source failed); any other job that never
    started failed on the host (its tarball, its workspace), which is the lab's failure, not the test's."""
    if outcome == "cancelled":
        return JobState.CANCELLED, "cancelled"
    if outcome == "timed_out":
        return JobState.TIMED_OUT, "timed_out"
    if outcome in BOARD_FAULTS:  # before its command or while it ran: the lab's failure either way
        return JobState.FAILED, outcome
    if outcome == RUNNER_LOST:  # its host lost it (restarted, its launcher killed): nobody knows its end
        return JobState.FAILED, RUNNER_LOST
    if not started:
        return JobState.FAILED, SOURCE_UNAVAILABLE if outcome == SOURCE_UNAVAILABLE else NOT_STARTED_REASON
    if exit_status == 0:
        return JobState.SUCCEEDED, None
    if exit_status == DEVICE_FAULT_EXIT:
        return JobState.FAILED, "device_fault"
    return JobState.FAILED, None


# -- automatic retry ---------------------------------------------------------------------------------

DEFAULT_INFRASTRUCTURE_RETRIES: Final = 2
DEFAULT_SUSPECT_RETRIES: Final = 1  # a failure on a suspect device: once more, on a peer that is not suspect
MAX_RETRIES: Final = 5  # per budget: more attempts than this hide a lab that is broken
# A power that does not answer (a PDU down for minutes) is waited for this long before it counts: the
# attempts it ends meanwhile, and the recoveries of their boards (kerrigan.core.recovery), spend nothing.
POWER_WAIT_S: Final = 3600.0


def power_unanswered(reason: str | None) -> bool:
    """Whether an attempt ended because its board's power did not answer: the agent ends a job so only
    when powering its board before the command (after it reported the start, so ``started_at`` does not
    tell), so the attempt said nothing of the job, nor of the board's own health."""
    return reason == POWER_FAILED


def spends_retries(ends: Sequence[tuple[str | None, float]]) -> list[bool]:
    """Whether each of a task's failed attempts counts against its retries, given in order as (its reason,
    seconds from the end of the task's first attempt whose power did not answer to its own end). All do
    but those whose power did not answer while that is under :data:`POWER_WAIT_S`, at most
    :data:`MAX_RETRIES` of them: a power that answers half the time, or a pool of one board, cannot keep a
    task trying for the whole hour."""
    free = 0
    spends = []
    for reason, waited_s in ends:
        waits = power_unanswered(reason) and waited_s < POWER_WAIT_S and free < MAX_RETRIES
        free += waits
        spends.append(not waits)
    return spends


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The manifest's ``retry``: how many more attempts an infrastructure failure gets, how many a
    test failure gets when its exit status is one of ``exit_status`` (none unless the manifest says), and
    how many a failure on a suspect device gets on a peer that is not suspect
    (:mod:`kerrigan.core.suspect_retry`)."""

    infrastructure: int = DEFAULT_INFRASTRUCTURE_RETRIES
    exit_status: frozenset[int] = field(default_factory=frozenset)
    limit: int = 0
    suspect: int = DEFAULT_SUSPECT_RETRIES

    @property
    def max_attempts(self) -> int:
        """The most attempts a task can have on devices that are not suspect: its first and every retry
        either budget allows (a suspect retry, which only a suspect device's failure gets, is not
        counted: an attempt's words never say "attempt 2 of 1", see :func:`describe_attempt`)."""
        return 1 + self.infrastructure + self.limit

    def as_dict(self) -> dict[str, Any]:
        """The policy as stored with its session."""
        return {
            "infrastructure": self.infrastructure,
            "exit_status": sorted(self.exit_status),
            "limit": self.limit,
            "suspect": self.suspect,
        }

    @classmethod
    def from_dict(cls, stored: object) -> RetryPolicy:
        """A policy stored by :meth:`as_dict`. A session stored without one (before policies were) keeps
        the rule it was created under: no retry (and one stored before suspect retries were, none of
        those)."""
        if not isinstance(stored, Mapping):
            return NO_RETRY
        return cls(
            int(stored.get("infrastructure", DEFAULT_INFRASTRUCTURE_RETRIES)),
            frozenset(int(status) for status in stored.get("exit_status", ())),
            int(stored.get("limit", 0)),
            int(stored.get("suspect", 0)),
        )


NO_RETRY: Final = RetryPolicy(infrastructure=0, suspect=0)


def describe_attempt(attempt: int, attempts: int, device: str | None, after: str | None) -> str:
    """One attempt in words, the same on the check run and the session page: ``attempt 2 of 3 on
    modalix-redbox after runner_lost on modalix-bluebox`` (``after``: what ended the attempt it retries)."""
    where = f" on {device}" if device else ""
    why = f" after {after}" if after else ""
    return f"attempt {attempt} of {max(attempts, attempt)}{where}{why}"


def retry_cause(reason: str | None, exit_status: int | None, device: str | None) -> str:
    """What ended an attempt a retry replaced: ``runner_lost on modalix-bluebox``."""
    why = reason or (f"exit status {exit_status}" if exit_status is not None else "a failure")
    return f"{why} on {device}" if device else why


def should_retry(
    policy: RetryPolicy,
    state: JobState,
    klass: FailureClass | None,
    exit_status: int | None,
    earlier: Iterable[FailureClass | None],
    *,
    reason: str | None = None,
    free: bool = False,
) -> bool:
    """Whether a job that ended in ``state`` for ``reason`` gets another attempt. ``earlier`` are the
    failure classes of the task's attempts already retried and counted: each budget counts its own kind.

    A ``free`` attempt (its board's power did not answer: :func:`spends_retries`) is retried without
    counting by a policy that retries infrastructure failures at all, and the caller leaves such attempts
    out of ``earlier``. The new attempt avoids the boards already tried, whose recoveries wait for their
    power, so in a lab whose PDU is silent the job waits in its queue.

    Only a failed job is retried (a timeout, a cancel, a queue-wait budget or a misfit would fail the same
    way again): an infrastructure failure while ``policy.infrastructure`` allows, a test failure only when
    its exit status is listed in ``policy.exit_status``, while ``policy.limit`` allows. A job whose source
    its host could not fetch (``source_unavailable``) is retried; one its host could not start for
    another reason (``not_started``: the commit's tarball refused for what it holds, its workspace) is
    not, as it would fail the same way on every device.
    """
    if state is not JobState.FAILED:
        return False
    spent = list(earlier)
    if klass is FailureClass.INFRASTRUCTURE:
        if reason == NOT_STARTED_REASON:
            return False
        if policy.infrastructure and free:
            return True
        return spent.count(FailureClass.INFRASTRUCTURE) < policy.infrastructure
    if klass is FailureClass.TEST and exit_status is not None and exit_status in policy.exit_status:
        return spent.count(FailureClass.TEST) < policy.limit
    return False


# -- the session from its jobs -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobFacts:
    """What the session rule needs of one job."""

    state: JobState
    started: bool = False  # its command started (now or before it ended)
    failure_class: FailureClass | None = None
    reason: str | None = None  # why it ended (``runner_lost``, ``not_started``, ...)

    @property
    def lab_failure(self) -> bool:
        """Whether it ended for the lab's reason, not its commit's: one of :data:`LAB_FAILURES`, but for a
        reason of :data:`REPOSITORY_REASONS` (a job its host could not start for what the commit holds,
        which every device would refuse alike, so it is not retried either; a secret the repository
        deleted)."""
        return self.failure_class in LAB_FAILURES and self.reason not in REPOSITORY_REASONS


@dataclass(frozen=True, slots=True)
class SessionOutcome:
    """A session's state and, once completed, its conclusion."""

    state: SessionState
    conclusion: Conclusion | None = None


def current_attempts(jobs: Iterable[JobFacts]) -> list[JobFacts]:
    """The jobs that count: an attempt a retry replaced (``retried``) does not."""
    return [job for job in jobs if job.state is not JobState.RETRIED]


def session_outcome(
    jobs: Sequence[JobFacts], *, lab: Conclusion = Conclusion.ACTION_REQUIRED
) -> SessionOutcome:
    """The rule from a session's jobs to its state and conclusion (DESIGN.md, "A lab problem is not a code
    failure").

    Completed when every job (every current attempt) has ended: ``success`` when all succeeded, else
    ``cancelled`` when one was cancelled, else ``timed_out`` when one ran past its own timeout, else
    ``failure`` when one's own command failed (``test``, or an end no class explains). When every job that
    did not succeed ended for the lab's reason (an ``infrastructure`` failure its retries did not get past,
    its queue-wait budget, a runner host that cannot run it; not a job its host could not start for what
    the commit holds: :attr:`JobFacts.lab_failure`), the conclusion is ``lab``
    (``KERRIGAN_LAB_CONCLUSION``: ``action_required`` or ``neutral``). A ``skipped`` job is neutral: it
    ended, but the jobs that did not skip decide the conclusion (a job is skipped only because a task it
    needs ended without success, and that task's own job says how: a failed build fails the session, a
    cancelled one cancels it). A session whose every job was skipped (no rule of ``needs`` leads there) ran
    nothing, and is ``cancelled``. In progress once any job has started. Queued before that (``waiting``
    jobs included). A session without jobs is decided by its resolution, not here (see
    :func:`resolution_outcome`).
    """
    counted = current_attempts(jobs)
    if counted and all(job.state in ENDED for job in counted):
        decisive = [job for job in counted if job.state is not JobState.SKIPPED]
        if not decisive:
            return SessionOutcome(SessionState.COMPLETED, Conclusion.CANCELLED)
        if all(job.state is JobState.SUCCEEDED for job in decisive):
            return SessionOutcome(SessionState.COMPLETED, Conclusion.SUCCESS)
        classes = {job.failure_class for job in decisive}
        if FailureClass.CANCELLED in classes:
            return SessionOutcome(SessionState.COMPLETED, Conclusion.CANCELLED)
        if FailureClass.TIMEOUT in classes:
            return SessionOutcome(SessionState.COMPLETED, Conclusion.TIMED_OUT)
        if all(job.lab_failure for job in decisive if job.state is not JobState.SUCCEEDED):
            return SessionOutcome(SessionState.COMPLETED, lab)
        return SessionOutcome(SessionState.COMPLETED, Conclusion.FAILURE)
    if any(job.started for job in jobs):
        return SessionOutcome(SessionState.IN_PROGRESS)
    return SessionOutcome(SessionState.QUEUED)


def resolution_outcome(*, valid: bool, unschedulable: bool) -> SessionOutcome:
    """A session's state when its manifest has been read and resolved: an invalid manifest or a task no
    device can ever run completes it as a failure at once; otherwise it is queued."""
    if not valid or unschedulable:
        return SessionOutcome(SessionState.COMPLETED, Conclusion.FAILURE)
    return SessionOutcome(SessionState.QUEUED)
