"""``waiting`` and ``skipped`` jobs (``needs``): their transitions, and what they do to their session."""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import (
    ENDED,
    HOLDING_A_DEVICE,
    Conclusion,
    FailureClass,
    JobFacts,
    JobState,
    SessionState,
    TransitionError,
    check_transition,
    failure_class,
    session_outcome,
)
from kerrigan.core.task_graph import NeedState, Skip, readiness, task_state

J = JobState


@pytest.mark.parametrize("after", [J.QUEUED, J.SKIPPED, J.CANCELLED, J.REFUSED_BEFORE_START])
def test_a_waiting_job_is_released_skipped_cancelled_or_refused(after: JobState) -> None:
    # Refused: its session can never run (one of its tasks is unschedulable), decided at resolution.
    check_transition(J.WAITING, after)


@pytest.mark.parametrize("after", [J.LEASED, J.RUNNING, J.FAILED, J.SUCCEEDED])
def test_a_waiting_job_is_never_leased_nor_ended_any_other_way(after: JobState) -> None:
    with pytest.raises(TransitionError, match=f"from waiting to {after.value}"):
        check_transition(J.WAITING, after)


@pytest.mark.parametrize("before", [J.QUEUED, J.LEASED, J.RUNNING, J.FAILED])
def test_only_a_waiting_job_can_be_skipped(before: JobState) -> None:
    with pytest.raises(TransitionError):
        check_transition(before, J.SKIPPED)


@pytest.mark.parametrize("after", list(JobState))
def test_a_skipped_job_has_ended_for_good(after: JobState) -> None:
    assert J.SKIPPED in ENDED
    with pytest.raises(TransitionError):
        check_transition(J.SKIPPED, after)


def test_waiting_is_neither_ended_nor_holding_a_device_and_skipped_has_no_failure_class() -> None:
    assert J.WAITING not in ENDED
    assert J.WAITING not in HOLDING_A_DEVICE
    assert failure_class(J.SKIPPED, "needs build (failed)", None) is None
    assert failure_class(J.WAITING, None, None) is None


def _job(state: JobState, *, started: bool = False, klass: FailureClass | None = None) -> JobFacts:
    return JobFacts(state, started, klass)


def test_a_session_with_waiting_jobs_is_queued_until_one_starts() -> None:
    assert session_outcome([_job(J.WAITING), _job(J.QUEUED)]).state is SessionState.QUEUED
    running = session_outcome([_job(J.WAITING), _job(J.RUNNING, started=True)])
    assert running.state is SessionState.IN_PROGRESS


def test_a_waiting_job_keeps_its_session_open_after_the_others_ended() -> None:
    outcome = session_outcome([_job(J.SUCCEEDED, started=True), _job(J.WAITING)])
    assert outcome == session_outcome([_job(J.SUCCEEDED, started=True), _job(J.QUEUED)])
    assert outcome.conclusion is None


def test_skipped_dependents_of_a_failed_task_fail_the_session_because_of_that_task() -> None:
    jobs = [
        _job(J.SUCCEEDED, started=True),
        _job(J.FAILED, started=True, klass=FailureClass.TEST),
        _job(J.SKIPPED),
        _job(J.SKIPPED),
    ]
    outcome = session_outcome(jobs)
    assert outcome.state is SessionState.COMPLETED
    assert outcome.conclusion is Conclusion.FAILURE


def test_skipped_dependents_do_not_turn_a_timeout_into_something_else() -> None:
    jobs = [_job(J.TIMED_OUT, started=True, klass=FailureClass.TIMEOUT), _job(J.SKIPPED)]
    assert session_outcome(jobs).conclusion is Conclusion.TIMED_OUT


def test_every_job_skipped_because_of_a_cancelled_need_cancels_the_session() -> None:
    jobs = [_job(J.CANCELLED, klass=FailureClass.CANCELLED), _job(J.SKIPPED), _job(J.SKIPPED)]
    outcome = session_outcome(jobs)
    assert outcome.state is SessionState.COMPLETED
    assert outcome.conclusion is Conclusion.CANCELLED


def test_a_session_of_nothing_but_skipped_jobs_ran_nothing_and_is_cancelled() -> None:
    assert session_outcome([_job(J.SKIPPED)]).conclusion is Conclusion.CANCELLED


def test_a_retried_attempt_and_a_skipped_job_leave_the_success_to_the_rest() -> None:
    retried = _job(J.RETRIED, started=True, klass=FailureClass.INFRASTRUCTURE)
    jobs = [retried, _job(J.SUCCEEDED, started=True)]
    assert session_outcome(jobs).conclusion is Conclusion.SUCCESS


def test_the_task_graph_reads_the_lifecycle_members() -> None:
    assert task_state([J.WAITING, J.WAITING]) is NeedState.WAITING
    assert task_state([J.SKIPPED]) is NeedState.SKIPPED
    assert task_state([J.SUCCEEDED, J.SKIPPED]) is NeedState.SKIPPED
    verdicts = readiness(
        {"build": (), "smoke": ("build",)}, {"build": NeedState.FAILED, "smoke": NeedState.WAITING}
    )
    assert verdicts == {"smoke": Skip("build", NeedState.FAILED)}
