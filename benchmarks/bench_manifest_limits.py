"""``/readyz`` while a push of three large manifests is read, on SQLite, both processes on loopback.

A push whose commit holds three manifests (the GitHub stand-in serves them), and meanwhile ``GET /readyz``
one after another: its p50/p99/max latency from the push until the delivery is processed, beside a
baseline of ``/readyz`` with nothing to do. Two shapes of manifest:

- *3 x 2.5 MiB*: over the limit of a manifest (256 KiB). Before the limits, each was downloaded and parsed
  on the event loop (about 4 s each on this machine), and ``/readyz`` waited for all of it; now each is
  refused from the folder's listing, unread.
- *3 x 256 KiB*: as large as a manifest may be, 256 tasks written out at length: parsed and resolved (in a
  thread now), against a lab of 1,000 devices.

A ``/readyz`` answered otherwise than 200 (the server's own 2 s timeout on the database) is counted
under *not 200*. Figures only, no target. To compare with the code before the limits, run the same script with
``PYTHONPATH`` pointing at that code's ``src`` (the server inherits it).

    python benchmarks/bench_manifest_limits.py            # 3 pushes a shape
    python benchmarks/bench_manifest_limits.py --quick    # 1 push a shape
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.testing.github import signed_headers
from kerrigan.testing.labs import synthetic_lab
from kerrigan.testing.processes import serve_with_github

SECRET = "bench-secret"  # noqa: S105 -- the benchmark's own throwaway webhook secret
REPO = "octo/bench"
KIB = 1024
TASKS = 256  # the most a manifest may have
SHAPES = {
    "3 x 2.5 MiB (over the limit)": int(2.5 * KIB * KIB),
    "3 x 256 KiB (the largest allowed)": 256 * KIB,
}


def large_manifest(name: str, size: int) -> str:
    """A manifest of ``size`` bytes, to the byte: 256 tasks written out at length, each with requirements
    and an ``env`` (one a few KiB long is valid), then a comment for what is left."""
    head = (
        f"name: {name}\non: {{push: {{branches: [main]}}}}\nscheduling: {{labels: {{sdk: '2.2.0'}}}}\n"
        "tasks:\n"
    )
    per_task = max(200, (size - len(head)) // TASKS - 8)
    parts, used, number = [head], len(head), 0
    while True:
        task = (
            f"  - id: t{number}\n    run: ./scripts/smoke.sh --case {number}\n    vcpus: 1\n"
            "    requirements: {labels: {form_factor: som}, tags: [uart-debug]}\n    env:\n"
        )
        index = 0
        while len(task) < per_task:
            task += f"      CASE_{index}: 'value {number}.{index} of the lab notes'\n"
            index += 1
        if used + len(task) > size - 2:
            break
        parts.append(task)
        used += len(task)
        number += 1
    parts.append("#" * (size - used - 1) + "\n")
    text = "".join(parts)
    assert len(text.encode()) == size, (len(text), size)
    return text


def push(sha: str) -> bytes:
    """A push delivery's body, to main."""
    payload: dict[str, Any] = {
        "ref": "refs/heads/main",
        "after": sha,
        "before": "0" * 40,
        "deleted": False,
        "repository": {"id": 9, "full_name": REPO},
        "installation": {"id": 1},
        "sender": {"login": "octocat", "type": "User"},
    }
    return json.dumps(payload).encode()


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def readyz_until(http: aiohttp.ClientSession, base: str, done: asyncio.Event) -> list[float]:
    """``GET /readyz`` one after another (10 ms apart) until ``done``; latencies in ms, negative for an
    answer other than 200 (the server's own timeout: ``READY_TIMEOUT_S``)."""
    latencies = []
    while not done.is_set():
        began = time.perf_counter()
        async with http.get(f"{base}/readyz") as response:
            status = response.status
        took = (time.perf_counter() - began) * 1000
        latencies.append(took if status == 200 else -took)
        await asyncio.sleep(0.01)
    return latencies


async def processed(database: Database, done: asyncio.Event) -> None:
    """Set ``done`` once every stored delivery is processed."""
    await asyncio.sleep(0.2)  # the push is stored before the 202 comes back
    while True:
        async with database.sessions() as session:
            if await pending_count(session) == 0:
                done.set()
                return
        await asyncio.sleep(0.05)


async def shape(size: int, pushes: int) -> tuple[list[float], list[float], list[float]]:
    """Baseline ``/readyz`` latencies, those during the pushes, and each push's processing seconds."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        url = f"sqlite+aiosqlite:///{folder / 'bench.db'}"
        database = Database.connect(url)
        await upgrade(database.engine)
        lab = synthetic_lab(20, 50)
        async with database.sessions() as session, session.begin():
            await apply_diff(
                session, lab, diff_inventories(Inventory(), lab), Change("bench", database.clock())
            )
        (folder / "workflows").mkdir()
        for number in range(3):
            text = large_manifest(f"large-{number}", size)
            (folder / "workflows" / f"large-{number}.yml").write_text(text, encoding="utf-8")
        try:
            async with (
                serve_with_github(
                    folder,
                    database_url=url,
                    repository=REPO,
                    workflows=folder / "workflows",
                    webhook_secret=SECRET,
                ) as served,
                aiohttp.ClientSession() as http,
            ):
                idle = asyncio.Event()
                asyncio.get_running_loop().call_later(2.0, idle.set)
                baseline = await readyz_until(http, served.base, idle)
                during: list[float] = []
                seconds = []
                for index in range(pushes):
                    body = push(f"{index + 1:040x}")
                    done = asyncio.Event()
                    began = time.perf_counter()
                    async with http.post(
                        f"{served.base}/webhooks/github",
                        data=body,
                        headers=signed_headers(SECRET, "push", body),
                    ) as response:
                        assert response.status == 202
                    watcher = asyncio.create_task(processed(database, done))
                    during += await readyz_until(http, served.base, done)
                    await watcher
                    seconds.append(time.perf_counter() - began)
        finally:
            await database.close()
    return baseline, during, seconds


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="one push a shape")
    args = parser.parse_args()
    pushes = 1 if args.quick else 3
    print(
        "GET /readyz one after another while a push of three manifests is processed "
        f"({pushes} push(es) a shape)"
    )
    print(f"{'':>36} {'samples':>8} {'not 200':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'push s':>8}")
    for name, size in SHAPES.items():
        baseline, during, seconds = asyncio.run(shape(size, pushes))
        for label, samples, took in (
            ("baseline, nothing to do", baseline, ""),
            (name, during, f"{max(seconds):.1f}"),
        ):
            failed = sum(1 for sample in samples if sample < 0)
            times = [abs(sample) for sample in samples]
            print(
                f"{label:>36} {len(times):>8} {failed:>8} {percentile(times, 0.5):>8.1f} "
                f"{percentile(times, 0.99):>8.1f} {max(times):>8.1f} {took:>8}"
            )


if __name__ == "__main__":
    main()
