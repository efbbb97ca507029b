"""Time history at scale: the first page of sessions with a filter, and a device's jobs.

100,000 sessions and 400,000 jobs (``--quick``: 10,000 and 40,000) are inserted in bulk over 90 days, 50
repositories, 8 workflows and 2,000 devices, into a real SQLite file and, when ``KERRIGAN_TEST_POSTGRES_URL``
(or ``--postgres``) names a server, into a PostgreSQL database of the benchmark's own, created and dropped
here. Both are analysed after loading, as a running database's statistics would be. Then, through the
store functions the API calls (:mod:`kerrigan.store.history`), each timed as the median of repeated calls:

- ``GET /api/v1/sessions?repository=...``: the first page (50), and the page after it through its cursor;
- ``GET /api/v1/sessions?device=...``: the first page;
- ``GET /api/v1/devices/{id}/jobs``: the first page (50);
- the ``/devices`` page's read: every device's current and last job and its 7-day pass rate.

Targets (issue 12): a filtered first page of sessions at most 50 ms, a device's jobs at most 20 ms.

    python benchmarks/bench_history.py
    python benchmarks/bench_history.py --quick
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
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import insert, text

from bench_dispatch import scratch_postgres
from kerrigan.store.database import Database, create_engine, upgrade
from kerrigan.store.history import SessionFilters, device_jobs, device_summaries, list_sessions
from kerrigan.store.models import DeviceRow, JobRow, PoolRow, SessionRow

POSTGRES_ENV = "KERRIGAN_TEST_POSTGRES_URL"
SESSIONS_TARGET_MS = 50
DEVICE_TARGET_MS = 20
REPOSITORIES = 50
WORKFLOWS = 8
DEVICES = 2_000
JOBS_PER_SESSION = 4
BATCH = 5_000
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def fill(database: Database, sessions: int, *, seed: int = 12) -> None:
    """``sessions`` sessions of 4 jobs each, spread over 90 days, inserted a batch at a time."""
    rng = random.Random(seed)
    span = timedelta(days=90).total_seconds()
    pk = job_pk = 0
    async with database.engine.begin() as connection:
        while pk < sessions:
            session_rows, job_rows = [], []
            for _ in range(min(BATCH, sessions - pk)):
                pk += 1
                created = NOW - timedelta(seconds=span * (1 - pk / sessions) + rng.random())
                failed = rng.random() < 0.1
                session_rows.append(
                    {
                        "pk": pk,
                        "id": str(uuid.UUID(int=rng.getrandbits(128))),
                        "head_sha": f"{rng.getrandbits(160):040x}",
                        "workflow": f"hil-{rng.randrange(WORKFLOWS)}",
                        "manifest_path": ".kerrigan/hil.yml",
                        "event": "push",
                        "priority": "normal",
                        "state": "completed",
                        "conclusion": "failure" if failed else "success",
                        "resolution": {},
                        "created_at": created,
                        "updated_at": created + timedelta(minutes=3),
                        "repository": f"octo/repo-{rng.randrange(REPOSITORIES):02d}",
                        "head_branch": rng.choice(("main", "main", "release/2.2", f"feature/{pk % 97}")),
                    }
                )
                for task in range(JOBS_PER_SESSION):
                    job_pk += 1
                    job_rows.append(
                        {
                            "pk": job_pk,
                            "session_pk": pk,
                            "task_id": f"task-{task}",
                            "device_id": f"dev-{rng.randrange(DEVICES):05d}",
                            "state": "failed" if failed and task == 0 else "succeeded",
                            "exit_status": 1 if failed and task == 0 else 0,
                            "created_at": created,
                            "started_at": created + timedelta(seconds=5),
                            "finished_at": created + timedelta(minutes=2),
                            "host": f"lab-{rng.randrange(40):02d}",
                            "attempt": 1,
                            "avoid_devices": [],
                        }
                    )
            await connection.execute(insert(SessionRow.__table__), session_rows)
            await connection.execute(insert(JobRow.__table__), job_rows)
        await connection.execute(
            insert(PoolRow.__table__),
            [{"pk": 1, "id": "bench", "name": "bench", "created_at": NOW, "updated_at": NOW}],
        )
        await connection.execute(
            insert(DeviceRow.__table__),
            [
                {
                    "pk": n + 1,
                    "id": f"dev-{n:05d}",
                    "pool_pk": 1,
                    "board": "modalix",
                    "target_type": "devkit",
                    "os_type": "linux",
                    "host": f"lab-{n % 40:02d}",
                    "state": "available",
                    "state_changed_at": NOW,
                    "created_at": NOW,
                    "updated_at": NOW,
                }
                for n in range(DEVICES)
            ],
        )
    async with database.engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("ANALYZE"))


async def median_ms(work: Callable[[], Awaitable[object]], repeat: int) -> float:
    """The median of ``repeat`` timed calls, after one untimed call to warm the caches."""
    await work()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        await work()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def measure(url: str, sessions: int, repeat: int) -> dict[str, float]:
    """Fill the database at ``url`` and time each query."""
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()
    database = Database.connect(url)
    try:
        started = time.perf_counter()
        await fill(database, sessions)
        loaded = time.perf_counter() - started
        print(f"  loaded {sessions:,} sessions and {sessions * JOBS_PER_SESSION:,} jobs in {loaded:.1f} s")
        repository = SessionFilters(repository="octo/repo-07")
        device = "dev-00042"
        async with database.sessions() as session:
            first = await list_sessions(session, repository, limit=50)
            assert len(first.items) == 50, "the repository filter found too few sessions"

            async def repository_page() -> object:
                return await list_sessions(session, repository, limit=50)

            async def repository_second_page() -> object:
                return await list_sessions(session, repository, limit=50, after=first.next)

            async def device_sessions() -> object:
                return await list_sessions(session, SessionFilters(device=device), limit=50)

            async def device_page() -> object:
                return await device_jobs(session, device, limit=50)

            async def every_device() -> object:
                return await device_summaries(session, NOW - timedelta(days=7))

            return {
                "sessions?repository= (first page)": await median_ms(repository_page, repeat),
                "sessions?repository= (second page)": await median_ms(repository_second_page, repeat),
                "sessions?device= (first page)": await median_ms(device_sessions, repeat),
                "devices/{id}/jobs (first page)": await median_ms(device_page, repeat),
                "/devices page (2,000 devices)": await median_ms(every_device, max(3, repeat // 10)),
            }
    finally:
        await database.close()


async def on_postgres(server: str, sessions: int, repeat: int) -> dict[str, float]:
    """:func:`measure` on a scratch database."""
    async with scratch_postgres(server) as url:
        return await measure(url, sessions, repeat)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 sessions and 40,000 jobs")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=os.environ.get(POSTGRES_ENV),
        help=f"also measure on this PostgreSQL server (default: ${POSTGRES_ENV})",
    )
    args = parser.parse_args()
    sessions, repeat = (10_000, 20) if args.quick else (100_000, 50)
    results: list[tuple[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as folder:
        print("sqlite:")
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        results.append(("sqlite", asyncio.run(measure(url, sessions, repeat))))
    if args.postgres:
        print("postgresql:")
        results.append(("postgresql", asyncio.run(on_postgres(args.postgres, sessions, repeat))))
    print(f"median of {repeat} calls, ms ({sessions:,} sessions, {sessions * JOBS_PER_SESSION:,} jobs):")
    print(f"{'database':>10}  {'query':<36} {'ms':>7}  target")
    for name, figures in results:
        for query, ms in figures.items():
            if query.startswith("/devices"):
                print(f"{name:>10}  {query:<36} {ms:>7.2f}  (no target)")
                continue
            target = DEVICE_TARGET_MS if query.startswith("devices") else SESSIONS_TARGET_MS
            verdict = "ok" if ms <= target else "OVER"
            print(f"{name:>10}  {query:<36} {ms:>7.2f}  <= {target} {verdict}")
    if not args.postgres:
        print(f"postgresql skipped: set {POSTGRES_ENV} or pass --postgres")


if __name__ == "__main__":
    main()
