"""Issue 28, DESIGN.md "A lab problem is not a code failure": the check run of a session the lab failed
ends with the lab's conclusion, its title begins ``Lab problem:``, and its summary keeps every reason it
waited or failed, in the diagnostics' words, naming each attempt and its board."""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import LAB_CONCLUSIONS, Conclusion, SessionState
from kerrigan.github.checks import JobProgress, SessionContext, progress_body, short_body

CONTEXT = SessionContext("2828-2828", "http://kerrigan/sessions/2828-2828", "a" * 40, "push")
WAITED = (
    "waited 301 s: modalix-bluebox device in maintenance since 2026-12-01 09:12 by hubot: reflashing; "
    "modalix-redbox runner host lab-a-02 offline"
)
OUT_OF_BUDGET = JobProgress("smoke", "refused_before_start", reason="queue_wait_exceeded", detail=WAITED)
FAULTS = [
    JobProgress(
        "flash",
        "retried" if attempt < 3 else "failed",
        device,
        host,
        75,
        "device_fault",
        attempt=attempt,
        attempts=3,
        after=f"device_fault on {before}" if before else None,
    )
    for attempt, device, host, before in (
        (1, "board-a", "rig-01", None),
        (2, "board-b", "rig-02", "board-a"),
        (3, "board-c", "rig-03", "board-b"),
    )
]


@pytest.mark.parametrize("lab", LAB_CONCLUSIONS)
def test_a_job_out_of_queue_wait_is_a_lab_problem_with_every_reason_it_waited(lab: Conclusion) -> None:
    body = progress_body("hil", CONTEXT, [OUT_OF_BUDGET], SessionState.COMPLETED, lab)
    assert body.conclusion == lab.value
    output = body.fields["output"]
    assert output["title"] == "Lab problem: 1 job did not start (queue_wait_exceeded)"
    summary = output["summary"]
    assert f"- `smoke`: its queue-wait budget ran out before it started: {WAITED}" in summary
    assert "modalix-bluebox device in maintenance since 2026-12-01 09:12 by hubot: reflashing" in summary
    assert f"It ends `{lab.value}`" in summary


def test_every_attempt_of_a_device_fault_is_named_with_its_board() -> None:
    body = progress_body("hil", CONTEXT, FAULTS, SessionState.COMPLETED, Conclusion.ACTION_REQUIRED)
    output = body.fields["output"]
    assert output["title"] == "Lab problem: 1 job failed (device_fault)"
    summary = output["summary"]
    assert (
        "- `flash`: its command reported a device fault (exit status 75); "
        "attempt 1 on board-a, attempt 2 on board-b, attempt 3 on board-c" in summary
    )
    assert (
        "- `flash`: attempt 2 of 3 on board-b after device_fault on board-a: retried (device_fault)"
        in summary
    )


def test_a_code_failure_is_no_lab_problem() -> None:
    failed = JobProgress("smoke", "failed", "board-a", "rig-01", 1)
    body = progress_body("hil", CONTEXT, [failed], SessionState.COMPLETED, Conclusion.FAILURE)
    assert body.fields["output"]["title"] == "1 job failed"
    assert "Lab problem" not in body.fields["output"]["summary"]


def test_the_short_body_keeps_the_labs_conclusion() -> None:
    body = short_body("hil", CONTEXT, SessionState.COMPLETED, Conclusion.NEUTRAL, "too large")
    assert body.conclusion == "neutral"
    assert body.fields["output"]["title"].startswith("Lab problem")


HOSTILE_NOTE = (
    "<details><summary>x</summary> ![](https://evil.example/p.png) [docs](https://evil.example/) "
    "@octo-org/firmware-team #1 `tick *bold* ~~gone~~ back\\slash\rline | cell"
)


def test_a_note_a_person_typed_is_words_in_the_summary_not_markdown_html_or_a_mention() -> None:
    """A reservation note reaches the check run of every repository whose job waited on its board: what it
    says is shown, not read as a tag, an image, a link, a mention, a reference, a code span or a new line."""
    waited = f"waited 301 s: board-a device reserved by mallory until 2026-12-01 12:30: {HOSTILE_NOTE}"
    job = JobProgress("smoke", "refused_before_start", reason="queue_wait_exceeded", detail=waited)
    summary = progress_body("hil", CONTEXT, [job], SessionState.COMPLETED, Conclusion.ACTION_REQUIRED).fields[
        "output"
    ]["summary"]
    for line in summary.splitlines():
        if "mallory" in line:
            assert "<details" not in line
            assert "<img" not in line
            assert "](" not in line  # no link or image: the bracket's parenthesis is escaped
            assert "@octo-org" not in line
            assert "#1" not in line
            assert "\r" not in line
    assert "&lt;details>&lt;summary>x&lt;/summary> ![]\\(https://evil.example/p.png)" in summary
    assert "[docs]\\(https://evil.example/)" in summary
    assert "\\`tick \\*bold\\* \\~\\~gone\\~\\~ back\\\\slash line \\| cell" in summary
    assert "by mallory until 2026-12-01 12:30" in summary  # the words themselves are all there
