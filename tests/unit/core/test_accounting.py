"""What a job used of its reservation, and the host's health report (seed 003's "Accounting" rules)."""

from __future__ import annotations

import json

import pytest

from kerrigan.core.accounting import FinishedJob, health_report, reservation_use

NOW = 1_000_000.0
HOUR = 60 * 60
DAY = 24 * HOUR


def finished(
    job_id: str = "1",
    *,
    repository: str = "octo/firmware",
    vcpus: int = 2,
    ended_s: float = NOW - 60,
    wall_s: float | None = 60.0,
    average_use_ppm: int | None = 500_000,
    reason: str | None = None,
) -> FinishedJob:
    return FinishedJob(job_id, repository, "build", vcpus, ended_s, wall_s, average_use_ppm, reason)


@pytest.mark.parametrize(
    ("cpu_s", "wall_s", "vcpus", "ppm"),
    [
        pytest.param(10.0, 10.0, 1, 1_000_000, id="one-busy-core-is-100%"),
        pytest.param(16.0, 2.0, 8, 1_000_000, id="eight-busy-cores-is-100%"),
        pytest.param(5.0, 10.0, 2, 250_000, id="a-quarter"),
        pytest.param(1.0, 3.0, 1, 333_333, id="rounded-to-the-millionth"),
        pytest.param(0.0, 10.0, 4, 0, id="idle"),
    ],
)
def test_reservation_use_reports_average_use_in_millionths(
    cpu_s: float, wall_s: float, vcpus: int, ppm: int
) -> None:
    assert reservation_use(cpu_s, wall_s, vcpus)["average_use_ppm"] == ppm


def test_reservation_use_carries_its_measurements_rounded_to_milliseconds() -> None:
    assert reservation_use(1.23456, 2.34567, 4) == {
        "cpu_s": 1.235,
        "wall_s": 2.346,
        "vcpus": 4,
        "average_use_ppm": 131_579,
    }


def test_long_eight_vcpu_job_under_one_core_is_persisted_and_reported() -> None:
    # An hour on 8 vCPUs using nine tenths of one core: 0.9 / 8 of the reservation.
    use = reservation_use(cpu_s=0.9 * HOUR, wall_s=HOUR, vcpus=8)
    assert use["average_use_ppm"] == 112_500
    stored = json.loads(json.dumps(use))  # as the job record and the finish report carry it
    job = FinishedJob(
        "7", "octo/firmware", "hil-smoke", 8, NOW - 60, stored["wall_s"], stored["average_use_ppm"]
    )
    report = health_report([job], NOW)
    assert report["underused_reservations"] == [
        {
            "job": "7",
            "repository": "octo/firmware",
            "task": "hil-smoke",
            "vcpus": 8,
            "wall_s": float(HOUR),
            "average_use_ppm": 112_500,
        }
    ]


@pytest.mark.parametrize(
    ("wall_s", "ppm", "listed"),
    [
        pytest.param(601.0, 249_999, True, id="over-ten-minutes-under-a-quarter"),
        pytest.param(600.0, 100_000, False, id="exactly-ten-minutes"),
        pytest.param(300.0, 10_000, False, id="short"),
        pytest.param(HOUR, 250_000, False, id="exactly-a-quarter"),
        pytest.param(HOUR, 900_000, False, id="busy"),
    ],
)
def test_underused_reservations_ran_over_ten_minutes_below_a_quarter(
    wall_s: float, ppm: int, listed: bool
) -> None:
    report = health_report([finished(wall_s=wall_s, average_use_ppm=ppm)], NOW)
    assert bool(report["underused_reservations"]) is listed


@pytest.mark.parametrize(
    ("wall_s", "ppm"),
    [pytest.param(None, None, id="no-accounting"), pytest.param(2 * HOUR, None, id="no-average")],
)
def test_blocked_or_invalid_accounting_never_delays_or_changes_terminal(
    wall_s: float | None, ppm: int | None
) -> None:
    job = finished(vcpus=8, wall_s=wall_s, average_use_ppm=ppm)
    report = health_report([job], NOW)
    # Still a finished job of its size ...
    [repository] = report["repositories"]
    assert repository["finished"] == 1
    assert repository["by_vcpus"] == {"8": 1}
    # ... but absent accounting is never read as zero use: it is not an underused reservation.
    assert report["underused_reservations"] == []
    assert job.average_use_ppm is None


def test_reserved_vcpu_seconds_count_only_jobs_with_a_wall_time() -> None:
    jobs = [finished("1", vcpus=4, wall_s=100.0), finished("2", vcpus=8, wall_s=None, average_use_ppm=None)]
    [repository] = health_report(jobs, NOW)["repositories"]
    assert repository["reserved_vcpu_s"] == 400.0
    assert repository["finished"] == 2


def test_health_totals_each_repository_over_the_last_24_hours_only() -> None:
    jobs = [
        finished("1", repository="octo/firmware", vcpus=2, wall_s=100.0, ended_s=NOW - 10),
        finished("2", repository="octo/firmware", vcpus=2, wall_s=50.0, ended_s=NOW - DAY + 1),
        finished("3", repository="octo/firmware", vcpus=8, wall_s=10.0, ended_s=NOW - HOUR),
        finished("4", repository="octo/firmware", vcpus=4, wall_s=9999.0, ended_s=NOW - DAY - 1),
        finished("5", repository="acme/bootloader", vcpus=1, wall_s=30.0, ended_s=NOW - HOUR),
        finished("6", repository="old/only", vcpus=1, wall_s=30.0, ended_s=NOW - 2 * DAY),
    ]
    report = health_report(jobs, NOW)
    assert report["repositories"] == [
        {
            "repository": "acme/bootloader",
            "reserved_vcpu_s": 30.0,
            "finished": 1,
            "by_vcpus": {"1": 1},
            "queue_wait_refusals": 0,
        },
        {
            "repository": "octo/firmware",
            "reserved_vcpu_s": 100.0 * 2 + 50.0 * 2 + 10.0 * 8,
            "finished": 3,
            "by_vcpus": {"2": 2, "8": 1},
            "queue_wait_refusals": 0,
        },
    ]


def test_underused_jobs_older_than_the_window_are_not_reported() -> None:
    old = finished(wall_s=HOUR, average_use_ppm=1_000, ended_s=NOW - DAY - 1)
    assert health_report([old], NOW)["underused_reservations"] == []


def test_queue_wait_exceeded_counts_as_a_refusal_not_a_finished_job() -> None:
    jobs = [
        finished("1", vcpus=4, wall_s=None, average_use_ppm=None, reason="queue_wait_exceeded"),
        finished("2", vcpus=2, wall_s=10.0),
    ]
    [repository] = health_report(jobs, NOW)["repositories"]
    assert repository["queue_wait_refusals"] == 1
    assert repository["finished"] == 1
    assert repository["by_vcpus"] == {"2": 1}
    assert repository["reserved_vcpu_s"] == 20.0


def test_admission_refusals_are_reported_as_given_in_name_order() -> None:
    report = health_report([], NOW, {"runner_full": 3, "runner_disk_full": 1})
    assert list(report["admission_refusals"].items()) == [("runner_disk_full", 1), ("runner_full", 3)]
    assert health_report([], NOW)["admission_refusals"] == {}
