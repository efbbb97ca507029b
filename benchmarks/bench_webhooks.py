"""Webhook speed on loopback, on SQLite: time to the 202, and push to check run.

1. Signed ``push`` deliveries posted at a steady 200 per second (open loop): deliveries/s achieved and the
   p50/p99 time to the answer, while the worker processes them (reading manifests at the stand-in). Beside
   it, a baseline in the same run: ``GET /healthz`` at the same rate, the cost of an aiohttp round trip.
   Target: p99 <= 50 ms at 200 deliveries/s.
2. Push to check run: a push whose commit holds a workflow, until its check run exists at the GitHub
   stand-in, one after another. Target: p95 <= 1 s.

The server logs as ``kerrigan serve`` does by default: at INFO, access log on, as JSON (its standard
error is not a terminal), written to ``/dev/null``. ``--log-formats text,json,none`` instead runs the
same load once per format, each on a fresh server and database (``KERRIGAN_LOG_FORMAT``, and for
``none`` ``KERRIGAN_LOG_LEVEL=error``: no line of this load is formatted or written): p99 at 200/s, and
the throughput: requests answered per second with 16 senders sending back to back, deliveries and, as
the baseline, ``GET /healthz``; 3 rounds (5 s a phase), medians, then the JSON/none and JSON/text
ratios. At INFO a delivery writes one line, the access log's. Target (issue 14): JSON costs at most
10 % of the throughput.

    python benchmarks/bench_webhooks.py            # 10 s at 200/s, 40 pushes
    python benchmarks/bench_webhooks.py --quick    # 2 s, 5 pushes
    python benchmarks/bench_webhooks.py --log-formats text,json,none [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.github import signed_headers
from kerrigan.testing.labs import synthetic_lab
from kerrigan.testing.processes import serve_with_github

SECRET = "bench-secret"  # noqa: S105 -- the benchmark's own throwaway webhook secret
LOG_FORMATS = ("text", "json", "none")
LOG_COST_TARGET = 0.10  # JSON logging may cost at most this share of the throughput
SENDERS = 16  # concurrent senders when measuring throughput: enough to keep the server busy
REPO = "octo/bench"
MANIFEST = """
name: bench
on: {push: {branches: [main]}}
scheduling: {labels: {sdk: "2.2.0", form_factor: som}, tags: [uart-debug]}
tasks:
  - {id: smoke, run: ./smoke.sh}
"""


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def push(sha: str, branch: str) -> bytes:
    """A push delivery's body."""
    payload: dict[str, Any] = {
        "ref": f"refs/heads/{branch}",
        "after": sha,
        "before": "0" * 40,
        "deleted": False,
        "repository": {"id": 9, "full_name": REPO},
        "installation": {"id": 1},
        "sender": {"login": "octocat", "type": "User"},
    }
    return json.dumps(payload).encode()


async def steady(
    http: aiohttp.ClientSession, rate: float, seconds: float, request: Any
) -> tuple[list[float], float]:
    """Send ``rate`` requests a second for ``seconds`` (open loop); latencies in ms, achieved rate."""
    latencies: list[float] = []
    count = int(rate * seconds)
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def one(index: int) -> None:
        await asyncio.sleep(max(0.0, start + index / rate - loop.time()))
        began = time.perf_counter()
        status = await request(http, index)
        latencies.append((time.perf_counter() - began) * 1000)
        assert status in (200, 202), status

    await asyncio.gather(*(one(index) for index in range(count)))
    return latencies, count / (loop.time() - start)


@contextlib.asynccontextmanager
async def served_lab(
    *, store_only: bool = False, environment: Mapping[str, str] | None = None
) -> AsyncIterator[tuple[aiohttp.ClientSession, str, Database]]:
    """The GitHub stand-in and `kerrigan serve` each in a process of their own, on a fresh SQLite
    database holding a small lab; this process only sends."""
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
        (folder / "workflows" / "bench.yml").write_text(MANIFEST, encoding="utf-8")
        try:
            async with (
                serve_with_github(
                    folder,
                    database_url=url,
                    repository=REPO,
                    workflows=folder / "workflows",
                    webhook_secret=SECRET,
                    configure_app=not store_only,
                    environment=environment,
                ) as served,
                aiohttp.ClientSession() as http,
            ):
                yield http, served.base, database
        finally:
            await database.close()


async def run(seconds: float, pushes: int, *, store_only: bool = False) -> None:
    """The two measurements, on the server as `kerrigan serve` runs by default."""
    async with served_lab(store_only=store_only) as (http, base, database):
        await report(http, base, database, seconds, 0 if store_only else pushes)


async def check_run_created(database: Database, sha: str) -> bool:
    """Whether the session for ``sha`` has the id of its check run, which the stand-in handed back."""
    async with database.sessions() as session:
        found = await find_sessions(session, REPO, head_sha=sha)
    return any(entry.check_run_id is not None for entry in found)


def deliveries_to(base: str, first: int = 0) -> Any:
    """A request for :func:`steady` or :func:`saturate`: the ``index``-th signed push, numbered from
    ``first``, to a branch no workflow runs on (its manifests are read, nothing is started)."""

    async def delivery(session: aiohttp.ClientSession, index: int) -> int:
        body = push(f"{first + index:040x}", "feature")
        async with session.post(
            f"{base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body)
        ) as response:
            return response.status

    return delivery


async def warm_up(http: aiohttp.ClientSession, delivery: Any) -> None:
    """A second of traffic, not measured: the server's connection pool and statement caches fill."""
    await steady(http, 200.0, 1.0, lambda session, index: delivery(session, index + 10**7))


async def saturate(
    http: aiohttp.ClientSession, senders: int, seconds: float, request: Any
) -> tuple[list[float], float]:
    """``senders`` senders each sending the next request as soon as the last is answered (closed loop),
    for ``seconds``; latencies in ms, and requests answered per second."""
    latencies: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time()
    numbers = itertools.count()

    async def sender() -> None:
        while loop.time() - start < seconds:
            began = time.perf_counter()
            status = await request(http, next(numbers))
            latencies.append((time.perf_counter() - began) * 1000)
            assert status in (200, 202), status

    await asyncio.gather(*(sender() for _ in range(senders)))
    return latencies, len(latencies) / (loop.time() - start)


async def drained(database: Database) -> float:
    """Wait until the worker has processed every stored delivery; the seconds it took."""
    started = time.perf_counter()
    while True:
        async with database.sessions() as session:
            if await pending_count(session) == 0:
                return time.perf_counter() - started
        await asyncio.sleep(0.05)


async def report(
    http: aiohttp.ClientSession,
    base: str,
    database: Database,
    seconds: float,
    pushes: int,
) -> None:
    """The two measurements."""
    rate = 200.0

    async def healthz(session: aiohttp.ClientSession, index: int) -> int:
        async with session.get(f"{base}/healthz") as response:
            return response.status

    delivery = deliveries_to(base)
    await warm_up(http, delivery)
    baseline, baseline_rate = await steady(http, rate, seconds, healthz)
    latencies, achieved = await steady(http, rate, seconds, delivery)
    print(f"{'':>28} {'sent/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for name, samples, sent in (
        ("baseline GET /healthz", baseline, baseline_rate),
        ("signed push deliveries", latencies, achieved),
    ):
        print(
            f"{name:>28} {sent:>8.0f} {percentile(samples, 0.5):>8.1f} {percentile(samples, 0.99):>8.1f} "
            f"{max(samples):>8.1f}"
        )

    p99 = percentile(latencies, 0.99)
    met = p99 <= 50 and achieved >= 190
    verdict = ("met " if met else "MISSED") if seconds >= 10 else "quick run, not judged:"
    print(f"{verdict} p99 to the 202 <= 50 ms at 200 deliveries/s (p99 {p99:.1f} ms at {achieved:.0f}/s)")
    if pushes:
        await push_to_check_run(http, base, database, seconds, len(latencies), pushes)


async def push_to_check_run(  # noqa: PLR0917 -- one step of the report
    http: aiohttp.ClientSession, base: str, database: Database, seconds: float, delivered: int, pushes: int
) -> None:
    """Drain the backlog, then time pushes one after another until their check run exists."""
    drain_s = await drained(database)
    print(
        f"the worker drained the backlog {drain_s:.1f} s after the last delivery "
        f"({delivered / (seconds + drain_s):.0f} deliveries/s processed overall)"
    )
    times = []
    for index in range(pushes):
        sha = f"{index + 10**6:040x}"
        body = push(sha, "main")
        began = time.perf_counter()
        async with http.post(
            f"{base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body)
        ) as response:
            assert response.status == 202
        while not await check_run_created(database, sha):
            await asyncio.sleep(0.002)
        times.append((time.perf_counter() - began) * 1000)
    p95 = percentile(times, 0.95)
    print(
        f"push -> check run at the stand-in, {pushes} pushes: p50 {statistics.median(times):.0f} ms, "
        f"p95 {p95:.0f} ms, max {max(times):.0f} ms"
    )
    print(f"{'met ' if p95 <= 1000 else 'MISSED'} push -> check run p95 <= 1 s ({p95:.0f} ms)")


def log_environment(log_format: str) -> dict[str, str]:
    """The server's logging for ``log_format``: at INFO, access log included, as ``text`` or ``json``; or
    ``none``: errors only, so no line of this load is formatted or written."""
    if log_format == "none":
        return {"KERRIGAN_LOG_FORMAT": "json", "KERRIGAN_LOG_LEVEL": "error"}
    return {"KERRIGAN_LOG_FORMAT": log_format, "KERRIGAN_LOG_LEVEL": "info"}


async def log_format_load(log_format: str, seconds: float) -> dict[str, float]:
    """The webhook load on a fresh server logging as ``log_format``: p99 at 200/s, then the requests
    answered per second by saturating senders, deliveries and (the baseline) ``GET /healthz``."""
    async with served_lab(environment=log_environment(log_format)) as (http, base, _):

        async def healthz(session: aiohttp.ClientSession, index: int) -> int:
            async with session.get(f"{base}/healthz") as response:
                return response.status

        await warm_up(http, deliveries_to(base))
        steady_latencies, _ = await steady(http, 200.0, seconds, deliveries_to(base))
        saturated, answered = await saturate(http, SENDERS, seconds, deliveries_to(base, first=2 * 10**7))
        _, healthz_answered = await saturate(http, SENDERS, seconds, healthz)
    return {
        "p99 at 200/s": percentile(steady_latencies, 0.99),
        "deliveries/s": answered,
        "saturated p99": percentile(saturated, 0.99),
        "healthz/s": healthz_answered,
    }


def compare_log_formats(formats: list[str], seconds: float, rounds: int, *, judged: bool) -> None:
    """Run the load once per log format and round (each round in another order, so that a machine
    getting busier does not favour one format) and print the medians and JSON's cost."""
    runs: dict[str, list[dict[str, float]]] = {log_format: [] for log_format in formats}
    for number in range(rounds):
        for log_format in formats[number % len(formats) :] + formats[: number % len(formats)]:
            runs[log_format].append(asyncio.run(log_format_load(log_format, seconds)))
    results = {
        log_format: {figure: statistics.median(run[figure] for run in done) for figure in done[0]}
        for log_format, done in runs.items()
    }
    print(
        f"log formats: {seconds:.0f} s a phase, median of {rounds} round(s), a fresh server each, "
        "logs written to /dev/null"
    )
    print(
        f"{'format':>8} {'p99 ms at 200/s':>16} {f'deliveries/s ({SENDERS} senders)':>27} {'p99 ms':>8} "
        f"{'baseline /healthz/s':>20}"
    )
    for log_format, figures in results.items():
        print(
            f"{log_format:>8} {figures['p99 at 200/s']:>16.1f} {figures['deliveries/s']:>27.0f} "
            f"{figures['saturated p99']:>8.1f} {figures['healthz/s']:>20.0f}"
        )
    if "json" not in results:
        return
    json_figures = results["json"]
    for other in ("none", "text"):
        if other in results:
            ratios = ", ".join(
                f"{figure} x{json_figures[figure] / results[other][figure]:.2f}"
                for figure in ("deliveries/s", "healthz/s", "p99 at 200/s")
            )
            extra_us = 1e6 / json_figures["deliveries/s"] - 1e6 / results[other]["deliveries/s"]
            print(f"json/{other}: {ratios}; {extra_us:+.0f} us a delivery")
    if "none" in results:
        cost = 1 - json_figures["deliveries/s"] / results["none"]["deliveries/s"]
        verdict = ("met " if cost <= LOG_COST_TARGET else "MISSED") if judged else "quick run, not judged:"
        print(
            f"{verdict} JSON logging costs <= {LOG_COST_TARGET:.0%} of the throughput "
            f"(deliveries answered/s, json/none: a cost of {cost:.1%})"
        )


def log_formats_of(value: str) -> list[str]:
    """``--log-formats``: a comma-separated list of text, json and none."""
    formats = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [part for part in formats if part not in LOG_FORMATS]
    if unknown or not formats:
        raise argparse.ArgumentTypeError(
            f"{value!r}: give a comma-separated list of {', '.join(LOG_FORMATS)}"
        )
    return formats


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 s of deliveries and 5 pushes")
    parser.add_argument(
        "--store-only",
        action="store_true",
        help="no GitHub App configured: deliveries are stored, not processed (the receiver alone)",
    )
    parser.add_argument(
        "--log-formats",
        type=log_formats_of,
        metavar="LIST",
        help="instead, the same load once per log format (text,json,none) and JSON's cost",
    )
    parser.add_argument(
        "--rounds", type=int, metavar="N", help="with --log-formats: rounds of all formats (3; --quick: 1)"
    )
    args = parser.parse_args()
    if args.log_formats:
        rounds = args.rounds or (1 if args.quick else 3)
        compare_log_formats(args.log_formats, 2.0 if args.quick else 5.0, rounds, judged=not args.quick)
        return
    asyncio.run(run(2.0 if args.quick else 10.0, 5 if args.quick else 40, store_only=args.store_only))


if __name__ == "__main__":
    main()
