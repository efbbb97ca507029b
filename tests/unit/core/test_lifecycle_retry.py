"""The automatic retry rule: which ended jobs get another attempt, and how the budgets count."""

from __future__ import annotations

import itertools

import pytest

from kerrigan.core.lifecycle import (
    DEVICE_FAULT_EXIT,
    MAX_RETRIES,
    POWER_FAILED,
    POWER_WAIT_S,
    FailureClass,
    JobFacts,
    JobState,
    RetryPolicy,
    SessionState,
    check_transition,
    failure_class,
    session_outcome,
    should_retry,
    spends_retries,
)

INFRA = FailureClass.INFRASTRUCTURE
TEST = FailureClass.TEST


@pytest.mark.parametrize("reason", ["runner_lost", "source_unavailable", "device_fault", "runner_disk_full"])
def test_an_infrastructure_failure_is_retried_twice_by_default(reason: str) -> None:
    klass = failure_class(JobState.FAILED, reason, None)
    assert klass is INFRA
    policy = RetryPolicy()
    assert should_retry(policy, JobState.FAILED, klass, None, [], reason=reason)
    assert should_retry(policy, JobState.FAILED, klass, None, [INFRA], reason=reason)
    assert not should_retry(policy, JobState.FAILED, klass, None, [INFRA, INFRA], reason=reason)


def test_a_job_its_host_could_not_start_is_not_retried() -> None:
    """The runner does not say whether the fetch failed or the tarball was refused for its contents."""
    klass = failure_class(JobState.FAILED, "not_started", None)
    assert klass is INFRA
    assert not should_retry(
        RetryPolicy(infrastructure=5), JobState.FAILED, klass, None, [], reason="not_started"
    )


def test_exit_status_75_is_the_devices_failure_and_retried() -> None:
    klass = failure_class(JobState.FAILED, "device_fault", DEVICE_FAULT_EXIT)
    assert should_retry(RetryPolicy(), JobState.FAILED, klass, DEVICE_FAULT_EXIT, [], reason="device_fault")


def test_a_test_failure_is_never_retried_unless_its_exit_status_is_listed() -> None:
    assert not should_retry(RetryPolicy(), JobState.FAILED, TEST, 1, [])
    listed = RetryPolicy(exit_status=frozenset({3}), limit=1)
    assert not should_retry(listed, JobState.FAILED, TEST, 1, [])
    assert should_retry(listed, JobState.FAILED, TEST, 3, [])
    assert not should_retry(listed, JobState.FAILED, TEST, 3, [TEST])


def test_each_budget_counts_its_own_kind() -> None:
    policy = RetryPolicy(infrastructure=1, exit_status=frozenset({3}), limit=1)
    assert should_retry(policy, JobState.FAILED, TEST, 3, [INFRA])
    assert should_retry(policy, JobState.FAILED, INFRA, None, [TEST])
    assert not should_retry(policy, JobState.FAILED, INFRA, None, [TEST, INFRA])
    assert policy.max_attempts == 3


def test_a_power_that_did_not_answer_spends_no_retry_for_an_hour() -> None:
    """A PDU down for minutes: every board a job is sent to meets it, within seconds of each other."""
    silent = [(POWER_FAILED, 0.0), (POWER_FAILED, 60.0), (POWER_FAILED, POWER_WAIT_S - 1)]
    assert spends_retries(silent) == [False, False, False]
    # An hour of it: the power is broken, not briefly down; it counts as any failure of the lab's.
    assert spends_retries([*silent, (POWER_FAILED, POWER_WAIT_S)]) == [False, False, False, True]
    # Other failures count as ever, before, between and after.
    mixed = [("runner_lost", 0.0), (POWER_FAILED, 0.0), ("boot_failed", 30.0), (POWER_FAILED, 40.0)]
    assert spends_retries(mixed) == [True, False, True, False]


def test_at_most_max_retries_attempts_wait_for_the_power_for_free() -> None:
    """A power that answers half the time, or a pool of one board, cannot keep a task trying all hour."""
    ends = [(POWER_FAILED, float(n)) for n in range(MAX_RETRIES + 2)]
    assert spends_retries(ends) == [False] * MAX_RETRIES + [True, True]


def test_a_free_attempt_is_retried_whatever_the_budget_spent_unless_the_policy_retries_none() -> None:
    spent = [INFRA, INFRA]
    assert should_retry(RetryPolicy(), JobState.FAILED, INFRA, 75, spent, reason=POWER_FAILED, free=True)
    assert not should_retry(RetryPolicy(), JobState.FAILED, INFRA, 75, spent, reason=POWER_FAILED)
    assert not should_retry(
        RetryPolicy(infrastructure=0), JobState.FAILED, INFRA, 75, [], reason=POWER_FAILED, free=True
    )


def test_zero_infrastructure_retries_retries_nothing() -> None:
    assert not should_retry(RetryPolicy(infrastructure=0), JobState.FAILED, INFRA, None, [])


@pytest.mark.parametrize(
    ("state", "klass"),
    [
        (JobState.SUCCEEDED, None),
        (JobState.TIMED_OUT, FailureClass.TIMEOUT),
        (JobState.CANCELLED, FailureClass.CANCELLED),
        (JobState.REFUSED_BEFORE_START, FailureClass.QUEUE_WAIT_EXCEEDED),
        (JobState.REFUSED_BEFORE_START, FailureClass.UNFIT),
        (JobState.FAILED, FailureClass.UNFIT),
        (JobState.RETRIED, INFRA),
    ],
)
def test_other_ends_are_never_retried(state: JobState, klass: FailureClass | None) -> None:
    generous = RetryPolicy(infrastructure=5, exit_status=frozenset(range(1, 256)), limit=5)
    assert not should_retry(generous, state, klass, 1, [])


def test_the_rule_agrees_with_the_transition_table_for_every_state_and_class() -> None:
    """Exhaustively: whatever the rule retries may move to ``retried``."""
    generous = RetryPolicy(infrastructure=5, exit_status=frozenset(range(1, 256)), limit=5)
    for state, klass, status in itertools.product(JobState, [None, *FailureClass], [None, 1, 75]):
        if should_retry(generous, state, klass, status, []):
            check_transition(state, JobState.RETRIED)
            assert klass in (INFRA, TEST)


def test_a_retried_attempt_does_not_decide_the_session() -> None:
    retried = JobFacts(JobState.RETRIED, started=True, failure_class=INFRA)
    assert session_outcome([retried, JobFacts(JobState.QUEUED)]).state is SessionState.IN_PROGRESS
    done = session_outcome([retried, JobFacts(JobState.SUCCEEDED, started=True)])
    assert (done.state, done.conclusion and done.conclusion.value) == (SessionState.COMPLETED, "success")


def test_a_policy_survives_being_stored() -> None:
    policy = RetryPolicy(1, frozenset({3, 9}), 2, suspect=3)
    assert RetryPolicy.from_dict(policy.as_dict()) == policy
    assert RetryPolicy.from_dict(None) == RetryPolicy(infrastructure=0, suspect=0)  # stored before policies
    # Stored before suspect retries were: the session keeps the rule it was created under.
    assert RetryPolicy.from_dict({"infrastructure": 2, "exit_status": [], "limit": 0}).suspect == 0
