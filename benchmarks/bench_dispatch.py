"""Time one dispatch decision: 10,000 queued jobs over 50 repositories competing for 2,000 devices.

The decision is :func:`kerrigan.core.dispatch_order.plan_dispatch` (the pure part of a dispatch round).
Baseline in the same run: sorting the 10,000 jobs once by arrival, the least any ordering costs.
Target (issue 5): at most 20 ms per dispatch decision. The database side (end-to-end jobs per second on
SQLite and PostgreSQL) is not measured yet.

    python benchmarks/bench_dispatch.py
    python benchmarks/bench_dispatch.py --quick
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from kerrigan.core.dispatch_order import QueuedJob, plan_dispatch
from kerrigan.core.manifest import Priority


def queue(jobs: int, repositories: int, devices: int, *, seed: int = 3) -> tuple[list[QueuedJob], list[str]]:
    """A busy lab: each job may use one of 8 devices of its board family, most devices are busy."""
    rng = random.Random(seed)
    names = [f"dev-{n:05d}" for n in range(devices)]
    families = [names[start : start + 8] for start in range(0, devices, 8)]
    built = [
        QueuedJob(
            id=f"job-{n:06d}",
            repository=f"octo/repo-{rng.randrange(repositories):02d}",
            session_id=f"s-{n // 3:06d}",
            priority=rng.choice([Priority.NORMAL] * 8 + [Priority.GATE, Priority.BACKGROUND]),
            ready_at=rng.uniform(0, 600),
            candidates=tuple(rng.choice(families)),
            vcpus=rng.choice([1, 2, 2, 4]),
        )
        for n in range(jobs)
    ]
    return built, names


def _arrival(job: QueuedJob) -> float:
    return job.ready_at


def median_ms(work: Callable[[], object], repeat: int) -> float:
    """Median wall time after one warm-up."""
    work()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, few repeats")
    args = parser.parse_args()
    jobs_count, repeat = (1_000, 3) if args.quick else (10_000, 5)
    jobs, devices = queue(jobs_count, 50, 2_000)
    rng = random.Random(5)
    for free_count in (20, 200):
        free = set(rng.sample(devices, free_count))
        room = {job.session_id: 2 for job in jobs}

        def decide(free: set[str] = free, room: dict[str, int] = room) -> object:
            return plan_dispatch(jobs, now=700.0, free_devices=free, session_room=room, last_dispatch={})

        plan = plan_dispatch(jobs, now=700.0, free_devices=free, session_room=room, last_dispatch={})
        baseline = median_ms(lambda: sorted(jobs, key=_arrival), repeat)
        decision = median_ms(decide, repeat)
        print(
            f"{len(jobs)} jobs, {free_count} free devices: decision {decision:.1f} ms "
            f"(baseline sort {baseline:.1f} ms), {len(plan.assignments)} dispatched"
        )
        if not args.quick:
            print(f"{'met ' if decision <= 20 else 'MISSED'} a dispatch decision in at most 20 ms")


if __name__ == "__main__":
    main()
