"""What a job used of what it reserved, and the runner host's health report built from its job records.

A job's ``reservation_use`` is its CPU time (the rusage of its whole process tree) against its wall time
times its vCPU claim; ``average_use_ppm`` is that share in millionths (1,000,000 is 100%). Accounting that
could not be read is absent, never zero. The health report covers the retained jobs of the last 24 hours:
jobs that ran over ten minutes using under a quarter of their reservation, and per repository the reserved
vCPU-seconds, the number of finished jobs, jobs by claim size and queue-wait refusals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

PPM: Final = 1_000_000
UNDERUSE_MIN_WALL_S: Final = 10 * 60
UNDERUSE_BELOW_PPM: Final = 250_000
WINDOW_S: Final = 24 * 60 * 60


def reservation_use(cpu_s: float, wall_s: float, vcpus: int) -> dict[str, Any]:
    """The accounting a finished job reports; without a reservation to divide by, no average (absent,
    not zero)."""
    use: dict[str, Any] = {"cpu_s": round(cpu_s, 3), "wall_s": round(wall_s, 3), "vcpus": vcpus}
    reserved = wall_s * vcpus
    if reserved > 0:
        use["average_use_ppm"] = round(cpu_s / reserved * PPM)
    return use


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """A retained job record, as the health report needs it."""

    job_id: str
    repository: str
    task_id: str
    vcpus: int
    ended_s: float
    wall_s: float | None
    average_use_ppm: int | None  # None when its accounting is missing
    reason: str | None = None


def _repository_group(repository: str) -> dict[str, Any]:
    return {
        "repository": repository,
        "reserved_vcpu_s": 0.0,
        "finished": 0,
        "by_vcpus": {},
        "queue_wait_refusals": 0,
    }


def health_report(
    jobs: Iterable[FinishedJob], now_s: float, admission_refusals: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The host's health: underused reservations and per-repository use over the last 24 hours."""
    underused = []
    repositories: dict[str, dict[str, Any]] = {}
    for job in jobs:
        if now_s - job.ended_s > WINDOW_S:
            continue
        group = repositories.setdefault(job.repository, _repository_group(job.repository))
        if job.reason == "queue_wait_exceeded":
            group["queue_wait_refusals"] += 1
            continue
        group["finished"] += 1
        size = str(job.vcpus)
        group["by_vcpus"][size] = group["by_vcpus"].get(size, 0) + 1
        if job.wall_s is not None:
            group["reserved_vcpu_s"] = round(group["reserved_vcpu_s"] + job.wall_s * job.vcpus, 3)
        if (
            job.wall_s is not None
            and job.average_use_ppm is not None
            and job.wall_s > UNDERUSE_MIN_WALL_S
            and job.average_use_ppm < UNDERUSE_BELOW_PPM
        ):
            underused.append(
                {
                    "job": job.job_id,
                    "repository": job.repository,
                    "task": job.task_id,
                    "vcpus": job.vcpus,
                    "wall_s": job.wall_s,
                    "average_use_ppm": job.average_use_ppm,
                }
            )
    return {
        "underused_reservations": underused,
        "repositories": [repositories[name] for name in sorted(repositories)],
        "admission_refusals": dict(sorted((admission_refusals or {}).items())),
    }
