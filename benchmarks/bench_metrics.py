"""Time a ``GET /metrics`` scrape of a big lab, and the background read of the lab's figures behind it.

A synthetic lab of 10,000 devices in 200 pools on 100 runner hosts, 100,000 ended jobs of history (25,000
sessions over 30 days, every device among them) and a queue of 1,000 jobs (250 sessions over 10
repositories, asking for one of 4 sets of requirements) are inserted in bulk into a real SQLite file and,
with ``--postgres URL`` (or ``KERRIGAN_TEST_POSTGRES_URL``), into a PostgreSQL database of the benchmark's
own, created and dropped here. The process's counters are filled as a server that ran that history holds
them: every job's end counted through :func:`kerrigan.web.metrics.count_fact` (so
``kerrigan_device_busy_seconds_total`` has one series per device), plus webhook, GitHub request and rate
figures. Then:

- the scrape: :class:`~kerrigan.web.metrics.LabMetrics` and :func:`~kerrigan.web.metrics.metrics_handler`
  on a bare ``web.Application`` on loopback (not ``create_app``: its dispatcher would lease the queued jobs
  and scan the history for suspects on the same event loop, so the figure would be theirs, not the
  scrape's). ``GET /metrics`` as Prometheus asks (OpenMetrics) and as text 0.0.4, p50/p95/max of
  sequential scrapes; the baseline in the same run, interleaved with them, is ``GET /healthz`` on the same
  server. Beside it, the exposition rendered without HTTP, which is the server's own share. The
  figures are read once before; the background refresh does not run during the scrapes.
- the background refresh (:meth:`LabMetrics.refresh`, every 10 s and after changes): cold (a new pool
  cache: the inventory loaded, every distinct set of requirements resolved) and warm (the cache kept).
  It is not on a scrape's path, but it is CPU the server spends.

The scraped text is parsed once with ``prometheus_client.parser`` and its series counted. Target
(issue 14): a scrape at most 50 ms.

    python benchmarks/bench_metrics.py
    python benchmarks/bench_metrics.py --quick      # 1,000 devices, 10,000 jobs
    python benchmarks/bench_metrics.py --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert, select, text

from bench_dispatch import scratch_postgres
from kerrigan.app import tune_collector
from kerrigan.core.inventory import Inventory
from kerrigan.metrics import (
    GITHUB_RATE_LIMIT,
    GITHUB_RATE_REMAINING,
    GITHUB_REQUESTS,
    WEBHOOK_ACK,
    WEBHOOK_DELIVERIES,
)
from kerrigan.store.database import Database, upgrade
from kerrigan.store.models import DeviceRow, JobRow, PoolRow, RunnerHostRow, SessionRow
from kerrigan.store.signals import JobEnded, JobStarted, SessionConcluded
from kerrigan.testing.labs import synthetic_lab
from kerrigan.web.metrics import REFRESH_S, LabMetrics, count_fact, metrics_handler

POSTGRES_ENV = "KERRIGAN_TEST_POSTGRES_URL"
SCRAPE_TARGET_MS = 50
JOBS_PER_SESSION = 4
REPOSITORIES = 10
BATCH = 5_000
# What Prometheus 2.x/3.x sends: it prefers OpenMetrics.
PROMETHEUS_ACCEPT = (
    "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,"
    "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
)
TEXT_ACCEPT = "text/plain;version=0.0.4"
# The queue's distinct requirements, as sessions' resolutions record them (one set no device meets).
REQUIREMENTS = (
    {"labels": {"sdk": ["2.2.0"], "form_factor": ["som"]}, "tags": ["uart-debug"]},
    {"labels": {"sdk": ["2.1.1", "2.2.0"]}, "tags": []},
    {"labels": {"form_factor": ["pcie"], "purpose": ["ci"]}, "tags": []},
    {"labels": {"sdk": ["9.9.9"]}, "tags": []},
)
ENDINGS = (  # state, failure class, share of ended jobs
    ("succeeded", None, 0.86),
    ("failed", "test", 0.09),
    ("failed", "infrastructure", 0.02),
    ("timed_out", "timeout", 0.01),
    ("cancelled", "cancelled", 0.02),
)
GITHUB_OPERATIONS = (
    "GET /repos/{owner}/{repo}/contents/{path}",
    "POST /repos/{owner}/{repo}/check-runs",
    "PATCH /repos/{owner}/{repo}/check-runs/{check_run_id}",
    "GET /repos/{owner}/{repo}/commits/{ref}/check-runs",
    "GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls",
    "GET /repos/{owner}/{repo}/collaborators/{username}/permission",
    "POST /repos/{owner}/{repo}/issues/{issue_number}/comments",
    "POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
    "GET /repos/{owner}/{repo}/pulls/{pull_number}",
    "GET /repos/{owner}/{repo}/tarball/{ref}",
    "POST /app/installations/{installation_id}/access_tokens",
    "DELETE /installation/token",
    "GET /app",
)
WEBHOOK_EVENTS = ("push", "pull_request", "check_run", "check_suite", "merge_group", "issue_comment")


@dataclass(frozen=True)
class Sizes:
    """How big the lab, its history and its queue are, and how many scrapes are timed."""

    pools: int
    jobs: int
    queued: int
    scrapes: int

    @property
    def devices(self) -> int:
        """50 devices a pool."""
        return self.pools * 50


@dataclass(frozen=True)
class Figures:
    """What one database's run measured."""

    refresh: dict[str, float]  # the background refresh, cold and warm: wall and CPU ms
    latencies: dict[str, list[float]]  # by request, ms
    series: Counter[str]  # samples in the scraped text, by metric family
    text_bytes: int
    openmetrics_bytes: int


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def fill(database: Database, lab: Inventory, sizes: Sizes, now: datetime) -> None:
    """The lab, its history and its queue, with bulk inserts (the benchmark is about reading)."""
    rng = random.Random(14)
    async with database.engine.begin() as connection:
        await connection.execute(
            insert(RunnerHostRow.__table__),
            [
                {
                    "id": host.id,
                    "online": host.online,
                    "created_at": now,
                    "last_heartbeat_at": now - timedelta(seconds=rng.uniform(0, 20)) if host.online else None,
                    "paused_at": now - timedelta(hours=1) if n % 50 == 3 else None,
                    "paused_reason": "rack move" if n % 50 == 3 else None,
                }
                for n, host in enumerate(lab.hosts)
            ],
        )
        await connection.execute(
            insert(PoolRow.__table__),
            [
                {
                    "pk": n + 1,
                    "id": pool.id,
                    "name": pool.name,
                    "owners": list(pool.owners),
                    "firmware_channel": pool.firmware.channel,
                    "firmware_base_version": pool.firmware.base_version,
                    "labels": dict(pool.labels),
                    "tags": sorted(pool.tags),
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for n, pool in enumerate(lab.pools)
            ],
        )
        pool_pks = {pool.id: n + 1 for n, pool in enumerate(lab.pools)}
        await connection.execute(
            insert(DeviceRow.__table__),
            [
                {
                    "id": device.id,
                    "pool_pk": pool_pks[device.pool_id],
                    "board": device.board,
                    "target_type": device.target_type,
                    "os_type": device.os_type,
                    "host": device.host,
                    "state": device.state,
                    "state_reason": device.state_reason,
                    "state_changed_at": now,
                    "health": rng.choices(("good", "unknown", "bad"), (0.8, 0.18, 0.02))[0],
                    "labels": dict(device.labels),
                    "tags": sorted(device.tags),
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for device in lab.devices
            ],
        )
        devices = [device.id for device in lab.devices]
        rng.shuffle(devices)
        span = timedelta(days=30).total_seconds()
        ended = sizes.jobs // JOBS_PER_SESSION
        session_pk = job_pk = 0
        while session_pk < ended + sizes.queued // JOBS_PER_SESSION:
            sessions: list[dict[str, object]] = []
            jobs: list[dict[str, object]] = []
            for _ in range(min(BATCH, ended + sizes.queued // JOBS_PER_SESSION - session_pk)):
                session_pk += 1
                queued = session_pk > ended
                created = now - timedelta(
                    seconds=rng.uniform(0, 600) if queued else span * (1 - session_pk / ended) + 900
                )
                sessions.append(
                    {
                        "pk": session_pk,
                        "id": str(uuid.UUID(int=rng.getrandbits(128))),
                        "head_sha": f"{rng.getrandbits(160):040x}",
                        "workflow": "hil",
                        "manifest_path": ".kerrigan/workflows/hil.yml",
                        "event": "push",
                        "priority": "normal",
                        "state": "queued" if queued else "completed",
                        "conclusion": None if queued else "success",
                        "resolution": {},
                        "created_at": created,
                        "updated_at": created + timedelta(minutes=0 if queued else 5),
                        "repository": f"octo/repo-{rng.randrange(REPOSITORIES):02d}",
                        "head_branch": "main",
                        # A few new sessions whose check run GitHub does not show yet.
                        "unshown_since": created if queued and rng.random() < 0.05 else None,
                    }
                )
                requirements = rng.choice(REQUIREMENTS)
                for task in range(JOBS_PER_SESSION):
                    job_pk += 1
                    state, failure_class = ("queued", None) if queued else ending(rng)
                    jobs.append(
                        {  # every row the same keys: one executemany a batch
                            "pk": job_pk,
                            "session_pk": session_pk,
                            "task_id": f"task-{task}",
                            "device_id": None if queued else devices[job_pk % len(devices)],  # all ran some
                            "state": state,
                            "failure_class": failure_class,
                            "created_at": created,
                            "started_at": None if queued else created + timedelta(seconds=5),
                            "finished_at": None if queued else created + timedelta(minutes=2),
                            "host": None if queued else lab.hosts[job_pk % len(lab.hosts)].id,
                            "vcpus": 2,
                            "requirements": requirements,
                            "attempt": 1,
                            "avoid_devices": [],
                        }
                    )
            await connection.execute(insert(SessionRow.__table__), sessions)
            await connection.execute(insert(JobRow.__table__), jobs)
    async with database.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE"))


def ending(rng: random.Random) -> tuple[str, str | None]:
    """How an ended job ended, drawn at the shares of :data:`ENDINGS`."""
    state, failure_class, _ = rng.choices(ENDINGS, [share for _, _, share in ENDINGS])[0]
    return state, failure_class


async def count_history(database: Database) -> int:
    """Count every ended job, as the server that ran them did when each committed; and the other
    counters a server that has been up a while holds. The number of busy-seconds series."""
    rng = random.Random(15)
    async with database.sessions() as session:
        ended = (
            await session.execute(
                select(JobRow.state, JobRow.failure_class, JobRow.device_id).where(JobRow.state != "queued")
            )
        ).all()
    for state, failure_class, device in ended:
        count_fact(JobStarted(rng.expovariate(1 / 90)))
        count_fact(JobEnded(state, failure_class, (device,) if device else (), rng.uniform(30, 600)))
    for _ in range(len(ended) // JOBS_PER_SESSION):
        count_fact(SessionConcluded(rng.choices(("success", "failure", "cancelled"), (0.9, 0.08, 0.02))[0]))
    for event in WEBHOOK_EVENTS:
        for outcome in ("processed", "ignored", "retrying", "failed"):
            WEBHOOK_DELIVERIES.labels(event, outcome).inc(rng.randrange(1, 5_000))
    for _ in range(len(ended) // JOBS_PER_SESSION):
        WEBHOOK_ACK.observe(rng.expovariate(1 / 0.004))
    for operation in GITHUB_OPERATIONS:
        for status in ("200", "201", "404", "422", "0"):
            GITHUB_REQUESTS.labels(operation, status).inc(rng.randrange(1, 10_000))
    for installation in [*(str(n) for n in range(1, 21)), "app"]:
        GITHUB_RATE_LIMIT.labels(installation).set(5_000)
        GITHUB_RATE_REMAINING.labels(installation).set(rng.randrange(5_000))
    return len({device for _, _, device in ended})


async def timed_ms(work: Callable[[], Awaitable[object]], repeat: int) -> list[float]:
    """Wall time of ``repeat`` calls of ``work``, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await work()
        times.append((time.perf_counter() - started) * 1000)
    return times


async def time_refresh(database: Database, repeat: int) -> dict[str, float]:
    """The background read of the lab's figures: cold (a new pool cache each time, as after a start or an
    inventory change) and warm (the cache kept); wall time and process CPU (the SQLite engine's thread
    included, PostgreSQL's own work not)."""
    kept = LabMetrics(database)
    await kept.refresh()  # connections opened, the cache filled
    figures: dict[str, float] = {}
    for name, refresh in (
        ("cold", lambda: LabMetrics(database).refresh()),
        ("warm", kept.refresh),
    ):
        cpu_started = time.process_time()
        times = await timed_ms(refresh, repeat)
        figures[f"refresh {name} ms"] = statistics.median(times)
        figures[f"refresh {name} cpu ms"] = (time.process_time() - cpu_started) * 1000 / repeat
    return figures


async def healthz(request: web.Request) -> web.Response:
    """As the server's own: the process answers."""
    return web.json_response({"status": "ok"})


async def time_scrapes(metrics: LabMetrics, scrapes: int) -> tuple[dict[str, list[float]], str, int]:
    """Serve ``/metrics`` and ``/healthz`` on loopback and time sequential requests, interleaved; the
    latencies by request, the text 0.0.4 body, and the OpenMetrics body's size."""
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler(metrics.exposition, None))
    app.router.add_get("/healthz", healthz)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    host, port = runner.addresses[0][:2]
    base = f"http://{host}:{port}"
    requests = {
        "GET /healthz (baseline)": ("/healthz", ""),
        "GET /metrics (OpenMetrics)": ("/metrics", PROMETHEUS_ACCEPT),
        "GET /metrics (text 0.0.4)": ("/metrics", TEXT_ACCEPT),
    }
    latencies: dict[str, list[float]] = {name: [] for name in requests}
    bodies: dict[str, bytes] = {}
    try:
        async with aiohttp.ClientSession() as http:
            for round_number in range(scrapes + 5):  # 5 rounds first, not timed
                for name, (path, accept) in requests.items():
                    started = time.perf_counter()
                    async with http.get(f"{base}{path}", headers={"Accept": accept}) as response:
                        body = await response.read()
                        assert response.status == 200, (path, response.status)
                    if round_number >= 5:
                        latencies[name].append((time.perf_counter() - started) * 1000)
                    bodies[name] = body
    finally:
        await runner.cleanup()
    render = []
    for accept in (PROMETHEUS_ACCEPT, TEXT_ACCEPT):
        samples = []
        for _ in range(max(5, scrapes // 4)):
            started = time.perf_counter()
            metrics.exposition(accept)
            samples.append((time.perf_counter() - started) * 1000)
        render.append(samples)
    latencies["render only, no HTTP (OpenMetrics)"], latencies["render only, no HTTP (text 0.0.4)"] = render
    return (
        latencies,
        bodies["GET /metrics (text 0.0.4)"].decode(),
        len(bodies["GET /metrics (OpenMetrics)"]),
    )


def count_series(exposition: str) -> Counter[str]:
    """Samples by metric family, parsed as Prometheus would."""
    return Counter(
        {family.name: len(family.samples) for family in text_string_to_metric_families(exposition)}
    )


async def measure(url: str, sizes: Sizes, *, count_counters: bool) -> Figures:
    """Fill the database at ``url`` and time the refresh and the scrapes."""
    database = Database.connect(url)
    try:
        await upgrade(database.engine)
        lab = synthetic_lab(sizes.pools, 50)
        started = time.perf_counter()
        await fill(database, lab, sizes, datetime.now(UTC))
        print(
            f"  loaded {len(lab.devices):,} devices, {sizes.jobs:,} ended jobs and {sizes.queued:,} queued "
            f"in {time.perf_counter() - started:.1f} s"
        )
        if count_counters:  # the process's counters are the process's: filled once, for both databases
            busy = await count_history(database)
            print(f"  counted the history: {busy:,} kerrigan_device_busy_seconds series")
        refresh = await time_refresh(database, max(3, sizes.scrapes // 20))
        metrics = LabMetrics(database)
        await metrics.refresh()
        await tune_collector()  # as `kerrigan serve` does once started
        latencies, exposition, openmetrics_bytes = await time_scrapes(metrics, sizes.scrapes)
        return Figures(
            refresh, latencies, count_series(exposition), len(exposition.encode()), openmetrics_bytes
        )
    finally:
        await database.close()


async def on_postgres(server: str, sizes: Sizes, *, count_counters: bool) -> Figures:
    """:func:`measure` on a scratch database."""
    async with scratch_postgres(server) as url:
        return await measure(url, sizes, count_counters=count_counters)


def report(name: str, figures: Figures, *, judged: bool) -> None:
    """Print one database's figures."""
    series = figures.series
    print(f"{name}:")
    print(
        f"  exposition: {sum(series.values()):,} series in {len(series)} families "
        f"({figures.text_bytes / 1e6:.2f} MB as text 0.0.4, {figures.openmetrics_bytes / 1e6:.2f} MB as "
        "OpenMetrics); largest: "
        + ", ".join(f"{family} {count:,}" for family, count in series.most_common(4))
    )
    print(f"  {'':<38} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'n':>5}")
    for request, samples in figures.latencies.items():
        print(
            f"  {request:<38} {percentile(samples, 0.5):>8.1f} {percentile(samples, 0.95):>8.1f} "
            f"{max(samples):>8.1f} {len(samples):>5}"
        )
    refresh = figures.refresh
    print(
        f"  background refresh (read_figures), median: cold {refresh['refresh cold ms']:.1f} ms "
        f"(CPU {refresh['refresh cold cpu ms']:.1f} ms), warm {refresh['refresh warm ms']:.1f} ms "
        f"(CPU {refresh['refresh warm cpu ms']:.1f} ms); every {REFRESH_S:.0f} s"
    )
    p95 = percentile(figures.latencies["GET /metrics (OpenMetrics)"], 0.95)
    verdict = ("met   " if p95 <= SCRAPE_TARGET_MS else "MISSED") if judged else "quick run, not judged:"
    print(f"  {verdict} a scrape <= {SCRAPE_TARGET_MS} ms (p95 {p95:.1f} ms, as Prometheus asks)")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 devices and 10,000 jobs, 50 scrapes")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=os.environ.get(POSTGRES_ENV),
        help=f"also measure on this PostgreSQL server (default: ${POSTGRES_ENV})",
    )
    args = parser.parse_args()
    sizes = Sizes(20, 10_000, 200, 50) if args.quick else Sizes(200, 100_000, 1_000, 200)
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} (other work slows the figures)")
    results: list[tuple[str, Figures]] = []
    with tempfile.TemporaryDirectory() as folder:
        print("sqlite:")
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        results.append(("sqlite", asyncio.run(measure(url, sizes, count_counters=True))))
    if args.postgres:
        print("postgresql:")
        results.append(("postgresql", asyncio.run(on_postgres(args.postgres, sizes, count_counters=False))))
    print(
        f"{sizes.devices:,} devices, {sizes.jobs:,} jobs in history, {sizes.queued:,} queued "
        f"({len(REQUIREMENTS)} sets of requirements over {REPOSITORIES} repositories):"
    )
    for name, figures in results:
        report(name, figures, judged=not args.quick)
    if not args.postgres:
        print(f"postgresql skipped: set {POSTGRES_ENV} or pass --postgres")


if __name__ == "__main__":
    main()
