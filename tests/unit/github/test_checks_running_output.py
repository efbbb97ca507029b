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
    assert body.fields["output"]["title"] == "Running: 0 of 1 job(s) ended"
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
