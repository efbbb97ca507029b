"""The suspect retry rule: a job that failed on a suspect device gets one more attempt (``retry.suspect``),
on a device that is neither where it failed nor suspect; none when no such device exists."""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import NO_RETRY, FailureClass, JobState, RetryPolicy, failure_class
from kerrigan.core.suspect_retry import SuspectFailure, SuspectRetry, suspect_retry, unsuspected_peers

TEST = FailureClass.TEST
PEERS = ("modalix-bluebox",)


def test_a_test_failure_on_a_suspect_device_is_retried_once_by_default() -> None:
    policy = RetryPolicy()
    assert policy.suspect == 1
    verdict = suspect_retry(policy, JobState.FAILED, TEST, None, spent=0, peers=PEERS)
    assert verdict is SuspectRetry.RETRIED
    assert suspect_retry(policy, JobState.FAILED, TEST, None, spent=1, peers=PEERS) is SuspectRetry.SPENT


def test_retry_suspect_sets_how_many_times_and_zero_turns_it_off() -> None:
    twice = RetryPolicy(suspect=2)
    assert suspect_retry(twice, JobState.FAILED, TEST, None, spent=1, peers=PEERS) is SuspectRetry.RETRIED
    assert suspect_retry(twice, JobState.FAILED, TEST, None, spent=2, peers=PEERS) is SuspectRetry.SPENT
    assert suspect_retry(RetryPolicy(suspect=0), JobState.FAILED, TEST, None, spent=0, peers=PEERS) is None
    assert suspect_retry(NO_RETRY, JobState.FAILED, TEST, None, spent=0, peers=PEERS) is None


def test_without_an_unsuspected_peer_the_job_is_not_retried() -> None:
    verdict = suspect_retry(RetryPolicy(), JobState.FAILED, TEST, None, spent=0, peers=())
    assert verdict is SuspectRetry.NO_PEER


@pytest.mark.parametrize(
    ("state", "reason", "exit_status"),
    [
        (JobState.TIMED_OUT, "timed_out", None),  # its own timeout: the same on any device
        (JobState.CANCELLED, "cancelled", None),
        (JobState.SUCCEEDED, None, 0),
        (JobState.FAILED, "not_started", None),  # what the commit holds: every device refuses it alike
        (JobState.FAILED, "secret_missing", None),
    ],
)
def test_what_no_device_explains_is_not_a_suspect_retry(
    state: JobState, reason: str | None, exit_status: int | None
) -> None:
    klass = failure_class(state, reason, exit_status)
    assert suspect_retry(RetryPolicy(), state, klass, reason, spent=0, peers=PEERS) is None


def test_a_device_fault_on_a_suspect_device_is_one_too() -> None:
    klass = failure_class(JobState.FAILED, "device_fault", 75)
    verdict = suspect_retry(RetryPolicy(), JobState.FAILED, klass, "device_fault", spent=0, peers=PEERS)
    assert verdict is SuspectRetry.RETRIED


def test_the_new_attempt_avoids_where_it_failed_and_every_suspect() -> None:
    candidates = ("modalix-redbox", "modalix-bluebox", "modalix-greybox", "modalix-old-01")
    assert unsuspected_peers(candidates, ["modalix-redbox"], {"modalix-redbox", "modalix-greybox"}) == (
        "modalix-bluebox",
        "modalix-old-01",
    )
    # A gang: each of its devices is where it failed.
    assert unsuspected_peers(candidates, ["modalix-redbox", "modalix-old-01"], set()) == (
        "modalix-bluebox",
        "modalix-greybox",
    )
    assert unsuspected_peers(["modalix-redbox"], ["modalix-redbox"], {"modalix-redbox"}) == ()


def test_a_suspect_failure_in_words() -> None:
    failure = SuspectFailure("modalix-redbox", 10, 8, SuspectRetry.RETRIED)
    assert failure.words() == "failed on modalix-redbox, suspect: 8 of 10 failed this week"
