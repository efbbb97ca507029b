"""The check run's job output: a job whose output was cut says so where the folded tail is shown."""

from __future__ import annotations

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.core.runner_fields import cut_notice
from kerrigan.github.checks import JobProgress, SessionContext, progress_body

CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def summary(*jobs: JobProgress) -> str:
    body = progress_body("hil-smoke", CONTEXT, jobs, SessionState.COMPLETED, Conclusion.SUCCESS)
    text: str = body.fields["output"]["summary"]
    return text


def test_a_cut_output_is_marked_on_its_folded_line_and_as_its_last_line() -> None:
    tail = "y\n" * 30 + cut_notice(64 * 1024 * 1024)
    shown = summary(JobProgress("smoke-som", "succeeded", exit_status=0, output_tail=tail))
    marked = "smoke-som: last lines of output (output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES))"
    assert f"<summary>{marked}</summary>" in shown
    block = shown.split("```\n", 1)[1].split("```", 1)[0]
    assert block.splitlines()[-1] == "[output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)]"
    assert len(block.splitlines()) == 20


def test_output_that_only_mentions_the_notice_earlier_is_not_marked() -> None:
    tail = cut_notice(1024) + "and then more\n"
    shown = summary(JobProgress("boot-som", "succeeded", exit_status=0, output_tail=tail))
    assert "<summary>boot-som: last lines of output</summary>" in shown


def test_an_uncut_output_has_the_plain_folded_line() -> None:
    shown = summary(JobProgress("boot-som", "succeeded", exit_status=0, output_tail="booted\n"))
    assert "<summary>boot-som: last lines of output</summary>" in shown


def test_a_failed_job_on_a_suspect_device_says_so_with_the_numbers() -> None:
    words = "modalix-redbox failed 8 of 10 runs of this task in 7 days; its 5 peers failed 1 of 52"
    shown = summary(
        JobProgress("boot", "failed", "modalix-redbox", exit_status=1, suspect=words),
        JobProgress(
            "smoke", "succeeded", "modalix-redbox", exit_status=0, suspect=words
        ),  # passed: not named
    )
    assert "**Suspect devices**" in shown
    assert shown.count(words) == 1
    assert f"- `boot`: {words}: the device may be at fault, not the code" in shown
    assert "**Suspect devices**" not in summary(
        JobProgress("boot", "failed", "modalix-redbox", exit_status=1)
    )


def test_kerrigan_sends_nothing_only_github_may_set() -> None:
    # GitHub refuses a conclusion of stale (it sets it itself) and an external_id that is not a string.
    assert "stale" not in {conclusion.value for conclusion in Conclusion}
    body = progress_body("hil", CONTEXT, [JobProgress("smoke", "failed")], SessionState.COMPLETED, None)
    assert body.fields["conclusion"] == "failure"
    assert isinstance(body.fields["external_id"], str)
