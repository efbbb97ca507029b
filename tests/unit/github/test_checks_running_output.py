"""A running job's latest lines on its check run: unfolded, its last 20 lines, each line bounded, and many
running jobs' lines within GitHub's summary limit."""

from __future__ import annotations

from kerrigan.core.lifecycle import SessionState
from kerrigan.github.checks import (
    SUMMARY_LIMIT,
    TAIL_LINE_CHARS,
    TAIL_LINES,
    JobProgress,
    SessionContext,
    progress_body,
)

CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def test_a_running_job_shows_its_last_lines_unfolded_each_line_bounded() -> None:
    output = "".join(f"line {n}\n" for n in range(40)) + "x" * 5000 + "\n" + "```\n"
    running = JobProgress("smoke", "running", "modalix-bluebox", "lab-a-01", output_tail=output)
    body = progress_body("hil", CONTEXT, [running], SessionState.IN_PROGRESS, None)
    summary = body.fields["output"]["summary"]
    assert body.fields["output"]["title"] == "1 job running"
    assert "<details open><summary>smoke: latest lines of output, while it runs</summary>" in summary
    tail = summary.split("```\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert len(tail) == TAIL_LINES
    assert tail[0] == "line 22"
    assert tail[-2] == "x" * TAIL_LINE_CHARS + " [… line cut]"
    assert tail[-1] == "'''"  # a fence in the output cannot close the block


def test_many_running_jobs_with_long_lines_stay_within_githubs_summary_limit() -> None:
    long_lines = ("y" * 100_000 + "\n") * 30
    jobs = [JobProgress(f"task-{n}", "running", output_tail=long_lines) for n in range(10)]
    summary = progress_body("hil", CONTEXT, jobs, SessionState.IN_PROGRESS, None).fields["output"]["summary"]
    assert len(summary) <= SUMMARY_LIMIT
    assert "task-0: latest lines of output, while it runs" in summary
    assert "task-2: latest lines of output, while it runs" in summary  # each line cut: more jobs fit


def test_a_session_of_hundreds_of_jobs_is_cut_at_whole_jobs_with_every_block_closed() -> None:
    output = "".join(f"step {n}: {'z' * 200}\n" for n in range(30))
    jobs = [
        JobProgress(
            f"soak-{n:03}",
            "failed",
            f"modalix-{n:03}",
            "lab-a-01",
            1,
            "device_fault",
            detail="d" * 150,
            output_tail=output,
        )
        for n in range(600)
    ]
    summary = progress_body("hil", CONTEXT, jobs, SessionState.IN_PROGRESS, None).fields["output"]["summary"]
    assert len(summary.encode()) <= SUMMARY_LIMIT
    assert summary.count("<details") == summary.count("</details>")
    assert summary.count("```") % 2 == 0
    rows = [line for line in summary.splitlines() if line.startswith("| `soak-")]
    assert 0 < len(rows) < 600
    assert f"\n{600 - len(rows)} more jobs on the session page.\n" in summary
    shown = summary.count("<details")
    assert f"The output of {600 - shown} more job(s) on the session page (this summary is full)." in summary
    # The reason is said once, whole, though its jobs did not all fit.
    assert summary.count("- `device_fault`: its command reported a device fault") == 1


def test_a_summary_that_fits_says_nothing_was_left_out() -> None:
    jobs = [
        JobProgress(f"smoke-{n}", "succeeded", f"modalix-{n}", "lab-a-01", 0, output_tail="ok\n")
        for n in range(5)
    ]
    summary = progress_body("hil", CONTEXT, jobs, SessionState.IN_PROGRESS, None).fields["output"]["summary"]
    assert "more jobs on the session page" not in summary
    assert "this summary is full" not in summary
    assert summary.count("<details>") == 5
