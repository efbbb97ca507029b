"""The rules of a board's recovery: which ends leave a board in doubt, what a recovery's end says of its
board, and the health reason that keeps a bad board's console as the evidence."""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import POWER_FAILED, FailureClass, JobState
from kerrigan.core.recovery import (
    FAILED_RECOVERIES_FOR_BAD,
    POWER_WAIT_FOR_BAD_S,
    REASON_MAX,
    RecoveryOutcome,
    bad_reason,
    needs_recovery,
    recovery_outcome,
    why_again,
)


@pytest.mark.parametrize(
    ("state", "klass", "needed"),
    [
        (JobState.FAILED, FailureClass.INFRASTRUCTURE, True),
        (JobState.CANCELLED, FailureClass.CANCELLED, True),
        (JobState.TIMED_OUT, FailureClass.TIMEOUT, True),
        (JobState.FAILED, FailureClass.TEST, False),  # the board ran the test: its code failed
        (JobState.SUCCEEDED, None, False),
    ],
)
def test_a_board_is_in_doubt_after_the_labs_failure_a_cancel_or_a_timeout(
    state: JobState, klass: FailureClass | None, needed: bool
) -> None:
    assert needs_recovery(state, klass) is needed


def test_a_recovery_that_succeeds_recovers_whatever_failed_before() -> None:
    outcome = recovery_outcome(JobState.SUCCEEDED, None, started=True, failures_before=2)
    assert outcome is RecoveryOutcome.RECOVERED


@pytest.mark.parametrize(("before", "expected"), [(0, RecoveryOutcome.FAILED), (1, RecoveryOutcome.FAILED)])
def test_a_failed_recovery_under_the_limit_is_followed_by_another(
    before: int, expected: RecoveryOutcome
) -> None:
    assert recovery_outcome(JobState.FAILED, "boot_failed", started=True, failures_before=before) is expected


def test_the_third_failed_recovery_in_a_row_makes_the_board_bad() -> None:
    before = FAILED_RECOVERIES_FOR_BAD - 1
    outcome = recovery_outcome(JobState.FAILED, "boot_failed", started=True, failures_before=before)
    assert outcome is RecoveryOutcome.BAD
    assert recovery_outcome(JobState.TIMED_OUT, "timed_out", started=True, failures_before=before) is (
        RecoveryOutcome.BAD
    )


@pytest.mark.parametrize(
    ("state", "reason", "started", "expected"),
    [
        (JobState.CANCELLED, "cancelled", True, RecoveryOutcome.NONE),  # a person stopped it
        (JobState.FAILED, "runner_lost", False, RecoveryOutcome.NONE),  # its host went away first
        (JobState.FAILED, "boot_failed", False, RecoveryOutcome.FAILED),  # its board failed it before start
    ],
)
def test_a_recovery_stopped_before_its_board_was_tried_says_nothing(
    state: JobState, reason: str, started: bool, expected: RecoveryOutcome
) -> None:
    assert recovery_outcome(state, reason, started=started, failures_before=0) is expected


def test_the_next_recovery_says_which_it_is_and_why() -> None:
    assert why_again(1, "boot_failed") == "recovery 2 of 3: the last boot_failed"


def test_a_bad_boards_reason_keeps_the_consoles_last_lines() -> None:
    console = ["", "U-Boot 2024.01", "Starting kernel ...", "  ", *[f"line {n}" for n in range(8)]]
    reason = bad_reason(3, "boot_failed", console)
    assert reason == (
        "3 recoveries failed in a row (the last boot_failed); the console's last lines: "
        "line 3 | line 4 | line 5 | line 6 | line 7"
    )
    assert (
        bad_reason(3, None, []) == "3 recoveries failed in a row (the last failed); the console said nothing"
    )


def test_a_bad_boards_reason_fits_the_column_however_long_its_console_lines() -> None:
    reason = bad_reason(3, "boot_failed", ["x" * 2000])
    assert len(reason) == REASON_MAX
    assert reason.endswith("…")


@pytest.mark.parametrize("waited_s", [None, 0.0, POWER_WAIT_FOR_BAD_S - 1])
@pytest.mark.parametrize("started", [False, True])
def test_a_recovery_whose_power_did_not_answer_waits_for_it_without_counting(
    waited_s: float | None, started: bool
) -> None:
    # The agent reports a job's start before it powers the board: started or not, power_failed is the
    # power's answer before the command.
    before = FAILED_RECOVERIES_FOR_BAD - 1  # even the one that would make it bad
    outcome = recovery_outcome(
        JobState.FAILED, POWER_FAILED, started=started, failures_before=before, power_waited_s=waited_s
    )
    assert outcome is RecoveryOutcome.WAITING_FOR_POWER


def test_a_power_silent_for_long_enough_makes_the_board_bad() -> None:
    outcome = recovery_outcome(
        JobState.FAILED, POWER_FAILED, started=False, failures_before=0, power_waited_s=POWER_WAIT_FOR_BAD_S
    )
    assert outcome is RecoveryOutcome.BAD


def test_a_cancelled_recovery_never_waits_for_power() -> None:
    outcome = recovery_outcome(JobState.CANCELLED, POWER_FAILED, started=False, failures_before=0)
    assert outcome is RecoveryOutcome.NONE
