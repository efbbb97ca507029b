"""Pushes superseding each other on two replicas and PostgreSQL: deadlocks, and deliveries processed twice.

The lab of ``benchmarks/bench_scaleout.py`` (2 runner hosts of 2 devices, every one a process of its own on
loopback, on a fresh PostgreSQL database migrated and imported with the ``kerrigan`` commands), but the
replicas are as an operator runs them by default: 2 ``kerrigan serve`` replicas, each with the worker
process it starts itself (``KERRIGAN_WORKERS`` unset: 1 on PostgreSQL), and the repository's manifest
keeps the default concurrency (``{workflow}/{branch}``, ``cancel: queued``): each push to ``main``
cancels the sessions of older commits that have not started. ``--pushes`` pushes of commits of their own go
to one branch, to the replicas in turn, ``--rate`` a second; each commit's session has 2 jobs of
``sleep 0.3``.

Printed for each run (``--runs``), then in total, each of which should be 0:

- ``deadlock detected`` (SQLSTATE 40P01) and ``could not serialize`` (40001) in the replicas' and workers'
  logs;
- deliveries claimed more than once (a failed attempt retried, or a claim taken over), failed deliveries;
- deliveries processed twice: a push that made more than one session for its manifest, a check run created
  more than once for one (head_sha, name) at the stand-in, a task with two jobs of one attempt;
- sessions not completed (or not shown on GitHub) once everything settled.

The exit status is 1 when any of them is not 0. ``--logs DIR`` keeps the processes' logs.

    python benchmarks/soak_supersede.py                      # 40 pushes at 10/s, 6 runs
    python benchmarks/soak_supersede.py --quick              # 40 pushes, 1 run (about a minute)
    python benchmarks/soak_supersede.py --database d28_soak  # the scratch database's name
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import aiohttp
import asyncpg
from sqlalchemy import func, select

from bench_scaleout import (
    APP_ID,
    REPO,
    SECRET,
    BenchError,
    Fleet,
    ProcessDiedError,
    fresh_database,
    kerrigan_argv,
    kill_leftovers,
    prepare_lab,
    start_stand_in,
    wait_online,
)
from kerrigan.store.database import Database
from kerrigan.store.models import DeliveryRow, JobRow, SessionRow
from kerrigan.testing.github import push_payload, signed_headers
from kerrigan.testing.processes import free_port, wait_ready

MANIFEST: Final = """\
name: supersede
on: {push: {branches: [main]}}
scheduling: {labels: {sdk: "2.2.0"}, max_devkits: 2, queue_wait_limit_s: 7200}
tasks:
  - {id: build, run: "sleep 0.3", vcpus: 1}
  - {id: test, run: "sleep 0.3", vcpus: 1}
"""
DEADLOCK: Final = re.compile(r"deadlock detected|DeadlockDetected")
RETRIED: Final = re.compile(r"aborted by the database \(SQLSTATE (40P01|40001)\), trying again")
SERIALIZATION: Final = re.compile(r"could not serialize|SerializationFailure")
SETTLE_S: Final = 90.0


@dataclass(frozen=True)
class Lab:
    """The running replicas' addresses, the stand-in's, and the database."""

    bases: list[str]
    github_url: str
    database: Database


@contextlib.asynccontextmanager
async def lab(fleet: Fleet, folder: Path, database_url: str, replicas: int) -> AsyncIterator[Lab]:
    """The stand-in, ``replicas`` ``kerrigan serve`` (each starting its own worker), a runner agent per
    host; stopped on the way out (killed on a failure)."""
    try:
        github_url, private_key = await start_stand_in(fleet, folder, MANIFEST, "supersede.yml")
        ports = [free_port() for _ in range(replicas)]
        bases = [f"http://127.0.0.1:{port}" for port in ports]
        env = {
            **os.environ,
            "KERRIGAN_DATABASE_URL": database_url,
            "KERRIGAN_GITHUB_API_URL": github_url,
            "KERRIGAN_GITHUB_APP_ID": APP_ID,
            "KERRIGAN_GITHUB_PRIVATE_KEY": private_key,
            "KERRIGAN_WEBHOOK_SECRET": SECRET,
            "KERRIGAN_HOST": "127.0.0.1",
            "KERRIGAN_PUBLIC_URL": bases[0],
        }
        env.pop("KERRIGAN_WORKERS", None)  # the default: one worker process per replica on PostgreSQL
        tokens = await fleet.watched(prepare_lab(env, folder))
        for n, port in enumerate(ports, 1):
            await fleet.start(f"serve-{n}", 1, kerrigan_argv("serve"), {**env, "KERRIGAN_PORT": str(port)})
        await fleet.watched(asyncio.gather(*(wait_ready(base, timeout=60) for base in bases)))
        for n, (host, token) in enumerate(tokens.items()):
            argv = kerrigan_argv("runner", "--server", bases[n % len(bases)], "--host-id", host)
            argv += ["--work-dir", str(folder / host), "--free-space-floor-bytes", "0"]
            argv += ["--systemd-scope", "never", "--isolation", "off"]
            await fleet.start(f"runner-{host}", 2, argv, {**env, "KERRIGAN_RUNNER_TOKEN": token})
        database = Database.connect(database_url)
        try:
            await fleet.watched(wait_online(database, timeout=60))
            yield Lab(bases, github_url, database)
        finally:
            await database.close()
    except BaseException:
        await fleet.kill()
        raise
    await fleet.stop()


@dataclass
class Figures:
    """What one run left."""

    pushes: int
    sent_s: float = 0.0
    settled_s: float | None = None
    deadlocks: int = 0
    serialization: int = 0
    retried: int = 0  # units of work done again after an abort (each is one of the above, caught)
    postgres_deadlocks: int | None = None  # pg_stat_database.deadlocks of the run's database
    first_lines: list[str] = field(default_factory=list)
    claimed_again: int = 0
    failed_deliveries: int = 0
    duplicate_sessions: int = 0
    duplicate_check_runs: int = 0
    duplicate_jobs: int = 0
    unsettled: int = 0
    conclusions: Counter[str] = field(default_factory=Counter)

    @property
    def twice(self) -> int:
        """Deliveries processed twice, by any sign of it."""
        return self.duplicate_sessions + self.duplicate_check_runs + self.duplicate_jobs

    @property
    def bad(self) -> int:
        """Everything that should be 0."""
        return (
            self.deadlocks
            + self.serialization
            + self.claimed_again
            + self.failed_deliveries
            + self.twice
            + self.unsettled
        )


async def send_pushes(bases: Sequence[str], run: int, pushes: int, rate: float) -> list[str]:
    """``pushes`` pushes to ``main``, to the replicas in turn, ``rate`` a second; their commits."""
    shas = [f"{run:08x}{n:032x}" for n in range(1, pushes + 1)]
    async with aiohttp.ClientSession() as http:
        loop = asyncio.get_running_loop()
        start = loop.time()
        for n, sha in enumerate(shas):
            if (delay := start + n / rate - loop.time()) > 0:
                await asyncio.sleep(delay)
            body = json.dumps(push_payload(REPO, sha)).encode()
            headers = signed_headers(SECRET, "push", body, f"run{run}-push-{n}")
            async with http.post(f"{bases[n % len(bases)]}/webhooks/github", data=body, headers=headers) as r:
                if r.status != 202:
                    raise BenchError(f"push {n} answered {r.status}: {await r.text()}")
    return shas


async def settled(database: Database, timeout: float) -> bool:
    """Until every delivery is processed and every session completed and shown on GitHub."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        async with database.sessions() as session:
            pending = await session.scalar(select(func.count()).where(DeliveryRow.processed_at.is_(None)))
            open_ = await session.scalar(
                select(func.count()).where(
                    (SessionRow.state != "completed") | (SessionRow.shown_version < SessionRow.version)
                )
            )
        if not pending and not open_:
            return True
        await asyncio.sleep(0.25)
    return False


async def measure(figures: Figures, running: Lab, shas: Sequence[str]) -> None:
    """Deliveries, sessions, jobs and check runs left by the run."""
    async with running.database.sessions() as session:
        deliveries = (await session.execute(select(DeliveryRow.attempts, DeliveryRow.error))).all()
        sessions = (
            await session.execute(
                select(
                    SessionRow.delivery_id,
                    SessionRow.manifest_path,
                    SessionRow.state,
                    SessionRow.conclusion,
                    SessionRow.version,
                    SessionRow.shown_version,
                )
            )
        ).all()
        jobs = (await session.execute(select(JobRow.session_pk, JobRow.task_id, JobRow.attempt))).all()
    figures.claimed_again = sum(1 for row in deliveries if row.attempts > 1)
    figures.failed_deliveries = sum(1 for row in deliveries if row.error is not None)
    per_delivery = Counter((row.delivery_id, row.manifest_path) for row in sessions)
    figures.duplicate_sessions = sum(n - 1 for n in per_delivery.values())
    figures.duplicate_jobs = sum(n - 1 for n in Counter(tuple(row) for row in jobs).values())
    figures.unsettled = sum(
        1 for row in sessions if row.state != "completed" or row.shown_version < row.version
    )
    figures.conclusions = Counter(str(row.conclusion) for row in sessions)
    async with aiohttp.ClientSession() as http, http.get(f"{running.github_url}/_check-runs") as listed:
        runs = await listed.json()
    wanted = set(shas)
    per_run = Counter((run["head_sha"], run["name"]) for run in runs if run["head_sha"] in wanted)
    figures.duplicate_check_runs = sum(n - 1 for n in per_run.values())


async def postgres_deadlocks(admin_url: str, name: str) -> int:
    """The deadlocks PostgreSQL detected (and broke) in the database ``name``."""
    admin = await asyncpg.connect(f"{admin_url}/postgres")
    try:
        return int(await admin.fetchval("SELECT deadlocks FROM pg_stat_database WHERE datname = $1", name))
    finally:
        await admin.close()


def read_logs(folder: Path, figures: Figures) -> None:
    """Count deadlocks and serialisation failures in every process's log (the workers' go to their
    replica's)."""
    for path in sorted(folder.glob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            deadlock, serialization = DEADLOCK.search(line), SERIALIZATION.search(line)
            figures.deadlocks += bool(deadlock)
            figures.serialization += bool(serialization)
            figures.retried += bool(RETRIED.search(line))
            if (deadlock or serialization) and len(figures.first_lines) < 3:
                figures.first_lines.append(f"{path.stem}: {line.strip()[:200]}")


async def one_run(args: argparse.Namespace, run: int, logs: Path) -> Figures:
    """A fresh database and lab, the pushes, the count."""
    logs.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(logs)
    figures = Figures(args.pushes)
    with tempfile.TemporaryDirectory(prefix="kerrigan-supersede-") as tmp:
        async with fresh_database(args.postgres, args.database) as url:
            async with lab(fleet, Path(tmp), url, args.replicas) as running:
                began = time.monotonic()
                shas = await fleet.watched(send_pushes(running.bases, run, args.pushes, args.rate))
                figures.sent_s = time.monotonic() - began
                if await fleet.watched(settled(running.database, SETTLE_S)):
                    figures.settled_s = time.monotonic() - began
                await measure(figures, running, shas)
                if died := fleet.dead():
                    raise ProcessDiedError(", ".join(died))
            # Every process has stopped: their connections' statistics are in.
            figures.postgres_deadlocks = await postgres_deadlocks(args.postgres, args.database)
    read_logs(logs, figures)
    return figures


def report(run: int, figures: Figures) -> None:
    """One run's figures."""
    settled_in = (
        f"settled in {figures.settled_s:.1f} s" if figures.settled_s else f"NOT settled in {SETTLE_S:g} s"
    )
    print(
        f"run {run}: {figures.pushes} pushes in {figures.sent_s:.1f} s, {settled_in}; "
        f"deadlocks {figures.deadlocks} (PostgreSQL counted {figures.postgres_deadlocks}), serialisation "
        f"failures {figures.serialization}, units of work done again {figures.retried}; "
        f"deliveries claimed again {figures.claimed_again}, failed {figures.failed_deliveries}; "
        f"processed twice: sessions {figures.duplicate_sessions}, check runs {figures.duplicate_check_runs}, "
        f"jobs {figures.duplicate_jobs}; unsettled sessions {figures.unsettled}; "
        f"conclusions {dict(sorted(figures.conclusions.items()))}"
    )
    for line in figures.first_lines:
        print(f"  {line}")


async def run_all(args: argparse.Namespace, logs: Path) -> int:
    """Every run in turn, then the totals; the exit status."""
    results = []
    for run in range(1, args.runs + 1):
        try:
            figures = await one_run(args, run, logs / f"run-{run}")
        except BenchError as exc:
            print(f"run {run}: {'a process died: ' if isinstance(exc, ProcessDiedError) else ''}{exc}")
            return 1
        report(run, figures)
        results.append(figures)
    deadlocked = [f.deadlocks for f in results]
    counted = [f.postgres_deadlocks for f in results]
    twice = sum(1 for f in results if f.twice)
    again = sum(1 for f in results if f.claimed_again)
    print(
        f"{len(results)} runs of {args.pushes} pushes on {args.replicas} replicas: deadlocks per run "
        f"{deadlocked} in the logs (total {sum(deadlocked)}), {counted} counted by PostgreSQL; runs with a "
        f"delivery claimed again: {again} of {len(results)}; runs with a delivery's effects made twice: "
        f"{twice} of {len(results)}; runs with anything that should be 0: {sum(1 for f in results if f.bad)}"
    )
    return 1 if any(f.bad for f in results) else 0


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run (for CI, about a minute)")
    parser.add_argument("--runs", type=int, help="runs, each on a fresh database (default 6; 1 with --quick)")
    parser.add_argument("--pushes", type=int, default=40, help="pushes to main a run (default 40)")
    parser.add_argument("--rate", type=float, default=10.0, help="pushes a second (default 10)")
    parser.add_argument("--replicas", type=int, default=2, help="kerrigan serve replicas (default 2)")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432",
        help="the PostgreSQL server, without a database name (default: %(default)s)",
    )
    parser.add_argument(
        "--database", default="kerrigan_soak_supersede", help="the scratch database (made, then dropped)"
    )
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    if args.runs is None:
        args.runs = 1 if args.quick else 6
    if args.runs < 1 or args.pushes < 2 or args.rate <= 0 or not 1 <= args.replicas <= 8:
        parser.error("--runs >= 1, --pushes >= 2, --rate > 0 and --replicas from 1 to 8")
    began = time.monotonic()
    status = 1
    try:
        with tempfile.TemporaryDirectory(prefix="kerrigan-supersede-logs-") as tmp:
            status = asyncio.run(run_all(args, args.logs or Path(tmp)))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    finally:
        kill_leftovers()
    print(f"(the run took {time.monotonic() - began:.0f} s)")
    raise SystemExit(status)


if __name__ == "__main__":
    main()
