"""The job and session state machine: every edge of the table, failure classes, the session rule."""

from __future__ import annotations

import itertools

import pytest

from kerrigan.core.lifecycle import (
    ENDED,
    JOB_TRANSITIONS,
    SESSION_TRANSITIONS,
    Conclusion,
    FailureClass,
    JobFacts,
    JobState,
    SessionState,
    TransitionError,
    check_session_transition,
    check_transition,
    ended_by_runner,
    failure_class,
    reason_words,
    resolution_outcome,
    session_outcome,
    sources_of,
)

J = JobState
ALLOWED = {
    (J.WAITING, J.QUEUED),
    (J.WAITING, J.SKIPPED),
    (J.WAITING, J.CANCELLED),
    (J.WAITING, J.REFUSED_BEFORE_START),  # its session can never run (a task is unschedulable)
    (J.QUEUED, J.LEASED),
    (J.QUEUED, J.CANCELLED),
    (J.QUEUED, J.REFUSED_BEFORE_START),
    (J.LEASED, J.ACCEPTED),
    (J.LEASED, J.QUEUED),
    (J.LEASED, J.REFUSED_BEFORE_START),
    (J.LEASED, J.CANCELLED),
    (J.LEASED, J.FAILED),
    (J.ACCEPTED, J.RUNNING),
    (J.ACCEPTED, J.QUEUED),
    (J.ACCEPTED, J.REFUSED_BEFORE_START),
    (J.ACCEPTED, J.CANCELLED),
    (J.ACCEPTED, J.FAILED),
    (J.ACCEPTED, J.TIMED_OUT),
    (J.RUNNING, J.SUCCEEDED),
    (J.RUNNING, J.FAILED),
    (J.RUNNING, J.TIMED_OUT),
    (J.RUNNING, J.CANCELLED),
    (J.FAILED, J.RETRIED),
    (J.TIMED_OUT, J.RETRIED),
}
EVERY_PAIR = list(itertools.product(JobState, JobState))


@pytest.mark.parametrize(("before", "after"), sorted(ALLOWED))
def test_an_allowed_job_transition_passes(before: JobState, after: JobState) -> None:
    check_transition(before, after)


@pytest.mark.parametrize(("before", "after"), [pair for pair in EVERY_PAIR if pair not in ALLOWED])
def test_every_other_job_transition_is_refused_naming_both_states(before: JobState, after: JobState) -> None:
    with pytest.raises(TransitionError, match=f"from {before.value} to {after.value}"):
        check_transition(before, after)


def test_the_table_is_exactly_the_documented_one() -> None:
    assert {(b, a) for b, targets in JOB_TRANSITIONS.items() for a in targets} == ALLOWED
    assert set(JOB_TRANSITIONS) == set(JobState)


def test_ended_states_lead_nowhere_but_to_a_retry() -> None:
    for state in ENDED:
        assert JOB_TRANSITIONS[state] <= {J.RETRIED}


def test_sources_of_a_state_are_read_from_the_table() -> None:
    assert sources_of(J.LEASED) == {J.QUEUED}
    assert sources_of(J.RETRIED) == {J.FAILED, J.TIMED_OUT}
    assert sources_of(J.CANCELLED) == {J.WAITING, J.QUEUED, J.LEASED, J.ACCEPTED, J.RUNNING}


S = SessionState


@pytest.mark.parametrize(
    ("before", "after", "allowed"),
    [
        (S.QUEUED, S.QUEUED, True),
        (S.QUEUED, S.IN_PROGRESS, True),
        (S.QUEUED, S.COMPLETED, True),
        (S.IN_PROGRESS, S.IN_PROGRESS, True),
        (S.IN_PROGRESS, S.COMPLETED, True),
        (S.IN_PROGRESS, S.QUEUED, False),
        (S.COMPLETED, S.COMPLETED, True),
        (S.COMPLETED, S.QUEUED, False),
        (S.COMPLETED, S.IN_PROGRESS, False),
    ],
)
def test_session_transitions(before: SessionState, after: SessionState, allowed: bool) -> None:
    if allowed:
        check_session_transition(before, after)
    else:
        with pytest.raises(TransitionError, match="session cannot go"):
            check_session_transition(before, after)
    assert (after in SESSION_TRANSITIONS[before] or after is before) is allowed


@pytest.mark.parametrize(
    ("state", "reason", "exit_status", "expected"),
    [
        (J.SUCCEEDED, None, 0, None),
        (J.RUNNING, None, None, None),
        (J.FAILED, None, 1, FailureClass.TEST),
        (J.FAILED, None, 75, FailureClass.INFRASTRUCTURE),
        (J.FAILED, "device_fault", 75, FailureClass.INFRASTRUCTURE),
        (J.FAILED, "runner_lost", None, FailureClass.INFRASTRUCTURE),
        (J.FAILED, "not_started", -1, FailureClass.INFRASTRUCTURE),
        (J.FAILED, "source_unavailable", -1, FailureClass.INFRASTRUCTURE),
        (J.TIMED_OUT, "timed_out", -15, FailureClass.TIMEOUT),
        (J.CANCELLED, "cancelled", None, FailureClass.CANCELLED),
        (J.REFUSED_BEFORE_START, "queue_wait_exceeded", None, FailureClass.QUEUE_WAIT_EXCEEDED),
        (J.REFUSED_BEFORE_START, "runner_full", None, FailureClass.UNFIT),
        (J.REFUSED_BEFORE_START, "invalid_claim", None, FailureClass.UNFIT),
        (J.REFUSED_BEFORE_START, "unschedulable", None, FailureClass.UNFIT),
        (J.REFUSED_BEFORE_START, "runner_disk_full", None, FailureClass.INFRASTRUCTURE),
    ],
)
def test_failure_class_of_each_way_a_job_ends(
    state: JobState, reason: str | None, exit_status: int | None, expected: FailureClass | None
) -> None:
    assert failure_class(state, reason, exit_status) is expected


@pytest.mark.parametrize(
    ("exit_status", "outcome", "started", "expected"),
    [
        (0, None, True, (J.SUCCEEDED, None)),
        (3, None, True, (J.FAILED, None)),
        (75, None, True, (J.FAILED, "device_fault")),
        (-15, "cancelled", True, (J.CANCELLED, "cancelled")),
        (-9, "timed_out", True, (J.TIMED_OUT, "timed_out")),
        (-1, None, False, (J.FAILED, "not_started")),
        (-1, "cancelled", False, (J.CANCELLED, "cancelled")),
        (-1, "source_unavailable", False, (J.FAILED, "source_unavailable")),
        (3, "source_unavailable", True, (J.FAILED, None)),  # its command ran: its own exit status counts
        (75, "power_failed", True, (J.FAILED, "power_failed")),  # its board, before its command
        (75, "boot_failed", True, (J.FAILED, "boot_failed")),
        (75, "console_lost", True, (J.FAILED, "console_lost")),  # or while it ran
        (-9, "runner_lost", True, (J.FAILED, "runner_lost")),  # its host lost it: its end is unknown
        (-1, "runner_lost", False, (J.FAILED, "runner_lost")),
    ],
)
def test_a_runner_reported_end_becomes_a_state_and_reason(
    exit_status: int, outcome: str | None, started: bool, expected: tuple[JobState, str | None]
) -> None:
    assert ended_by_runner(exit_status, outcome, started=started) == expected


def _facts(state: JobState, *, started: bool = False, reason: str | None = None) -> JobFacts:
    return JobFacts(state, started, failure_class(state, reason, 1 if state is J.FAILED else None))


def test_a_session_is_queued_until_a_job_starts() -> None:
    outcome = session_outcome([_facts(J.QUEUED), _facts(J.ACCEPTED), _facts(J.LEASED)])
    assert outcome.state is S.QUEUED
    assert outcome.conclusion is None


def test_a_session_is_in_progress_once_a_job_started() -> None:
    outcome = session_outcome([_facts(J.QUEUED), _facts(J.RUNNING, started=True)])
    assert outcome.state is S.IN_PROGRESS


def test_a_job_ended_before_any_started_keeps_its_session_queued() -> None:
    outcome = session_outcome(
        [_facts(J.QUEUED), _facts(J.REFUSED_BEFORE_START, reason="queue_wait_exceeded")]
    )
    assert outcome.state is S.QUEUED


@pytest.mark.parametrize(
    ("jobs", "conclusion"),
    [
        ([_facts(J.SUCCEEDED, started=True)] * 2, Conclusion.SUCCESS),
        ([_facts(J.SUCCEEDED, started=True), _facts(J.FAILED, started=True)], Conclusion.FAILURE),
        ([_facts(J.FAILED, started=True), _facts(J.CANCELLED, reason="cancelled")], Conclusion.CANCELLED),
        ([_facts(J.FAILED, started=True), _facts(J.TIMED_OUT, started=True)], Conclusion.TIMED_OUT),
        # The lab's (issue 28): a queue-wait budget or a host that cannot run it is not the code's failure.
        (
            [_facts(J.SUCCEEDED), _facts(J.REFUSED_BEFORE_START, reason="queue_wait_exceeded")],
            Conclusion.ACTION_REQUIRED,
        ),
        ([_facts(J.REFUSED_BEFORE_START, reason="runner_full")], Conclusion.ACTION_REQUIRED),
        # A secret the repository deleted is its owners' to fix, not the lab's.
        ([JobFacts(J.REFUSED_BEFORE_START, False, FailureClass.UNFIT, "secret_missing")], Conclusion.FAILURE),
    ],
)
def test_a_session_completes_when_every_job_ended(jobs: list[JobFacts], conclusion: Conclusion) -> None:
    outcome = session_outcome(jobs)
    assert outcome.state is S.COMPLETED
    assert outcome.conclusion is conclusion


def test_a_retried_attempt_does_not_count_but_its_start_does() -> None:
    retried = JobFacts(J.RETRIED, started=True, failure_class=FailureClass.INFRASTRUCTURE)
    assert session_outcome([retried, _facts(J.QUEUED)]).state is S.IN_PROGRESS
    done = session_outcome([retried, _facts(J.SUCCEEDED, started=True)])
    assert done.conclusion is Conclusion.SUCCESS


def test_a_session_without_jobs_is_not_completed_by_the_job_rule() -> None:
    assert session_outcome([]).state is S.QUEUED


@pytest.mark.parametrize(
    ("valid", "unschedulable", "state"),
    [(True, False, S.QUEUED), (False, False, S.COMPLETED), (True, True, S.COMPLETED)],
)
def test_resolution_outcome(valid: bool, unschedulable: bool, state: SessionState) -> None:
    outcome = resolution_outcome(valid=valid, unschedulable=unschedulable)
    assert outcome.state is state
    assert outcome.conclusion is (None if state is S.QUEUED else Conclusion.FAILURE)


@pytest.mark.parametrize("reason", ["power_failed", "boot_failed", "console_lost"])
def test_a_boards_fault_is_an_infrastructure_failure_with_words(reason: str) -> None:
    assert failure_class(J.FAILED, reason, 75) is FailureClass.INFRASTRUCTURE
    assert reason_words(reason) != reason
