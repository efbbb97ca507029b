"""Scale-out on one PostgreSQL database: ``kerrigan serve`` replicas and ``kerrigan worker`` processes side by
side, with the GitHub stand-in and runner agents, every one a process of its own on loopback.

For each configuration a fresh database (``kerrigan_bench_scaleout``, dropped afterwards) is migrated with
``kerrigan db upgrade``, a lab of 2 runner hosts with 2 devices each is imported with ``kerrigan inventory
import`` and the hosts get tokens from ``kerrigan runners create``. Then the stand-in, N ``kerrigan serve``
replicas (each on its own port, ``KERRIGAN_WORKERS=none``: as the Helm chart's, they leave deliveries and
check runs to the workers), M ``kerrigan worker`` processes and one ``kerrigan
runner`` per host (the hosts spread over the replicas) start. Signed deliveries go to the replicas in turn,
open loop on a fixed schedule (delivery i is due at i / rate; its time to the 202 is counted from when it was
due, so a sender or server that falls behind shows in the figure rather than hiding it), for a fixed
duration. The mix, by delivery number:

- 1 in 10: a push to ``main`` of a commit of its own, whose manifest makes one job (``true``, 1 vCPU);
- 3 in 10: a push to ``feature``, a branch no workflow runs on: the manifests are read at the stand-in,
  nothing starts;
- 6 in 10: a ``star`` event, which Kerrigan stores, claims and marks processed without doing anything.

Printed for each configuration: the sender's achieved rate; webhook ack p50/p99 (from when the delivery was
due, and from when it was sent); deliveries processed per second (the deliveries table's ``processed_at``,
from the first delivery's due time to the last one processed; the workers get 4 times the duration, at least
30 s, after the last delivery to catch up, and what they leave is reported); jobs finished per second while
the deliveries were sent; and the duplicates, each of which should be 0: deliveries claimed more than once,
sessions made twice for one push, check runs created more than once for one (repository, head_sha, name) at
the stand-in, jobs made twice for one task of a session, and devices held by two jobs at once (sampled
during the run, and from the jobs' start and end times afterwards). Then the same with 1 replica, and the
ratio (at an offered rate both configurations keep up with, deliveries processed per second is that rate in
both). The exit status is 1 when a duplicate is seen, a delivery is not answered 202, or a process dies.
Every process is stopped with SIGTERM at the end (runner agents first, then the servers and workers, then
the stand-in), and its process group killed if it is still running :data:`STOP_S` later, or at once on a
failure or Ctrl-C. ``--logs DIR`` keeps the processes' logs; the errors and warnings in them are counted.

    python benchmarks/bench_scaleout.py                       # 1,000/s for 10 s, 2 replicas then 1
    python benchmarks/bench_scaleout.py --quick               # 50/s for 3 s: a smoke run for CI
    python benchmarks/bench_scaleout.py --rate 300 --duration 10 --replicas 2 --workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, TypeVar

import aiohttp
import asyncpg
from sqlalchemy import func, select

from kerrigan.core.lifecycle import HOLDING_A_DEVICE
from kerrigan.github.client import app_jwt
from kerrigan.store.database import Database
from kerrigan.store.models import DeliveryRow, JobRow, RunnerHostRow, SessionRow
from kerrigan.testing.github import generate_app_key, push_payload, signed_headers
from kerrigan.testing.processes import APP_ID, free_port, wait_ready

T = TypeVar("T")

SECRET: Final = "bench-secret"  # noqa: S105 -- the benchmark's own throwaway webhook secret
REPO: Final = "octo/scaleout"
DATABASE: Final = "kerrigan_bench_scaleout"
HOSTS: Final = ("rig-01", "rig-02")
DEVICES_PER_HOST: Final = 2
TARGET_P99_MS: Final = 25.0
TARGET_RATE: Final = 1000.0
LATE_MS: Final = 5.0  # a send this much after its due time counts as late
# How long a tier of processes has to stop after SIGTERM before their groups are killed: more than a runner
# agent's long poll (25 s), which a stopping server waits out.
STOP_S: Final = 30.0
FINISHED: Final = ("succeeded", "failed", "refused_before_start", "cancelled", "timed_out", "retried")
LEASE_SAMPLE_S: Final = 0.25
RUN: Final = "run-"  # the measured deliveries' ids start so; the warm-up's with "warm-"
MANIFEST: Final = """\
name: scaleout
on: {push: {branches: [main]}}
concurrency: {group: "{workflow}/{sha}", cancel: none}  # every commit's session runs; none supersedes
scheduling: {labels: {sdk: "2.2.0"}, max_devkits: 1, queue_wait_limit_s: 7200}
tasks:
  - {id: smoke, run: "true", vcpus: 1}
"""
JOB_PUSH: Final = "pushes that make a job"
OTHER_BRANCH: Final = "pushes to a branch no workflow runs on"
IGNORED: Final = "star events, which Kerrigan ignores"
MIX: Final = (JOB_PUSH, OTHER_BRANCH, OTHER_BRANCH, OTHER_BRANCH, *[IGNORED] * 6)

# Every process started, by pid: whatever is left when the event loop is gone is killed with its group.
_STARTED: dict[int, asyncio.subprocess.Process] = {}


class BenchError(RuntimeError):
    """The benchmark cannot go on; the message says why, in one line."""


class ProcessDiedError(BenchError):
    """A process of the fleet exited while the benchmark still needed it."""


def inventory_text() -> str:
    """The lab: 2 runner hosts, 2 devices each, in one pool."""
    devices = "\n".join(
        f"      - {{id: board-{host[-2:]}-{n}, board: modalix, target_type: devkit, os_type: linux, "
        f"host: {host}}}"
        for host in HOSTS
        for n in range(DEVICES_PER_HOST)
    )
    hosts = "\n".join(f"  - id: {host}" for host in HOSTS)
    return (
        f"hosts:\n{hosts}\npools:\n  - id: bench\n    name: Bench\n    owners: [octocat]\n"
        f"    labels: {{sdk: '2.2.0'}}\n    devices:\n{devices}\n"
    )


# -- processes ---------------------------------------------------------------------------------------------


@dataclass
class Fleet:
    """The long-running processes of one configuration, each in a process group of its own, its output in
    ``logs/<name>.log``. Each has a tier; they stop tier by tier, highest first (the runner agents before
    the servers they report to, the servers before the stand-in)."""

    logs: Path
    processes: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    tiers: dict[str, int] = field(default_factory=dict)
    stopping: bool = False
    killed: list[str] = field(default_factory=list)  # those still running STOP_S after SIGTERM
    stop_s: dict[str, float] = field(default_factory=dict)  # how long each took to stop after SIGTERM

    async def start(
        self, name: str, tier: int, argv: Sequence[str], env: Mapping[str, str], *, stdout_pipe: bool = False
    ) -> asyncio.subprocess.Process:
        """Start ``argv`` as ``name``, stopped with ``tier``."""
        with (self.logs / f"{name}.log").open("wb") as log:  # the child holds its own copy
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=dict(env),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if stdout_pipe else log,
                stderr=log,
                start_new_session=True,  # Ctrl-C in the terminal is ours to pass on; a group to kill
            )
        _STARTED[process.pid] = process
        self.processes[name] = process
        self.tiers[name] = tier
        return process

    def dead(self) -> list[str]:
        """The processes that exited on their own, with their status."""
        return [
            f"{name} (exit status {p.returncode})"
            for name, p in self.processes.items()
            if p.returncode is not None
        ]

    async def watched(self, work: Awaitable[T]) -> T:
        """``work``'s result; :class:`ProcessDiedError` as soon as a process dies first."""
        task = asyncio.ensure_future(work)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=0.25)
                if done:
                    return task.result()
                if died := self.dead():
                    raise ProcessDiedError(", ".join(died))
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def stop(self) -> None:
        """SIGTERM to every process, tier by tier; the groups of those still running :data:`STOP_S` after
        it are killed (and named in :attr:`killed`)."""
        if self.stopping:
            return
        self.stopping = True
        for tier in sorted(set(self.tiers.values()), reverse=True):
            await self._stop([name for name, at in self.tiers.items() if at == tier])

    async def _stop(self, names: Sequence[str]) -> None:
        running = [(name, self.processes[name]) for name in names if self.processes[name].returncode is None]
        for _, process in running:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
        began = time.monotonic()

        async def stopped(name: str, process: asyncio.subprocess.Process) -> None:
            await process.wait()
            self.stop_s[name] = time.monotonic() - began

        waiting = {asyncio.ensure_future(stopped(name, p)): name for name, p in running}
        if waiting:
            _, late = await asyncio.wait(waiting, timeout=STOP_S)
            for task in late:
                process = self.processes[waiting[task]]
                self.killed.append(waiting[task])
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                await task
        for _, process in running:
            _STARTED.pop(process.pid, None)

    async def kill(self) -> None:
        """Kill every process's group at once (a group may outlive its leader)."""
        self.stopping = True
        for process in self.processes.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes.values():
            await process.wait()
            _STARTED.pop(process.pid, None)


def kill_leftovers() -> None:
    """Kill the process group of every process still running (after Ctrl-C or a failure)."""
    for pid, process in list(_STARTED.items()):
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    _STARTED.clear()


def kerrigan_argv(*arguments: str) -> list[str]:
    """A ``kerrigan`` command line run by this interpreter."""
    return [sys.executable, "-m", "kerrigan.cli", *arguments]


async def command(env: Mapping[str, str], *arguments: str) -> str:
    """Run a short ``kerrigan`` command; its output, or :class:`BenchError` with its error."""
    process = await asyncio.create_subprocess_exec(
        *kerrigan_argv(*arguments),
        env=dict(env),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    if process.returncode != 0:
        said = [line for line in err.decode(errors="replace").splitlines() if line.strip()] or ["no output"]
        raise BenchError(f"kerrigan {' '.join(arguments)} failed ({process.returncode}): {said[-1]}")
    return out.decode()


@contextlib.asynccontextmanager
async def fresh_database(admin_url: str, name: str = DATABASE) -> AsyncIterator[str]:
    """A new, empty database ``name`` (one left over from an earlier run is dropped first); its
    SQLAlchemy URL. Dropped on the way out."""
    admin = await asyncpg.connect(f"{admin_url}/postgres")
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield f"{admin_url.replace('postgresql://', 'postgresql+asyncpg://', 1)}/{name}"
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def prepare_lab(env: Mapping[str, str], folder: Path) -> dict[str, str]:
    """Migrate, import the lab and make the runner hosts' tokens, as an operator would; the tokens."""
    await command(env, "db", "upgrade")
    (folder / "inventory.yml").write_text(inventory_text(), encoding="utf-8")
    await command(env, "inventory", "import", str(folder / "inventory.yml"), "--actor", "bench")
    tokens = await asyncio.gather(*(command(env, "runners", "create", host) for host in HOSTS))
    return {host: token.strip() for host, token in zip(HOSTS, tokens, strict=True)}


@dataclass(frozen=True)
class Lab:
    """A configuration's running processes: the replicas' addresses and the stand-in's."""

    bases: list[str]
    github_url: str
    private_key: str
    database: Database


async def start_stand_in(
    fleet: Fleet, folder: Path, manifest: str = MANIFEST, file: str = "scaleout.yml"
) -> tuple[str, str]:
    """The stand-in serving ``manifest`` (as ``file``) at every commit of :data:`REPO`; its URL and the
    App's key."""
    private_key, public_key = generate_app_key()
    (folder / "app.pub").write_text(public_key, encoding="utf-8")
    (folder / "workflows").mkdir()
    (folder / "workflows" / file).write_text(manifest, encoding="utf-8")
    argv = [sys.executable, "-m", "kerrigan.testing.github", "--public-key", str(folder / "app.pub")]
    argv += ["--app-id", APP_ID, "--repository", REPO, "--workflows", str(folder / "workflows")]
    github = await fleet.start("github", 0, argv, os.environ, stdout_pipe=True)
    assert github.stdout is not None
    line = await fleet.watched(asyncio.wait_for(github.stdout.readline(), 30))
    return line.decode().strip(), private_key


@contextlib.asynccontextmanager
async def lab(
    fleet: Fleet, folder: Path, database_url: str, replicas: int, workers: int
) -> AsyncIterator[Lab]:
    """Everything of one configuration running; every process stopped on the way out (killed, with its
    group, on a failure or Ctrl-C)."""
    try:
        async with _started(fleet, folder, database_url, replicas, workers) as running:
            yield running
    except BaseException:
        await fleet.kill()
        raise
    await fleet.stop()


@contextlib.asynccontextmanager
async def _started(
    fleet: Fleet, folder: Path, database_url: str, replicas: int, workers: int
) -> AsyncIterator[Lab]:
    github_url, private_key = await start_stand_in(fleet, folder)
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
        "KERRIGAN_PUBLIC_URL": bases[0],  # as behind one load balancer: every replica links alike
        "KERRIGAN_WORKERS": "none",
    }
    tokens = await fleet.watched(prepare_lab(env, folder))
    for n, port in enumerate(ports, 1):
        await fleet.start(f"serve-{n}", 1, kerrigan_argv("serve"), {**env, "KERRIGAN_PORT": str(port)})
    for n in range(1, workers + 1):
        await fleet.start(f"worker-{n}", 1, kerrigan_argv("worker"), env)
    await fleet.watched(asyncio.gather(*(wait_ready(base, timeout=60) for base in bases)))
    for n, (host, token) in enumerate(tokens.items()):
        await fleet.start(
            f"runner-{host}",
            2,
            kerrigan_argv(
                "runner",
                "--server",
                bases[n % len(bases)],
                "--host-id",
                host,
                "--work-dir",
                str(folder / host),
                "--free-space-floor-bytes",
                "0",
                "--systemd-scope",
                "never",
                "--isolation",
                "off",
            ),
            {**env, "KERRIGAN_RUNNER_TOKEN": token},
        )
    database = Database.connect(database_url)
    try:
        await fleet.watched(wait_online(database, timeout=60))
        yield Lab(bases, github_url, private_key, database)
    finally:
        await database.close()


async def wait_online(database: Database, timeout: float) -> None:
    """Until every runner host has sent a heartbeat."""
    deadline = time.monotonic() + timeout
    while True:
        async with database.sessions() as session:
            seen = await session.scalar(
                select(func.count()).where(RunnerHostRow.last_heartbeat_at.is_not(None))
            )
        if seen == len(HOSTS):
            return
        if time.monotonic() > deadline:
            raise BenchError(f"only {seen} of {len(HOSTS)} runner hosts reported within {timeout:.0f} s")
        await asyncio.sleep(0.2)


# -- deliveries --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """One signed delivery, made before the clock starts so that sending costs only the request."""

    kind: str
    body: bytes
    headers: dict[str, str]
    sha: str | None = None  # of a push making a job


def deliveries(count: int, prefix: str, *, kinds: Sequence[str] = MIX) -> list[Delivery]:
    """``count`` deliveries of the mix, delivery ids ``<prefix><n>``."""
    made = []
    for n in range(count):
        kind = kinds[n % len(kinds)]
        sha = f"{n:040x}"
        if kind == JOB_PUSH:
            event, payload = "push", push_payload(REPO, sha)
        elif kind == OTHER_BRANCH:
            event, payload = "push", push_payload(REPO, sha, ref="refs/heads/feature")
        else:
            event = "star"
            payload = {
                "action": "created",
                "starred_at": "2024-01-01T00:00:00Z",
                "installation": {"id": 1},
                "repository": {"full_name": REPO},
                "sender": {"login": "octocat", "type": "User"},
            }
        body = json.dumps(payload).encode()
        made.append(
            Delivery(
                kind,
                body,
                signed_headers(SECRET, event, body, f"{prefix}{n}"),
                sha if kind == JOB_PUSH else None,
            )
        )
    return made


@dataclass
class Sent:
    """What the sender saw."""

    due: list[float] = field(default_factory=list)  # ms from due to answer
    service: list[float] = field(default_factory=list)  # ms from send to answer
    late: list[float] = field(default_factory=list)  # ms a send started after its due time
    refused: Counter[str] = field(default_factory=Counter)  # answers other than 202, by status
    rate: float = 0.0
    started: datetime = field(default_factory=lambda: datetime.now(UTC))  # the first delivery's due time
    ended: datetime = field(default_factory=lambda: datetime.now(UTC))  # the last answer


async def send(
    http: aiohttp.ClientSession, bases: Sequence[str], batch: Sequence[Delivery], rate: float
) -> Sent:
    """Post ``batch`` at ``rate`` a second on a fixed schedule, to the replicas in turn (open loop)."""
    sent = Sent()
    loop = asyncio.get_running_loop()
    urls = [f"{base}/webhooks/github" for base in bases]

    async def one(n: int, delivery: Delivery, due: float) -> None:
        began = loop.time()
        try:
            async with http.post(
                urls[n % len(urls)], data=delivery.body, headers=delivery.headers
            ) as response:
                await response.read()
                status = str(response.status)
        except aiohttp.ClientError as exc:
            status = type(exc).__name__
        answered = loop.time()
        sent.due.append((answered - due) * 1000)
        sent.service.append((answered - began) * 1000)
        sent.late.append((began - due) * 1000)
        if status != "202":
            sent.refused[status] += 1

    tasks = []
    sent.started = datetime.now(UTC)
    start = loop.time() + 0.01
    for n, delivery in enumerate(batch):
        due = start + n / rate
        if (delay := due - loop.time()) > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(n, delivery, due)))
    last_sent = loop.time()
    await asyncio.gather(*tasks)
    sent.ended = datetime.now(UTC)
    sent.rate = (len(batch) - 1) / (last_sent - start) if len(batch) > 1 and last_sent > start else 0.0
    return sent


async def pending(database: Database) -> int:
    """Deliveries stored and not yet processed."""
    async with database.sessions() as session:
        count = await session.scalar(select(func.count()).where(DeliveryRow.processed_at.is_(None)))
    return int(count or 0)


async def drain(database: Database, timeout: float) -> bool:
    """Until no delivery waits (``False`` when ``timeout`` seconds pass first)."""
    deadline = time.monotonic() + timeout
    while await pending(database):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.1)
    return True


async def sample_leases(database: Database, seen: set[tuple[str, frozenset[int]]]) -> None:
    """Until cancelled, look for a device held by two jobs at once (leased, accepted or running)."""
    holding = [state.value for state in HOLDING_A_DEVICE]
    while True:
        async with database.sessions() as session:
            rows = (
                await session.execute(
                    select(JobRow.device_id, JobRow.pk).where(
                        JobRow.state.in_(holding), JobRow.device_id.is_not(None)
                    )
                )
            ).all()
        by_device: dict[str, set[int]] = {}
        for device, pk in rows:
            by_device.setdefault(str(device), set()).add(int(pk))
        seen.update((device, frozenset(jobs)) for device, jobs in by_device.items() if len(jobs) > 1)
        await asyncio.sleep(LEASE_SAMPLE_S)


# -- figures -----------------------------------------------------------------------------------------------


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank); 0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@dataclass
class Figures:
    """One configuration's measurements."""

    replicas: int
    workers: int
    sent: Sent
    count: int
    processed_in_window: int = 0
    processed: int = 0
    last_processed_s: float = 0.0  # after the first delivery was due
    window_s: float = 0.0
    claimed_again: int = 0
    failed_deliveries: int = 0
    sessions: int = 0
    duplicate_sessions: int = 0
    jobs: int = 0
    jobs_in_window: int = 0
    jobs_finished: int = 0
    jobs_not_succeeded: Counter[str] = field(default_factory=Counter)
    duplicate_jobs: int = 0
    check_runs: int = 0
    check_runs_within_s: float = 0.0  # from the first delivery's due time to the count
    duplicate_check_runs: int = 0
    overlapping_jobs: int = 0
    double_leases: set[tuple[str, frozenset[int]]] = field(default_factory=set)
    drained: bool = True
    killed: list[str] = field(default_factory=list)
    stop_s: dict[str, float] = field(default_factory=dict)
    log_notes: dict[str, LogNotes] = field(default_factory=dict)

    @property
    def processed_per_s(self) -> float:
        """Deliveries processed a second, from the first due to the last processed."""
        return self.processed / self.last_processed_s if self.last_processed_s > 0 else 0.0

    @property
    def jobs_per_s(self) -> float:
        """Jobs finished a second while deliveries were sent."""
        return self.jobs_in_window / self.window_s if self.window_s > 0 else 0.0

    @property
    def duplicates(self) -> int:
        """Every duplicate seen."""
        return (
            self.claimed_again
            + self.duplicate_sessions
            + self.duplicate_jobs
            + self.duplicate_check_runs
            + self.overlapping_jobs
            + len(self.double_leases)
        )


async def measure(figures: Figures, database: Database) -> None:
    """Read the deliveries, sessions and jobs the run left in the database."""
    started, ended = figures.sent.started, figures.sent.ended
    figures.window_s = (ended - started).total_seconds()
    async with database.sessions() as session:
        delivered = (
            await session.execute(
                select(DeliveryRow.processed_at, DeliveryRow.attempts, DeliveryRow.error).where(
                    DeliveryRow.delivery_id.startswith(RUN)
                )
            )
        ).all()
        sessions = (
            await session.execute(select(SessionRow.repository, SessionRow.head_sha, SessionRow.workflow))
        ).all()
        jobs = (
            await session.execute(
                select(
                    JobRow.pk,
                    JobRow.session_pk,
                    JobRow.task_id,
                    JobRow.attempt,
                    JobRow.device_id,
                    JobRow.state,
                    JobRow.reason,
                    JobRow.started_at,
                    JobRow.finished_at,
                )
            )
        ).all()
    done = [row.processed_at for row in delivered if row.processed_at is not None]
    figures.processed = len(done)
    figures.processed_in_window = sum(1 for at in done if at <= ended)
    figures.last_processed_s = (max(done) - started).total_seconds() if done else 0.0
    figures.claimed_again = sum(1 for row in delivered if row.attempts > 1)
    figures.failed_deliveries = sum(1 for row in delivered if row.error is not None)
    figures.sessions = len(sessions)
    figures.duplicate_sessions = sum(n - 1 for n in Counter(tuple(row) for row in sessions).values())
    figures.jobs = len(jobs)
    figures.duplicate_jobs = sum(
        n - 1 for n in Counter((row.session_pk, row.task_id, row.attempt) for row in jobs).values()
    )
    ended_jobs = [row for row in jobs if row.state in FINISHED and row.finished_at is not None]
    figures.jobs_finished = len(ended_jobs)
    figures.jobs_in_window = sum(1 for row in ended_jobs if started <= row.finished_at <= ended)
    figures.jobs_not_succeeded = Counter(
        f"{row.state} {row.reason}" for row in ended_jobs if row.state != "succeeded"
    )
    figures.overlapping_jobs = overlaps(jobs)


def overlaps(jobs: Sequence[Any]) -> int:
    """Jobs that started on a device before the job before them there had ended."""
    by_device: dict[str, list[tuple[datetime, datetime | None]]] = {}
    for row in jobs:
        if row.device_id is not None and row.started_at is not None:
            by_device.setdefault(row.device_id, []).append((row.started_at, row.finished_at))
    found = 0
    for spans in by_device.values():
        spans.sort(key=lambda span: span[0])
        for (_, end), (begin, _) in itertools.pairwise(spans):
            found += end is None or begin < end
    return found


async def count_check_runs(figures: Figures, running: Lab, shas: Sequence[str]) -> None:
    """The check runs the stand-in holds at each pushed commit, asked as the App; a (repository, head_sha,
    name) created more than once is a duplicate."""
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.post(
            f"{running.github_url}/app/installations/1/access_tokens",
            headers={"Authorization": f"Bearer {app_jwt(APP_ID, running.private_key, time.time())}"},
        ) as minted:
            if minted.status != 201:
                raise BenchError(
                    f"the stand-in refused the App a token: {minted.status} {await minted.text()}"
                )
            token = (await minted.json())["token"]
        gate = asyncio.Semaphore(8)

        async def names_at(sha: str) -> list[str]:
            async with (
                gate,
                http.get(
                    f"{running.github_url}/repos/{REPO}/commits/{sha}/check-runs",
                    params={"filter": "all", "per_page": "100"},
                    headers={"Authorization": f"token {token}"},
                ) as listed,
            ):
                if listed.status != 200:
                    raise BenchError(
                        f"listing the check runs at {sha}: {listed.status} {await listed.text()}"
                    )
                return [run["name"] for run in (await listed.json())["check_runs"]]

        found = await asyncio.gather(*(names_at(sha) for sha in shas))
    figures.check_runs = sum(len(names) for names in found)
    figures.check_runs_within_s = (datetime.now(UTC) - figures.sent.started).total_seconds()
    figures.duplicate_check_runs = sum(n - 1 for names in found for n in Counter(names).values())


_PROBLEM = re.compile(r"\b(ERROR|CRITICAL)\b|^Traceback|\[(error|critical) *\]")
_WARNING = re.compile(r"\bWARNING\b|\[warning *\]")
_STAMP = re.compile(r"^\S+ \S+ ")  # the time at the start of a text log line, so alike lines read alike
_WEBHOOK = "POST /webhooks/github"


@dataclass
class LogNotes:
    """What one process's log says: errors, warnings, a few distinct error lines, and (from a JSON access
    log that times its requests) how long the server took over each webhook."""

    errors: int = 0
    warnings: int = 0
    lines: list[str] = field(default_factory=list)
    webhook_ms: list[float] = field(default_factory=list)

    def error(self, shown: str) -> None:
        self.errors += 1
        if len(self.lines) < 3 and shown not in self.lines:
            self.lines.append(shown)


def read_log(path: Path) -> LogNotes:
    """One log, in text lines or JSON objects, a line each."""
    notes = LogNotes()
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        entry = _json_line(line)
        if entry is None:
            if _PROBLEM.search(line):
                notes.error(_STAMP.sub("", line)[:160])
            elif _WARNING.search(line):
                notes.warnings += 1
            continue
        level = str(entry.get("level", "")).lower()
        if level in ("error", "critical") or "exception" in entry:
            notes.error(f"{entry.get('logger', '')}: {entry.get('event', '')}"[:160])
        elif level == "warning":
            notes.warnings += 1
        measured = str(entry.get("delivery_id", RUN)).startswith(RUN)  # not the warm-up's
        if (
            measured
            and str(entry.get("event", "")).startswith(_WEBHOOK)
            and isinstance(entry.get("ms"), int | float)
        ):
            notes.webhook_ms.append(float(entry["ms"]))
    return notes


def _json_line(line: str) -> dict[str, Any] | None:
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def read_logs(folder: Path) -> dict[str, LogNotes]:
    """Every process's log in ``folder``, by process name."""
    return {path.stem: read_log(path) for path in sorted(folder.glob("*.log"))}


# -- one configuration -------------------------------------------------------------------------------------


async def run_configuration(args: argparse.Namespace, replicas: int, logs: Path) -> Figures:
    """Start a configuration, send its deliveries, measure, stop it."""
    count = max(2, round(args.rate * args.duration))
    warm = deliveries(max(2, round(min(args.rate, 100.0) * 0.5)), "warm-", kinds=(IGNORED,))
    batch = deliveries(count, RUN)
    logs.mkdir(parents=True, exist_ok=True)
    fleet = Fleet(logs)
    with tempfile.TemporaryDirectory(prefix="kerrigan-scaleout-") as tmp:
        async with (
            fresh_database(args.postgres) as url,
            lab(fleet, Path(tmp), url, replicas, args.workers) as running,
        ):
            figures = await fleet.watched(exercise(args, running, replicas, warm, batch))
            if died := fleet.dead():
                raise ProcessDiedError(", ".join(died))
    figures.killed = fleet.killed
    figures.stop_s = fleet.stop_s
    figures.log_notes = read_logs(logs)
    return figures


async def exercise(
    args: argparse.Namespace, running: Lab, replicas: int, warm: Sequence[Delivery], batch: Sequence[Delivery]
) -> Figures:
    """Warm up, send the measured deliveries while watching the leases, let the workers catch up, count."""
    connector = aiohttp.TCPConnector(limit=512)
    async with aiohttp.ClientSession(connector=connector) as http:
        # Not measured: the replicas' connection pools and caches fill, the workers start claiming.
        await send(http, running.bases, warm, min(args.rate, 100.0))
        await drain(running.database, timeout=30)
        double: set[tuple[str, frozenset[int]]] = set()
        sampler = asyncio.create_task(sample_leases(running.database, double))
        try:
            sent = await send(http, running.bases, batch, args.rate)
            # The workers may fall behind the sender: what they did not process within this long is
            # reported as such, and the duplicates are counted over what they did.
            drained = await drain(running.database, timeout=max(30.0, 4 * args.duration))
        finally:
            sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sampler
    figures = Figures(replicas, args.workers, sent, len(batch), double_leases=double, drained=drained)
    await measure(figures, running.database)
    await count_check_runs(figures, running, [d.sha for d in batch if d.sha is not None])
    return figures


# -- report ------------------------------------------------------------------------------------------------


def report(figures: Figures, args: argparse.Namespace) -> None:
    """One configuration's figures."""
    sent = figures.sent
    kinds = Counter(MIX)
    mix = ", ".join(f"{100 * kinds[kind] // len(MIX)}% {kind}" for kind in (JOB_PUSH, OTHER_BRANCH, IGNORED))
    print(
        f"{figures.replicas} replica{'s' if figures.replicas > 1 else ''}, {figures.workers} workers, "
        f"{len(HOSTS)} runner hosts ({len(HOSTS) * DEVICES_PER_HOST} devices): {figures.count} deliveries "
        f"at {args.rate:g}/s for {args.duration:g} s ({mix})"
    )
    refused = ", ".join(f"{n} answered {status}" for status, n in sent.refused.items()) or "all answered 202"
    late = sum(1 for ms in sent.late if ms > LATE_MS)
    print(
        f"  sender: {sent.rate:.0f}/s achieved; {refused}; {late} sent over {LATE_MS:g} ms after due "
        f"(max {max(sent.late, default=0):.0f} ms)"
    )
    print(
        f"  webhook ack from due: p50 {percentile(sent.due, 0.5):.1f} ms, "
        f"p99 {percentile(sent.due, 0.99):.1f} ms, "
        f"max {max(sent.due, default=0):.0f} ms; from send: p50 {percentile(sent.service, 0.5):.1f} ms, "
        f"p99 {percentile(sent.service, 0.99):.1f} ms"
    )
    behind = "" if figures.drained else " (NOT drained: the workers did not catch up)"
    print(
        f"  deliveries processed: {figures.processed_in_window} while sending "
        f"({figures.processed_in_window / figures.window_s if figures.window_s else 0:.0f}/s), "
        f"{figures.processed} of {figures.count} by {figures.last_processed_s:.1f} s after the first was "
        "due: "
        f"{figures.processed_per_s:.0f}/s{behind}; {figures.failed_deliveries} recorded an error"
    )
    unsuccessful = ", ".join(f"{n} {what}" for what, n in figures.jobs_not_succeeded.items()) or "none"
    print(
        f"  jobs: {figures.jobs} made from {figures.sessions} sessions, {figures.jobs_in_window} finished "
        f"while sending ({figures.jobs_per_s:.1f}/s), {figures.jobs_finished} by the end; not succeeded: "
        f"{unsuccessful}"
    )
    print(
        f"  check runs at the stand-in: {figures.check_runs} for {figures.sessions} sessions, created within "
        f"{figures.check_runs_within_s:.0f} s of the first delivery (GitHub allows an installation 80 "
        "content-creating requests a minute)"
    )
    print(
        f"  duplicates: deliveries claimed more than once {figures.claimed_again}, sessions for one push "
        f"{figures.duplicate_sessions}, check runs for one (repository, head_sha, name) "
        f"{figures.duplicate_check_runs}, jobs for one session task {figures.duplicate_jobs}, devices held "
        f"by two jobs at once {len(figures.double_leases)} (sampled) / {figures.overlapping_jobs} (start and "
        "end times)"
    )
    slow = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in figures.stop_s.items() if seconds > 2)
    if slow:
        print(f"  slow to stop after SIGTERM: {slow}")
    if figures.killed:
        print(f"  did not stop within {STOP_S:.0f} s of SIGTERM (killed): {', '.join(figures.killed)}")
    timed = [ms for notes in figures.log_notes.values() for ms in notes.webhook_ms]
    if timed:
        print(
            f"  the servers' own time over a webhook (access logs): p50 {percentile(timed, 0.5):.1f} ms, "
            f"p99 {percentile(timed, 0.99):.1f} ms, max {max(timed):.0f} ms"
        )
    quiet = [name for name, notes in figures.log_notes.items() if not notes.errors and not notes.warnings]
    for name, notes in figures.log_notes.items():
        if notes.errors or notes.warnings:
            print(f"  log {name}: {notes.errors} errors, {notes.warnings} warnings")
            for line in notes.lines:
                print(f"    {line}")
    if quiet:
        print(f"  logs without errors or warnings: {', '.join(quiet)}")


def summary(results: Sequence[Figures], args: argparse.Namespace) -> None:
    """The configurations side by side, the ratio and the issue's target."""
    print()
    print(
        f"{'':>12} {'sent/s':>8} {'ack p50':>8} {'ack p99':>8} {'processed/s':>12} {'jobs/s':>7} "
        f"{'duplicates':>11}"
    )
    for figures in results:
        print(
            f"{figures.replicas:>3} replica{'s' if figures.replicas > 1 else ' '} {figures.sent.rate:>8.0f} "
            f"{percentile(figures.sent.due, 0.5):>8.1f} {percentile(figures.sent.due, 0.99):>8.1f} "
            f"{figures.processed_per_s:>12.0f} {figures.jobs_per_s:>7.1f} {figures.duplicates:>11}"
        )
    if len(results) == 2:
        many, one = results

        def ratio(a: float, b: float) -> str:
            return f"{a / b:.2f}" if b else "n/a"

        print(
            f"ratio {many.replicas} replicas / 1: processed/s "
            f"{ratio(many.processed_per_s, one.processed_per_s)}, "
            f"jobs/s {ratio(many.jobs_per_s, one.jobs_per_s)}, ack p99 "
            f"{ratio(percentile(many.sent.due, 0.99), percentile(one.sent.due, 0.99))}"
        )
    scaled = results[0]
    p99 = percentile(scaled.sent.due, 0.99)
    met = p99 <= TARGET_P99_MS and scaled.sent.rate >= 0.95 * TARGET_RATE and scaled.duplicates == 0
    judged = not args.quick and args.rate >= TARGET_RATE and scaled.replicas == 2
    verdict = (
        ("met" if met else "NOT met") if judged else "not judged (the run was not 2 replicas at 1,000/s)"
    )
    print(
        f"target (issue 14): with 2 replicas, webhook p99 <= {TARGET_P99_MS:.0f} ms at {TARGET_RATE:,.0f} "
        f"deliveries/s, 0 duplicates: {verdict}; measured p99 {p99:.1f} ms at {scaled.sent.rate:.0f}/s sent, "
        f"{scaled.duplicates} duplicates ({len(os.sched_getaffinity(0))} CPUs for every process)"
    )


async def run(args: argparse.Namespace, logs: Path) -> int:
    """Every configuration in turn; the exit status."""
    results = []
    for replicas in dict.fromkeys((args.replicas, 1)):
        folder = logs / f"{replicas}-replicas"
        try:
            figures = await run_configuration(args, replicas, folder)
        except BenchError as exc:
            died = "a process died: " if isinstance(exc, ProcessDiedError) else ""
            print(f"{replicas} replica(s): {died}{exc}")
            for name, notes in read_logs(folder).items():
                for line in notes.lines:
                    print(f"  log {name}: {line}")
            return 1
        report(figures, args)
        results.append(figures)
    summary(results, args)
    failed = any(f.duplicates or f.sent.refused for f in results)
    return 1 if failed else 0


def main() -> None:
    """Parse the options and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 deliveries/s for 3 s a configuration")
    parser.add_argument("--rate", type=float, help="deliveries a second (default 1000; 50 with --quick)")
    parser.add_argument("--duration", type=float, help="seconds of deliveries (default 10; 3 with --quick)")
    parser.add_argument("--replicas", type=int, default=2, help="kerrigan serve replicas, then 1 (default 2)")
    parser.add_argument("--workers", type=int, default=2, help="kerrigan worker processes (default 2)")
    parser.add_argument(
        "--postgres",
        default="postgresql://postgres@127.0.0.1:5432",
        help="the PostgreSQL server, without a database name (default: %(default)s)",
    )
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = parser.parse_args()
    if args.rate is None:
        args.rate = 50.0 if args.quick else TARGET_RATE
    if args.duration is None:
        args.duration = 3.0 if args.quick else 10.0
    for name in ("rate", "duration"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name} must be positive")
    if not 1 <= args.replicas <= 8:
        parser.error("--replicas must be from 1 to 8")
    if not 0 <= args.workers <= 16:
        parser.error("--workers must be from 0 to 16")
    began = time.monotonic()
    status = 1
    try:
        with tempfile.TemporaryDirectory(prefix="kerrigan-scaleout-logs-") as tmp:
            status = asyncio.run(run(args, args.logs or Path(tmp)))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        status = 130
    finally:
        kill_leftovers()
    print(f"(the run took {time.monotonic() - began:.0f} s)")
    raise SystemExit(status)


if __name__ == "__main__":
    main()
