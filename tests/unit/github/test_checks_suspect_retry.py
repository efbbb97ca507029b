"""The check run of a job that failed on a suspect device (issue 28): both attempts named, with the suspect's
numbers ("failed on modalix-redbox, suspect: 8 of 10 failed this week; passed on modalix-bluebox"), or why
there was no second one."""

from __future__ import annotations

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.core.suspect_retry import SuspectFailure, SuspectRetry
from kerrigan.github.checks import JobProgress, SessionContext, progress_body

CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def _failed(retry: SuspectRetry, state: str = "retried") -> JobProgress:
    return JobProgress(
        "boot",
        state,
        "modalix-redbox",
        "lab-a-01",
        1,
        attempts=3,
        suspect_failure=SuspectFailure("modalix-redbox", 10, 8, retry),
    )


def _summary(jobs: list[JobProgress], conclusion: Conclusion) -> tuple[str, str]:
    output = progress_body("hil", CONTEXT, jobs, SessionState.COMPLETED, conclusion).fields["output"]
    return output["title"], output["summary"]


def _second(state: str, exit_status: int) -> JobProgress:
    return JobProgress(
        "boot",
        state,
        "modalix-bluebox",
        "lab-a-02",
        exit_status,
        attempt=2,
        attempts=3,
        after="exit status 1 on modalix-redbox",
    )


def test_a_suspect_retry_that_passes_names_both_attempts_and_the_check_is_green() -> None:
    title, summary = _summary([_failed(SuspectRetry.RETRIED), _second("succeeded", 0)], Conclusion.SUCCESS)
    assert title == "1 job passed"
    assert (
        "- `boot`: failed on modalix-redbox, suspect: 8 of 10 failed this week; passed on modalix-bluebox"
        in summary
    )
    assert "- `boot`: attempt 2 of 3 on modalix-bluebox after exit status 1 on modalix-redbox: succeeded" in (
        summary
    )


def test_a_suspect_retry_that_fails_too_says_so() -> None:
    _, summary = _summary([_failed(SuspectRetry.RETRIED), _second("failed", 1)], Conclusion.FAILURE)
    assert "suspect: 8 of 10 failed this week; failed on modalix-bluebox too" in summary


def test_a_suspect_retry_still_queued_says_where_it_may_go() -> None:
    queued = JobProgress("boot", "queued", attempt=2, attempts=3)
    body = progress_body(
        "hil", CONTEXT, [_failed(SuspectRetry.RETRIED), queued], SessionState.IN_PROGRESS, None
    )
    assert (
        "suspect: 8 of 10 failed this week; retried on a device that is not suspect: queued"
        in (body.fields["output"]["summary"])
    )


def test_without_an_unsuspected_peer_the_check_run_says_why_it_was_not_retried() -> None:
    _, summary = _summary([_failed(SuspectRetry.NO_PEER, "failed")], Conclusion.FAILURE)
    assert (
        "- `boot`: failed on modalix-redbox, suspect: 8 of 10 failed this week; not retried: no device that "
        "is neither this one nor suspect can run this task"
    ) in summary


def test_a_failure_on_a_device_that_is_not_suspect_says_nothing_of_suspects() -> None:
    plain = JobProgress("boot", "failed", "modalix-redbox", "lab-a-01", 1)
    _, summary = _summary([plain], Conclusion.FAILURE)
    assert "Suspect retries" not in summary
    assert "suspect" not in summary
