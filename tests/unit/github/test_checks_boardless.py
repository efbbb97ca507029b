"""The check run of a session with a job that holds no device (``board: none``): its row says no board on
its runner host, and a retry of it names the hosts, not a device."""

from __future__ import annotations

from datetime import UTC, datetime

from kerrigan.core.lifecycle import Conclusion, RetryPolicy, SessionState
from kerrigan.github.checks import SessionContext, progress_body
from kerrigan.github.projection import progress_of
from kerrigan.store.check_runs import JobView, Projection
from kerrigan.store.jobs import JobRecord
from kerrigan.testing import builders

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CONTEXT = SessionContext("1111-2222", "http://kerrigan/sessions/1111-2222", "a" * 40, "push")


def test_a_retried_boardless_job_is_shown_on_its_hosts_with_no_board() -> None:
    lost = JobRecord(1, "build", "retried", None, "lab-a-01", None, "runner_lost", AT, AT, boardless=True)
    second = JobRecord(
        2, "build", "succeeded", None, "lab-a-02", 0, None, AT, AT, attempt=2, retry_of=1, boardless=True
    )
    test = JobRecord(3, "test", "succeeded", "modalix-bluebox", "lab-a-01", 0, None, AT, AT)
    session = builders.session("1111-2222", ["build", "test"], retry=RetryPolicy(infrastructure=2))
    view = Projection(session, tuple(JobView(record, "") for record in (lost, second, test)), None, None)
    jobs = progress_of(view)
    summary = progress_body("hil", CONTEXT, jobs, SessionState.COMPLETED, Conclusion.SUCCESS).fields[
        "output"
    ]["summary"]
    attempt = "attempt 2 of 3 on lab-a-02 after runner_lost on lab-a-01"
    assert f"| `build` | succeeded, {attempt} | no board | `lab-a-02` |" in summary
    assert "| `test` | succeeded | `modalix-bluebox` | `lab-a-01` |" in summary
    assert "- `build`: attempt 1 of 3 on lab-a-01: retried (runner_lost)" in summary
