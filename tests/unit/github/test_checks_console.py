"""A failed job's console on its check run: its last 20 lines in a fence nothing in them can close, open when
the board itself failed the job (it did not boot), none for a job that passed."""

from __future__ import annotations

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.github.checks import TAIL_LINE_CHARS, TAIL_LINES, JobProgress, SessionContext, progress_body
from kerrigan.github.checks.markdown import fenced

CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")
SUMMARY = "smoke: last lines of its board's console"


def summary_of(*jobs: JobProgress) -> str:
    body = progress_body("hil", CONTEXT, list(jobs), SessionState.COMPLETED, Conclusion.FAILURE)
    return str(body.fields["output"]["summary"])


def test_a_board_that_did_not_boot_shows_the_last_20_console_lines_open_in_a_fence() -> None:
    console = "".join(f"[    {n}.000] probe {n}\r\n" for n in range(40)) + "\x1b[31mKernel panic\x1b[0m\r\n"
    job = JobProgress(
        "smoke", "failed", "modalix-bluebox", "lab-a-01", -1, "boot_failed", console_tail=console
    )
    summary = summary_of(job)
    assert f"<details open><summary>{SUMMARY}</summary>" in summary
    block = summary.split(f"{SUMMARY}</summary>\n\n", 1)[1].split("\n\n</details>", 1)[0]
    lines = block.split("\n")
    assert (lines[0], lines[-1]) == ("```", "```")
    assert len(lines[1:-1]) == TAIL_LINES
    assert lines[1] == "[    21.000] probe 21"  # no carriage return left
    assert lines[-2] == "Kernel panic"  # nor a terminal's colours


def test_backticks_in_the_console_cannot_close_its_fence_and_long_lines_are_cut() -> None:
    console = "```\n</details>\n`````` @everyone\n" + "x" * 5000 + "\n"
    job = JobProgress("smoke", "failed", "modalix-bluebox", "lab-a-01", 1, console_tail=console)
    summary = summary_of(job)
    assert f"<details><summary>{SUMMARY}</summary>" in summary  # folded: the code failed, not the board
    fence = "`" * 7  # longer than the longest run inside (six)
    block = summary.split(f"{SUMMARY}</summary>\n\n", 1)[1]
    assert block.startswith(f"{fence}\n```\n</details>\n`````` @everyone\n")
    assert "x" * TAIL_LINE_CHARS + " [… line cut]\n" + fence + "\n\n</details>" in block
    assert fenced("no backticks") == "```\nno backticks\n```"


def test_a_job_that_passed_shows_no_console() -> None:
    passed = JobProgress("smoke", "succeeded", "modalix-bluebox", "lab-a-01", 0, console_tail="login: \r\n")
    body = progress_body("hil", CONTEXT, [passed], SessionState.COMPLETED, Conclusion.SUCCESS)
    assert "console" not in body.fields["output"]["summary"]
