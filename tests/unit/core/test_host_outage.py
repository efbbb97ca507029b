"""The words for an offline runner host and the jobs that may still run on it (issue 28)."""

from __future__ import annotations

from datetime import UTC, datetime

from kerrigan.core.host_outage import HostOutage, StrandedJob, stranded_text
from kerrigan.core.lifecycle import RUNNER_LOST, JobState

HEARD = datetime(2026, 12, 1, 10, 2, 5, tzinfo=UTC)
LOST = datetime(2026, 12, 1, 10, 3, 6, tzinfo=UTC)


def _job(state: JobState, *, ended_at: datetime | None = None, started: bool = True) -> StrandedJob:
    reason = RUNNER_LOST if ended_at is not None else None
    return StrandedJob(42, "s", "octo/firmware", "flash", state, reason, ended_at, ("rig-dev",), started)


def test_an_offline_host_says_since_its_last_heartbeat_or_that_its_agent_never_spoke() -> None:
    assert (
        str(HostOutage("rig-01", HEARD))
        == "runner host rig-01 offline since 2026-12-01 10:02 (its last heartbeat)"
    )
    assert str(HostOutage("rig-02", None)) == "runner host rig-02 offline: its agent has never spoken"


def test_a_job_lost_with_its_host_is_named_ended_and_perhaps_still_running() -> None:
    assert stranded_text(_job(JobState.FAILED, ended_at=LOST), "octo/firmware flash") == (
        "job 42 (octo/firmware flash) was running here when its host went silent; ended runner_lost at "
        "2026-12-01 10:03; it may still be running on the host until its agent restarts"
    )
    assert stranded_text(_job(JobState.RUNNING), "octo/firmware flash") == (
        "job 42 (octo/firmware flash) was running here when its host went silent; not ended yet (it ends "
        "runner_lost when its lease runs out); it may still be running on the host until its agent restarts"
    )


def test_what_the_job_was_doing_there() -> None:
    assert _job(JobState.ACCEPTED, started=False).held_words == "accepted"
    assert _job(JobState.FAILED, ended_at=LOST, started=False).held_words == "leased"
    assert _job(JobState.RETRIED, ended_at=LOST).held_words == "running"


def test_a_device_sees_only_the_jobs_that_held_it() -> None:
    job = _job(JobState.RUNNING)
    outage = HostOutage("rig-01", HEARD, (job,))
    assert outage.on("rig-dev").jobs == (job,)
    assert outage.on("other").jobs == ()
