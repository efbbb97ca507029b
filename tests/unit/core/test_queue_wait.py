"""The queue-wait budget, with the clock as plain numbers (seed 003's "Queue wait" rules)."""

from __future__ import annotations

import pytest

from kerrigan.core.queue_wait import (
    QueueWait,
    RunnerAnswer,
    WithdrawalOutcome,
    withdrawal_outcome,
)


def test_the_clock_starts_when_the_job_becomes_dispatchable_not_before() -> None:
    clock = QueueWait.start(ready_at=100.0, limit_s=300)
    assert clock.spent(100.0) == 0
    assert clock.spent(160.0) == 60


def test_workspace_owner_wait_does_not_spend_queue_wait_budget() -> None:
    # waiting only on its own session's earlier job: the clock pauses
    clock = QueueWait.start(0.0, 300).observe(50.0, counts=False)
    assert clock.spent(250.0) == 50


def test_queue_wait_clock_resumes_for_capacity_after_workspace_owner_finishes() -> None:
    clock = QueueWait.start(0.0, 300).observe(50.0, counts=False).observe(200.0, counts=True)
    assert clock.spent(260.0) == 50 + 60


def test_observing_the_same_state_again_changes_nothing() -> None:
    clock = QueueWait.start(0.0, 300)
    assert clock.observe(10.0, counts=True) == clock
    paused = clock.observe(10.0, counts=False)
    assert paused.observe(20.0, counts=False) == paused


@pytest.mark.parametrize(("now", "exceeded"), [(299.9, False), (300.0, True), (400.0, True)])
def test_the_budget_runs_out_at_its_limit(now: float, exceeded: bool) -> None:
    assert QueueWait.start(0.0, 300).exceeded(now) is exceeded


def test_zero_queue_wait_withdraws_at_once() -> None:
    assert QueueWait.start(5.0, 0).exceeded(5.0)


def test_remaining_budget_never_goes_below_zero() -> None:
    assert QueueWait.start(0.0, 10).remaining(100.0) == 0


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        (RunnerAnswer.WITHDRAWN, WithdrawalOutcome.REFUSED_BEFORE_START),
        (RunnerAnswer.STARTED, WithdrawalOutcome.RUNS),
    ],
)
def test_only_the_runners_answer_decides_a_withdrawal(
    answer: RunnerAnswer, outcome: WithdrawalOutcome
) -> None:
    assert withdrawal_outcome(answer) is outcome
