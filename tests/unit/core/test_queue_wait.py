"""The queue-wait budget, with the clock as plain numbers (seed 003's "Queue wait" rules)."""

from __future__ import annotations

import pytest

from kerrigan.core.dispatch_order import WaitKind
from kerrigan.core.queue_wait import (
    WAIT_KIND_WORDS,
    WAITED_ROOM,
    QueueWait,
    RunnerAnswer,
    WithdrawalOutcome,
    waited_words,
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


# -- what a job waited on, in the diagnostics' words (issue 28) ------------------------------------------


def test_what_a_job_waited_on_is_each_device_and_its_reasons() -> None:
    words = waited_words(
        300,
        [
            ("modalix-bluebox", "device in maintenance since 2026-12-01 09:12 by hubot: reflashing"),
            ("modalix-redbox", "runner host lab-a-01 offline"),
        ],
    )
    assert words == (
        "waited 300 s: modalix-bluebox device in maintenance since 2026-12-01 09:12 by hubot: reflashing; "
        "modalix-redbox runner host lab-a-01 offline"
    )


def test_devices_with_the_same_reasons_share_them_and_what_does_not_fit_is_counted() -> None:
    offline = [(f"board-{n:03}", "runner host rig-02 offline") for n in range(3)]
    assert (
        waited_words(60, offline) == "waited 60 s: board-000, board-001, board-002 runner host rig-02 offline"
    )
    many = [(f"board-{n:03}", f"device health bad: check {n} failed") for n in range(100)]
    words = waited_words(60, many)
    assert len(words) <= WAITED_ROOM
    assert words.startswith("waited 60 s: board-000 device health bad: check 0 failed; board-001")
    kept = words.count("device health bad")
    assert words.endswith(f"; and {100 - kept} more")
    crowd = [(f"board-{n:03}", "runner host rig-02 offline") for n in range(100)]
    words = waited_words(60, crowd)
    assert len(words) <= WAITED_ROOM
    assert words.startswith("waited 60 s: board-000, board-001, ")
    assert words.endswith(" more runner host rig-02 offline")


def test_a_job_that_waited_on_no_device_says_what_it_waited_on() -> None:
    assert waited_words(30, [], WAIT_KIND_WORDS[WaitKind.CAPACITY]) == (
        "waited 30 s: the runner hosts of its free devices lacked the vCPUs it claims"
    )
    assert waited_words(30, []) == "waited 30 s"
    assert set(WAIT_KIND_WORDS) == set(WaitKind)
