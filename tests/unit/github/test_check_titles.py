"""Every check-run title says what happened in plain words: which jobs failed, passed or still run, counted
in whole words (`1 of 4 jobs failed`, never `job(s)` or `4 of 4 job(s) ended`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kerrigan.core.explain import explain
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.core.manifest import parse_manifest
from kerrigan.github.checks import JobProgress, SessionContext, progress_body, resolution_body, short_body

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def _jobs(*states: str) -> list[JobProgress]:
    return [JobProgress(f"task-{number}", state) for number, state in enumerate(states)]


@pytest.mark.parametrize(
    ("states", "conclusion", "title"),
    [
        (("succeeded", "failed", "succeeded", "succeeded"), Conclusion.FAILURE, "1 of 4 jobs failed"),
        (("failed", "failed"), Conclusion.FAILURE, "Both jobs failed"),
        (("failed",), Conclusion.FAILURE, "1 job failed"),
        (("succeeded", "succeeded", "succeeded"), Conclusion.SUCCESS, "All 3 jobs passed"),
        (("succeeded",), Conclusion.SUCCESS, "1 job passed"),
        (("failed", "timed_out", "succeeded"), Conclusion.FAILURE, "1 of 3 jobs failed, 1 timed out"),
        (("succeeded", "timed_out"), Conclusion.TIMED_OUT, "1 of 2 jobs timed out"),
        (("failed", "skipped", "skipped"), Conclusion.FAILURE, "1 of 3 jobs failed, 2 skipped"),
        (("refused_before_start", "succeeded"), Conclusion.FAILURE, "1 of 2 jobs did not start"),
        (("retried", "succeeded"), Conclusion.SUCCESS, "1 job passed"),  # a replaced attempt does not count
    ],
)
def test_a_completed_check_run_s_title_counts_what_went_wrong(
    states: tuple[str, ...], conclusion: Conclusion, title: str
) -> None:
    body = progress_body("hil", CONTEXT, _jobs(*states), SessionState.COMPLETED, conclusion)
    assert body.fields["output"]["title"] == title


@pytest.mark.parametrize(
    ("states", "title"),
    [
        (("running", "succeeded", "queued", "waiting"), "1 of 4 jobs running, 1 passed, 1 queued, 1 waiting"),
        (("running", "failed"), "1 of 2 jobs running, 1 failed"),
        (("succeeded", "accepted"), "1 of 2 jobs starting, 1 passed"),
        (("running",), "1 job running"),
    ],
)
def test_a_running_check_run_s_title_says_what_runs_and_what_ended(
    states: tuple[str, ...], title: str
) -> None:
    body = progress_body("hil", CONTEXT, _jobs(*states), SessionState.IN_PROGRESS, None)
    assert body.fields["output"]["title"] == title


@pytest.mark.parametrize(
    ("states", "title"),
    [(("queued",), "Queued: 1 job waits for a device"), (("queued",) * 3, "Queued: 3 jobs wait for devices")],
)
def test_a_queued_check_run_s_title_says_how_many_jobs_wait(states: tuple[str, ...], title: str) -> None:
    body = progress_body("hil", CONTEXT, _jobs(*states), SessionState.QUEUED, None)
    assert body.fields["output"]["title"] == title


def test_a_cancelled_check_run_names_who_and_what_ended() -> None:
    body = progress_body(
        "hil",
        CONTEXT,
        _jobs("succeeded", "cancelled", "cancelled"),
        SessionState.COMPLETED,
        Conclusion.CANCELLED,
        cancel_reason="cancelled by hubot",
    )
    assert body.fields["output"]["title"] == "Cancelled by hubot: 2 of 3 jobs cancelled"


def test_a_check_run_cancelled_before_any_job_says_none_ran() -> None:
    body = progress_body(
        "hil", CONTEXT, [], SessionState.COMPLETED, Conclusion.CANCELLED, cancel_reason="cancelled by hubot"
    )
    assert body.fields["output"]["title"] == "Cancelled by hubot: no job ran"


def test_a_short_report_of_a_running_session_says_running() -> None:
    body = short_body("hil", CONTEXT, SessionState.IN_PROGRESS, None, "too big")
    assert body.fields["output"]["title"] == "Running (short report: GitHub refused the full one)"


@pytest.mark.parametrize("state", list(SessionState))
@pytest.mark.parametrize("count", [1, 2])
def test_no_title_counts_in_job_s(state: SessionState, count: int) -> None:
    conclusion = Conclusion.FAILURE if state is SessionState.COMPLETED else None
    body = progress_body("hil", CONTEXT, _jobs(*["failed"] * count), state, conclusion)
    assert "(s)" not in body.fields["output"]["title"]


@pytest.mark.parametrize(
    ("manifest", "title"),
    [
        ("hil-smoke", "Queued: 2 tasks ready to start on free devices"),
        ("legacy", "Queued: 1 task ready to start on free devices"),
        ("waiting", "Queued: the task waits for busy or offline devices"),
        ("org-class", "No device can ever run regression"),
    ],
)
def test_a_resolution_s_title_says_whether_its_tasks_can_start(manifest: str, title: str) -> None:
    inventory = parse_inventory((FIXTURES / "inventory" / "lab.yml").read_text(encoding="utf-8"), "lab.yml")
    assert inventory.inventory is not None
    path = FIXTURES / "manifests" / f"{manifest}.yml"
    explanation = explain(parse_manifest(path.read_text(encoding="utf-8"), path.name), inventory.inventory)
    assert resolution_body(explanation, CONTEXT).fields["output"]["title"] == title
