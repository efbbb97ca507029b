"""Time finding suspect devices (:mod:`kerrigan.core.flaky`) over a week of job history.

A synthetic lab of 10,000 devices in 50 pools of 50 to 350 devices, 4 tasks per pool (200 tasks), and
1,000,000 job records over 7 days, each task failing at its own rate of 1 to 8 % (``--quick``: 1,000 devices,
20 tasks, 100,000 records). A few devices, seeded, are planted flaky: they fail every task of their pool
half the time. Measured:

- the full computation: every record counted into :class:`~kerrigan.core.flaky.FailureStats`, then the
  first list of suspects (each figure on its own, and the two together); and the same from the counts per
  task, device and day (``FailureStats.add``), as a server starting up would read them from its database;
- an incremental update: one more job recorded and the new list of suspects, over 200 such updates (jobs
  drawn as the history's are), median and p95, and the same for jobs of the largest task only (its p-values
  are the most to recompute); and the day's rollover (a day expired, every task recomputed);
- the baseline, in the same run: the list recomputed naively from the raw records (filter the window, count
  per device and task, test every pair, correct), which is what each job would cost without the kept counts.

The naive list must equal the incremental one; the planted devices must be among the suspects.

Targets (issue 13): over 1,000,000 records, the full computation at most 2 s and an incremental update at
most 5 ms, on a 2-core machine.

    python benchmarks/bench_suspects.py
    python benchmarks/bench_suspects.py --quick
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from kerrigan.core.flaky import (
    FALSE_DISCOVERY_RATE,
    MIN_RUNS,
    WINDOW_DAYS,
    FailureStats,
    Suspect,
    benjamini_hochberg,
    hypergeometric_tail,
)

FULL_TARGET_S = 2.0
UPDATE_TARGET_MS = 5.0
TODAY = 20_788  # 2026-12-01 as days since the epoch
TASKS_PER_POOL = 4
FLAKY_FAILURE_RATE = 0.5

Record = tuple[str, str, int, bool]  # task, device, day, failed


@dataclass(frozen=True)
class Lab:
    """The synthetic lab: which devices run each task, how often it fails, and the planted flaky devices."""

    task_devices: dict[str, list[str]]
    task_failure_rate: dict[str, float]
    flaky: frozenset[str]


def synthetic_lab(devices: int, pools: int, flaky: int, rng: random.Random) -> Lab:
    """``devices`` devices in ``pools`` pools of uneven size, 4 tasks a pool, ``flaky`` planted flaky."""
    weights = [rng.uniform(50, 350) for _ in range(pools)]
    sizes = [round(devices * weight / sum(weights)) for weight in weights]
    sizes[-1] += devices - sum(sizes)  # rounding's remainder, so the lab has exactly ``devices``
    task_devices: dict[str, list[str]] = {}
    task_failure_rate: dict[str, float] = {}
    every_device: list[str] = []
    for pool, size in enumerate(sizes):
        members = [f"board{pool:02d}-{index:04d}" for index in range(size)]
        every_device += members
        for workflow in range(TASKS_PER_POOL):
            task = f"org{pool:02d}/firmware:hil-{workflow}.yml:boot"
            task_devices[task] = members
            task_failure_rate[task] = rng.uniform(0.01, 0.08)
    return Lab(task_devices, task_failure_rate, frozenset(rng.sample(every_device, flaky)))


def draw_job(lab: Lab, tasks: list[str], weights: list[int], day: int, rng: random.Random) -> Record:
    """One job: a task chosen in proportion to its pool's size, a device of that pool, pass or fail."""
    task = rng.choices(tasks, weights)[0]
    device = rng.choice(lab.task_devices[task])
    rate = FLAKY_FAILURE_RATE if device in lab.flaky else lab.task_failure_rate[task]
    return task, device, day, rng.random() < rate


def history(lab: Lab, records: int, rng: random.Random) -> list[Record]:
    """``records`` jobs spread over the 7 days up to ``TODAY``."""
    tasks = list(lab.task_devices)
    weights = [len(lab.task_devices[task]) for task in tasks]
    return [draw_job(lab, tasks, weights, TODAY - rng.randrange(WINDOW_DAYS), rng) for _ in range(records)]


def naive_suspects(records: list[Record], today: int) -> set[tuple[str, str]]:
    """The baseline: (device, task) of every suspect, recomputed from the raw records alone."""
    counts: dict[str, dict[str, list[int]]] = {}
    for task, device, day, failed in records:
        if today - WINDOW_DAYS < day <= today:
            cell = counts.setdefault(task, {}).setdefault(device, [0, 0])
            cell[0] += 1
            cell[1] += failed
    pairs: list[tuple[str, str]] = []
    p_values: list[float] = []
    for task, devices in counts.items():
        runs_total = sum(runs for runs, _ in devices.values())
        failures_total = sum(failures for _, failures in devices.values())
        for device, (runs, failures) in devices.items():
            if runs >= MIN_RUNS and runs < runs_total:
                pairs.append((device, task))
                p_values.append(hypergeometric_tail(failures, runs_total, failures_total, runs))
    adjusted = benjamini_hochberg(p_values)
    return {pair for pair, q_value in zip(pairs, adjusted, strict=True) if q_value < FALSE_DISCOVERY_RATE}


def seconds(work: Callable[[], object]) -> float:
    """Wall time of one call of ``work``."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def cpu_seconds(work: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU time of one call of ``work``: on a busy machine the second says what the code costs."""
    started, cpu_started = time.perf_counter(), time.thread_time()
    work()
    return time.perf_counter() - started, time.thread_time() - cpu_started


def update_times_ms(stats: FailureStats, jobs: list[Record]) -> list[float]:
    """Each job recorded, then the new suspects: the time of each, in milliseconds."""
    times = []
    for task, device, day, failed in jobs:
        started = time.perf_counter()
        stats.record(task, device, day, failed=failed)
        stats.suspects(day)
        times.append((time.perf_counter() - started) * 1000)
    return times


def p95(values: list[float]) -> float:
    """The 95th percentile."""
    return statistics.quantiles(values, n=20)[-1]


def full_computation(jobs: list[Record]) -> tuple[FailureStats, dict[str, float]]:
    """Every job recorded, then the first suspects; and the same from counts per task, device and day."""
    stats = FailureStats()

    def record_all() -> None:
        for task, device, day, failed in jobs:
            stats.record(task, device, day, failed=failed)

    first: list[Suspect] = []
    record_s, record_cpu_s = cpu_seconds(record_all)
    first_s, first_cpu_s = cpu_seconds(lambda: first.extend(stats.suspects(TODAY)))
    counts: dict[tuple[str, str, int], list[int]] = {}  # what a GROUP BY would hand over: not timed
    for task, device, day, failed in jobs:
        cell = counts.setdefault((task, device, day), [0, 0])
        cell[0] += 1
        cell[1] += failed
    counted = FailureStats()

    def add_all() -> None:
        for (task, device, day), (runs, failures) in counts.items():
            counted.add(task, device, day, runs, failures)

    add_s, add_cpu_s = cpu_seconds(add_all)
    counted_first_s, counted_first_cpu_s = cpu_seconds(lambda: counted.suspects(TODAY))
    figures = {
        "record_s": record_s,
        "first_s": first_s,
        "full_s": record_s + first_s,
        "full_cpu_s": record_cpu_s + first_cpu_s,
        "counted_s": add_s + counted_first_s,
        "counted_cpu_s": add_cpu_s + counted_first_cpu_s,
    }
    figures["counts"] = len(counts)
    figures["same_suspects"] = float(counted.suspects(TODAY) == first)
    return stats, figures


def main() -> None:
    """Run the benchmark and print the figures and whether each target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 devices, 20 tasks, 100,000 records")
    args = parser.parse_args()
    devices, pools, records, flaky, updates = (
        (1_000, 5, 100_000, 3, 50) if args.quick else (10_000, 50, 1_000_000, 8, 200)
    )
    rng = random.Random(13)
    lab = synthetic_lab(devices, pools, flaky, rng)
    jobs = history(lab, records, rng)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    print(
        f"{sum(len(members) for members in lab.task_devices.values()) // TASKS_PER_POOL:,} devices, "
        f"{len(lab.task_devices)} tasks, {len(jobs):,} records over {WINDOW_DAYS} days, "
        f"{len(lab.flaky)} planted flaky devices"
    )
    stats, full = full_computation(jobs)
    print(
        f"record {len(jobs):,} jobs: {full['record_s']:.2f} s; first suspects: {full['first_s']:.2f} s; "
        f"full: {full['full_s']:.2f} s (CPU {full['full_cpu_s']:.2f} s)"
    )
    print(
        f"full, from {full['counts']:,.0f} counts per task, device and day: {full['counted_s']:.2f} s "
        f"(CPU {full['counted_cpu_s']:.2f} s; same suspects: {'yes' if full['same_suspects'] else 'NO'})"
    )
    naive_s = seconds(lambda: naive_suspects(jobs, TODAY))
    print(f"baseline, naive recomputation from the raw records: {naive_s * 1000:.0f} ms")

    tasks = list(lab.task_devices)
    weights = [len(lab.task_devices[task]) for task in tasks]
    drawn = [draw_job(lab, tasks, weights, TODAY, rng) for _ in range(updates)]
    typical = update_times_ms(stats, drawn)
    largest = max(tasks, key=lambda task: len(lab.task_devices[task]))
    widest = [draw_job(lab, [largest], [1], TODAY, rng) for _ in range(updates)]
    worst = update_times_ms(stats, widest)
    jobs += drawn + widest
    median = statistics.median(typical)
    print(
        f"incremental update (record + suspects), {updates} jobs: median {median:.2f} ms, "
        f"p95 {p95(typical):.2f} ms ({naive_s * 1000 / median:,.0f}x faster than the baseline)"
    )
    print(
        f"  jobs of the largest task ({len(lab.task_devices[largest])} devices): "
        f"median {statistics.median(worst):.2f} ms, p95 {p95(worst):.2f} ms"
    )

    after = stats.suspects(TODAY)
    agrees = {(suspect.device, suspect.task) for suspect in after} == naive_suspects(jobs, TODAY)
    print(f"incremental suspects equal the naive recomputation's: {'yes' if agrees else 'NO'}")
    rollover_s = seconds(lambda: stats.suspects(TODAY + 1))
    print(f"day rollover (one day expired, every task recomputed): {rollover_s * 1000:.0f} ms")
    suspect_devices = {suspect.device for suspect in after}
    print(
        f"suspects: {len(after)} pairs on {len(suspect_devices)} devices; planted flaky among them: "
        f"{len(lab.flaky & suspect_devices)} of {len(lab.flaky)}; others: {len(suspect_devices - lab.flaky)}"
    )
    if after:
        print(f"  e.g. {after[0].sentence()} (p={after[0].p_value:.2g}, adjusted {after[0].adjusted:.2g})")
    if not args.quick:
        checks = {
            f"full computation <= {FULL_TARGET_S:.0f} s (a record per job)": full["full_s"] <= FULL_TARGET_S,
            f"full computation <= {FULL_TARGET_S:.0f} s (from per-day counts)": (
                full["counted_s"] <= FULL_TARGET_S
            ),
            f"incremental update <= {UPDATE_TARGET_MS:.0f} ms (median)": median <= UPDATE_TARGET_MS,
            f"incremental update <= {UPDATE_TARGET_MS:.0f} ms (p95)": p95(typical) <= UPDATE_TARGET_MS,
        }
        for name, met in checks.items():
            print(f"{'met    ' if met else 'NOT met'} {name}")


if __name__ == "__main__":
    main()
