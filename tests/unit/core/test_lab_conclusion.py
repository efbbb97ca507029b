"""DESIGN.md, "A lab problem is not a code failure": a row of the session rule's table per test.

A session's conclusion is ``failure`` only when a job's own command failed (``test``) and ``timed_out``
when it overran its own timeout; when every job that did not succeed ended for the lab's reason (an
infrastructure failure after its retries, its queue-wait budget, a host that cannot run it) it is the lab's
(``KERRIGAN_LAB_CONCLUSION``); a cancel stays a cancel.
"""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import (
    LAB_CONCLUSIONS,
    Conclusion,
    FailureClass,
    JobFacts,
    JobState,
    SessionState,
    failure_class,
    session_outcome,
)
from kerrigan.core.sessions import RETRYABLE

J = JobState


def _ended(state: JobState, reason: str | None = None, exit_status: int | None = None) -> JobFacts:
    return JobFacts(state, True, failure_class(state, reason, exit_status), reason)


PASSED = _ended(J.SUCCEEDED)
TEST_FAILED = _ended(J.FAILED, exit_status=1)
OWN_TIMEOUT = _ended(J.TIMED_OUT, "timed_out")
CANCELLED = _ended(J.CANCELLED, "cancelled")
DEVICE_FAULT = _ended(J.FAILED, "device_fault", exit_status=75)
DEVICE_FAULT_RETRIED = _ended(J.RETRIED, "device_fault", exit_status=75)
RUNNER_LOST = _ended(J.FAILED, "runner_lost")
SOURCE_UNAVAILABLE = _ended(J.FAILED, "source_unavailable")
QUEUE_WAIT = JobFacts(
    J.REFUSED_BEFORE_START,
    False,
    failure_class(J.REFUSED_BEFORE_START, "queue_wait_exceeded", None),
    "queue_wait_exceeded",
)
UNFIT = JobFacts(
    J.REFUSED_BEFORE_START, False, failure_class(J.REFUSED_BEFORE_START, "runner_full", None), "runner_full"
)
# Its host refused what the commit holds (its tarball, an artifact): every device would; not the lab's.
NOT_STARTED = JobFacts(J.FAILED, False, failure_class(J.FAILED, "not_started", None), "not_started")
SKIPPED = JobFacts(J.SKIPPED)


@pytest.mark.parametrize(
    ("jobs", "conclusion"),
    [
        pytest.param([PASSED, PASSED], Conclusion.SUCCESS, id="every job passed"),
        pytest.param([PASSED, TEST_FAILED], Conclusion.FAILURE, id="a job's own command failed"),
        pytest.param([PASSED, OWN_TIMEOUT], Conclusion.TIMED_OUT, id="a job overran its own timeout"),
        pytest.param([TEST_FAILED, QUEUE_WAIT], Conclusion.FAILURE, id="a test failure beside a lab problem"),
        pytest.param([OWN_TIMEOUT, DEVICE_FAULT], Conclusion.TIMED_OUT, id="a timeout beside a lab problem"),
        pytest.param([CANCELLED, QUEUE_WAIT], Conclusion.CANCELLED, id="a cancelled session stays cancelled"),
        pytest.param([PASSED, QUEUE_WAIT], Conclusion.ACTION_REQUIRED, id="its queue-wait budget ran out"),
        pytest.param(
            [DEVICE_FAULT_RETRIED, DEVICE_FAULT_RETRIED, DEVICE_FAULT],
            Conclusion.ACTION_REQUIRED,
            id="device fault (exit 75) on every attempt",
        ),
        pytest.param([PASSED, RUNNER_LOST], Conclusion.ACTION_REQUIRED, id="its runner was lost"),
        pytest.param(
            [SOURCE_UNAVAILABLE], Conclusion.ACTION_REQUIRED, id="its host could not fetch the source"
        ),
        pytest.param([UNFIT], Conclusion.ACTION_REQUIRED, id="unfit: the runner host cannot run it"),
        pytest.param([QUEUE_WAIT, SKIPPED], Conclusion.ACTION_REQUIRED, id="its dependents skipped"),
        pytest.param([DEVICE_FAULT, QUEUE_WAIT, UNFIT], Conclusion.ACTION_REQUIRED, id="lab reasons only"),
        pytest.param(
            [JobFacts(J.FAILED, started=True)], Conclusion.FAILURE, id="an end no class explains is a failure"
        ),
        pytest.param([NOT_STARTED], Conclusion.FAILURE, id="its host refused what the commit holds"),
    ],
)
def test_the_session_rule(jobs: list[JobFacts], conclusion: Conclusion) -> None:
    outcome = session_outcome(jobs)
    assert outcome.state is SessionState.COMPLETED
    assert outcome.conclusion is conclusion


@pytest.mark.parametrize("lab", LAB_CONCLUSIONS)
def test_the_lab_conclusion_is_the_labs_choice(lab: Conclusion) -> None:
    assert session_outcome([PASSED, QUEUE_WAIT], lab=lab).conclusion is lab
    assert session_outcome([RUNNER_LOST], lab=lab).conclusion is lab
    # The lab's choice never touches a code failure, a timeout or a cancel.
    assert session_outcome([TEST_FAILED, QUEUE_WAIT], lab=lab).conclusion is Conclusion.FAILURE
    assert session_outcome([OWN_TIMEOUT], lab=lab).conclusion is Conclusion.TIMED_OUT
    assert session_outcome([CANCELLED, QUEUE_WAIT], lab=lab).conclusion is Conclusion.CANCELLED


def test_action_required_is_the_default_and_neutral_the_other_choice() -> None:
    assert LAB_CONCLUSIONS == (Conclusion.ACTION_REQUIRED, Conclusion.NEUTRAL)


def test_a_retried_attempt_of_the_labs_does_not_count_once_a_later_one_passes() -> None:
    assert session_outcome([DEVICE_FAULT_RETRIED, PASSED]).conclusion is Conclusion.SUCCESS


@pytest.mark.parametrize("lab", LAB_CONCLUSIONS)
def test_kerrigan_retry_re_runs_a_session_the_lab_failed(lab: Conclusion) -> None:
    assert lab in RETRYABLE
    assert Conclusion.SUCCESS not in RETRYABLE


def test_the_lab_failure_classes() -> None:
    assert {job.failure_class for job in (DEVICE_FAULT, RUNNER_LOST, QUEUE_WAIT, UNFIT)} == {
        FailureClass.INFRASTRUCTURE,
        FailureClass.QUEUE_WAIT_EXCEEDED,
        FailureClass.UNFIT,
    }
