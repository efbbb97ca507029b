"""The check run of a retried or cancelled session: each attempt listed, the current ones counted, and who
cancelled it or which commit superseded it."""

from __future__ import annotations

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.github.checks import JobProgress, SessionContext, progress_body, short_body

CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")
LOST = JobProgress("smoke", "retried", "modalix-bluebox", "lab-a-01", None, "runner_lost", attempts=3)
SECOND = JobProgress(
    "smoke",
    "succeeded",
    "modalix-redbox",
    "lab-a-02",
    0,
    attempt=2,
    attempts=3,
    after="runner_lost on modalix-bluebox",
)


def test_a_retried_task_lists_each_attempt_and_only_the_current_one_counts() -> None:
    body = progress_body("hil", CONTEXT, [LOST, SECOND], SessionState.COMPLETED, Conclusion.SUCCESS)
    summary = body.fields["output"]["summary"]
    assert body.fields["output"]["title"] == "1 job passed"
    assert "- `smoke`: attempt 1 of 3 on modalix-bluebox: retried (runner_lost)" in summary
    assert (
        "- `smoke`: attempt 2 of 3 on modalix-redbox after runner_lost on modalix-bluebox: succeeded"
        in summary
    )
    assert "succeeded, attempt 2 of 3 on modalix-redbox after runner_lost on modalix-bluebox" in summary


def test_a_reason_the_table_names_is_said_in_plain_words_once() -> None:
    again = JobProgress("flash", "retried", "modalix-bluebox", "lab-a-01", None, "runner_lost", attempts=3)
    summary = progress_body(
        "hil", CONTEXT, [LOST, again, SECOND], SessionState.COMPLETED, Conclusion.SUCCESS
    ).fields["output"]["summary"]
    assert (
        summary.count("- `runner_lost`: its runner host stopped answering: no heartbeat for the lease") == 1
    )


def test_a_reason_its_state_already_says_gets_no_words() -> None:
    job = JobProgress("smoke", "timed_out", "modalix-redbox", "lab-a-01", None, "timed_out")
    summary = progress_body("hil", CONTEXT, [job], SessionState.COMPLETED, Conclusion.TIMED_OUT).fields[
        "output"
    ]["summary"]
    assert "- `timed_out`:" not in summary


def test_a_task_run_once_lists_no_attempts() -> None:
    once = JobProgress("smoke", "succeeded", "modalix-redbox", exit_status=0, attempts=3)
    summary = progress_body("hil", CONTEXT, [once], SessionState.COMPLETED, Conclusion.SUCCESS).fields[
        "output"
    ]["summary"]
    assert "Attempts" not in summary
    assert "attempt 1" not in summary


def test_a_superseded_session_says_by_which_commit() -> None:
    job = JobProgress("smoke", "cancelled", reason="cancelled")
    body = progress_body(
        "hil",
        CONTEXT,
        [job],
        SessionState.COMPLETED,
        Conclusion.CANCELLED,
        cancel_reason="superseded by 3f2a1b0",
    )
    assert body.fields["conclusion"] == "cancelled"
    assert body.fields["output"]["title"] == "Superseded by 3f2a1b0: 1 job cancelled"
    assert "Superseded by 3f2a1b0." in body.fields["output"]["summary"]


def test_a_person_s_cancel_is_rendered_the_same_way_while_jobs_stop() -> None:
    job = JobProgress("smoke", "running", "modalix-redbox")
    body = progress_body(
        "hil", CONTEXT, [job], SessionState.IN_PROGRESS, None, cancel_reason="cancelled by hubot"
    )
    assert body.fields["status"] == "in_progress"
    assert body.fields["output"]["title"] == "Cancelled by hubot, stopping: 1 job running"
    assert "Cancelled by hubot." in body.fields["output"]["summary"]


def test_the_short_body_names_the_cancel_too() -> None:
    body = short_body(
        "hil",
        CONTEXT,
        SessionState.COMPLETED,
        Conclusion.CANCELLED,
        "too big",
        cancel_reason="cancelled by hubot",
    )
    assert body.fields["output"]["title"] == "Cancelled by hubot (short report: GitHub refused the full one)"
