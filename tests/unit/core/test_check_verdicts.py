"""A health check's end: the device's failure, or the check's own (``check_broken``)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kerrigan.core.check_verdicts import (
    Broken,
    CheckEnd,
    Failure,
    Verdict,
    broken_now,
    same_failure_in_hour,
    verdict,
)
from kerrigan.core.lifecycle import JobState

T0 = datetime(2025, 3, 4, 9, 0, tzinfo=UTC)
_pks = iter(range(1, 10_000))


def end(
    device: str,
    minutes: float,
    exit_status: int | None = 1,
    state: JobState = JobState.FAILED,
    *,
    broken: bool = False,
) -> CheckEnd:
    if state is JobState.SUCCEEDED:
        exit_status = 0
    return CheckEnd(device, next(_pks), T0 + timedelta(minutes=minutes), state, exit_status, broken)


def passed(device: str, minutes: float) -> CheckEnd:
    return end(device, minutes, state=JobState.SUCCEEDED)


def test_exit_127_is_broken_even_on_the_first_device() -> None:
    assert verdict(end("board-a", 0, 127), []) is Verdict.BROKEN


def test_exit_126_is_broken() -> None:
    assert verdict(end("board-a", 0, 126), [passed("board-b", -5)]) is Verdict.BROKEN


def test_a_failure_on_one_device_only_is_that_devices() -> None:
    assert verdict(end("board-a", 0, 1), []) is Verdict.FAILED
    # Its peers passed in the hour: the board is the odd one out.
    assert verdict(end("board-a", 0, 1), [passed("board-b", -10), passed("board-c", -20)]) is Verdict.FAILED


def test_the_same_failure_on_every_device_within_an_hour_is_broken() -> None:
    earlier = [end("board-a", -50, 1), end("board-b", -20, 1)]
    assert verdict(end("board-c", 0, 1), earlier) is Verdict.BROKEN
    assert verdict(end("board-b", 0, 1), [end("board-a", -59, 1)]) is Verdict.BROKEN


def test_the_same_failure_more_than_an_hour_apart_is_not() -> None:
    assert verdict(end("board-b", 0, 1), [end("board-a", -61, 1)]) is Verdict.FAILED


def test_a_different_failure_on_two_devices_is_not_broken() -> None:
    assert verdict(end("board-b", 0, 1), [end("board-a", -10, 2)]) is Verdict.FAILED
    assert verdict(end("board-b", 0, 1), [end("board-a", -10, None, JobState.TIMED_OUT)]) is Verdict.FAILED


def test_a_device_that_passed_in_the_hour_keeps_it_from_being_broken() -> None:
    earlier = [end("board-a", -30, 1), passed("board-c", -15)]
    assert verdict(end("board-b", 0, 1), earlier) is Verdict.FAILED


def test_each_devices_latest_end_in_the_hour_counts() -> None:
    # board-a passed, then failed like board-b: the check broke in between (a new script, say).
    earlier = [passed("board-a", -40), end("board-a", -10, 1)]
    assert verdict(end("board-b", 0, 1), earlier) is Verdict.BROKEN


def test_timing_out_on_every_device_is_broken() -> None:
    earlier = [end("board-a", -10, None, JobState.TIMED_OUT)]
    assert verdict(end("board-b", 0, None, JobState.TIMED_OUT), earlier) is Verdict.BROKEN


def test_a_lost_runner_or_a_cancel_weighs_nothing() -> None:
    lost = end("board-a", -10, None, JobState.FAILED)
    cancelled = end("board-c", -5, None, JobState.CANCELLED)
    assert verdict(end("board-b", 0, 1), [lost, cancelled]) is Verdict.FAILED
    assert verdict(lost, [end("board-b", -5, None, JobState.FAILED)]) is Verdict.FAILED
    assert verdict(end("board-b", 0, 1), [end("board-a", -10, 1), lost]) is Verdict.BROKEN


def test_a_broken_check_stays_broken_while_it_fails_the_same_way_past_the_hour() -> None:
    earlier = [end("board-a", -300, 1, broken=True)]
    assert verdict(end("board-b", 0, 1), earlier) is Verdict.BROKEN
    assert verdict(end("board-b", 0, 2), earlier) is Verdict.FAILED  # another failure: the board's
    earlier = [end("board-a", -300, 1, broken=True), passed("board-c", -200)]
    assert verdict(end("board-b", 0, 1), earlier) is Verdict.FAILED  # it worked since


def test_a_pass_is_a_pass() -> None:
    assert verdict(passed("board-a", 0), [end("board-b", -1, 127, broken=True)]) is Verdict.PASSED


def test_same_failure_in_hour_names_the_devices_set_bad_wrongly() -> None:
    a, b = end("board-a", -50, 1), end("board-b", -20, 1)
    now = end("board-c", 0, 1)
    wrongly = same_failure_in_hour(now, [end("board-a", -70, 1), a, b, end("board-d", -5, 1, broken=True)])
    assert wrongly == (a, b)


def test_broken_now_runs_from_the_first_broken_end_after_the_last_good_one() -> None:
    first, second = end("board-a", 10, 127, broken=True), end("board-b", 20, 127, broken=True)
    ends = [passed("board-a", 0), first, second, end("board-c", 25, None, JobState.CANCELLED)]
    found = broken_now("/opt/lab/health.sh", ends)
    assert found == Broken(
        "/opt/lab/health.sh", Failure(JobState.FAILED, 127), ("board-a", "board-b"), first.at
    )
    assert found.sentence() == "exit 127 on board-a, board-b (command not found)"
    assert broken_now("/opt/lab/health.sh", [*ends, passed("board-c", 30)]) is None
    assert broken_now("/opt/lab/health.sh", []) is None


def test_failure_words() -> None:
    assert Failure(JobState.FAILED, 126).cannot_run == "not executable"
    assert Failure(JobState.FAILED, 1).cannot_run is None
    assert Failure(JobState.TIMED_OUT, None).words() == "timed out"
