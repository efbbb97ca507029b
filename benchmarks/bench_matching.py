"""Time resolving one task with full diagnostics against synthetic labs of 10,000 and 100,000 devices.

Each figure is set beside a baseline measured in the same run: a loop that only reads every device's
effective labels once. Targets (docs/performance.md): 10k devices <= 25 ms median and within 10x the
baseline; 100k within 10x the 10k time.

    python benchmarks/bench_matching.py           # full run
    python benchmarks/bench_matching.py --quick   # small sizes, to keep the script working in CI
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from kerrigan.core.inventory import Inventory
from kerrigan.core.matching import resolve
from kerrigan.core.requirements import LabelRequirement, Requirements, TagRequirement
from kerrigan.testing.labs import synthetic_lab

REQUEST = Requirements(
    labels={
        "sdk": LabelRequirement("sdk", ("2.2.0",)),
        "form_factor": LabelRequirement("form_factor", ("som",)),
        "kerrigan.firmware_channel": LabelRequirement("kerrigan.firmware_channel", ("ga",)),
    },
    tags=(TagRequirement("uart-debug"),),
)
UNMATCHABLE = Requirements(
    labels={"form-factor": LabelRequirement("form-factor", ("som",))},
    tags=(TagRequirement("uart-debgu"),),
)


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``fn`` in milliseconds over ``repeat`` runs (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def baseline(inventory: Inventory) -> int:
    """Read every device's labels (its own and its pool's) once: the floor any matcher sits on."""
    pool_labels = {pool.id: pool.labels for pool in inventory.pools}
    seen = 0
    for device in inventory.devices:
        for _value in device.labels.values():
            seen += 1
        for _value in pool_labels[device.pool_id].values():
            seen += 1
    return seen


def measure(pools: int, per_pool: int, repeat: int) -> dict[str, float]:
    """Figures for one lab size."""
    lab = synthetic_lab(pools, per_pool)
    start = time.perf_counter()
    lab.index  # noqa: B018 -- build the per-snapshot index once, as every resolution shares it
    index_ms = (time.perf_counter() - start) * 1000
    figures = {
        "devices": float(len(lab.devices)),
        "index_ms": index_ms,
        "baseline_ms": median_ms(lambda: baseline(lab), repeat),
        "resolve_ms": median_ms(lambda: resolve(REQUEST, lab), repeat),
        "unmatchable_ms": median_ms(lambda: resolve(UNMATCHABLE, lab), repeat),
    }
    result = resolve(REQUEST, lab)
    figures["eligible"] = float(len(result.eligible))
    return figures


def main() -> None:
    """Run the benchmark and print the figures and whether each target is met."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    args = parser.parse_args()
    small, large, repeat = ((20, 50), (200, 50), 3) if args.quick else ((200, 50), (2000, 50), 21)

    ten_k = measure(*small, repeat)
    hundred_k = measure(*large, max(3, repeat // 4))
    print(
        f"{'devices':>8} {'index ms':>9} {'baseline ms':>12} {'resolve ms':>11} "
        f"{'x baseline':>11} {'unmatchable ms':>15} {'eligible':>9}"
    )
    for row in (ten_k, hundred_k):
        print(
            f"{row['devices']:>8.0f} {row['index_ms']:>9.1f} {row['baseline_ms']:>12.2f} "
            f"{row['resolve_ms']:>11.2f} {row['resolve_ms'] / row['baseline_ms']:>11.1f} "
            f"{row['unmatchable_ms']:>15.2f} {row['eligible']:>9.0f}"
        )
    growth = hundred_k["resolve_ms"] / ten_k["resolve_ms"]
    size_growth = hundred_k["devices"] / ten_k["devices"]
    print(
        f"growth from {ten_k['devices']:.0f} to {hundred_k['devices']:.0f} devices: {growth:.1f}x "
        f"(linear would be {size_growth:.0f}x)"
    )
    if not args.quick:
        checks = {
            "10k resolve <= 25 ms median": ten_k["resolve_ms"] <= 25,
            "10k resolve within 10x baseline": ten_k["resolve_ms"] <= 10 * ten_k["baseline_ms"],
            "100k within 10x the 10k time": hundred_k["resolve_ms"] <= 10 * ten_k["resolve_ms"],
        }
        for name, met in checks.items():
            print(f"{'met ' if met else 'MISSED'} {name}")


if __name__ == "__main__":
    main()
