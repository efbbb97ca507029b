"""Time dispatch: one decision over 10,000 queued jobs, and jobs dispatched per second through the database.

The decision is :func:`kerrigan.core.dispatch_order.plan_dispatch` (the pure part of a dispatch round):
10,000 queued jobs over 50 repositories competing for 2,000 devices. Baseline in the same run: sorting the
10,000 jobs once by arrival, the least any ordering costs. Also shown: the decision plus every waiting
job's queue position, which the plan ranks only when first asked. Target (issue 5): at most 20 ms per
dispatch decision.

Gangs (issue 15): the same decision when 1,000 of the 10,000 jobs are two-device gang tasks (a ``dut`` and
a ``peer``, each matching 12 devices over 3 runner hosts), 2,000 devices on 100 hosts with their vCPU room,
timed against the same queue with each gang replaced by a single-device job (its ``dut`` candidates).
Target: at most 25 ms per decision with gangs.

Boardless jobs (issue 26): the same lab and queue with 1,000 of the 10,000 jobs a build with ``board: none``
whose candidates are every one of the 100 runner hosts (a task that names no ``kerrigan.host``), placed on
the host with the most room whether or not a device is free; timed against the queue with each such job a
single-device job instead. Target: at most 25 ms per decision with them.

End to end, :meth:`kerrigan.dispatch.dispatcher.Dispatcher.dispatch_once` runs against a real SQLite
database file and, when ``KERRIGAN_TEST_POSTGRES_URL`` (or ``--postgres``) names a server, against a
PostgreSQL database of its own, created and dropped here. The same 10,000 jobs (2,500 four-task sessions
over 50 repositories) queue for a synthetic lab of 2,000 devices; between timed rounds every leased job
ends and frees its device, untimed. Jobs per second counts the leases each round granted over its time.

    python benchmarks/bench_dispatch.py
    python benchmarks/bench_dispatch.py --quick
    python benchmarks/bench_dispatch.py --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import delete, func, select, text, update
from sqlalchemy.engine import make_url

from kerrigan.core.dispatch_order import DispatchPlan, QueuedJob, plan_dispatch
from kerrigan.core.gang import Role
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.lifecycle import JobState
from kerrigan.core.manifest import Priority
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, create_engine, upgrade
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.agents_spoke import hear_hosts
from kerrigan.testing.labs import FORM_FACTORS, SDKS, synthetic_lab

POSTGRES_ENV = "KERRIGAN_TEST_POSTGRES_URL"
TARGET_MS = 20
GANG_TARGET_MS = 25
HOSTS = 100
REPOSITORIES = 50
TASKS_PER_SESSION = 4


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


def gang_queue(
    jobs: int, gangs: int, devices: int, *, seed: int = 7
) -> tuple[list[QueuedJob], list[QueuedJob], dict[str, str]]:
    """A busy lab on :data:`HOSTS` runner hosts, each with two board families of 10 devices: the queue
    with ``gangs`` two-role gang jobs among ``jobs``, the same queue with each gang a single-device job
    instead, and the device-to-host map. A gang's ``dut`` matches 4 devices of the first family on each of
    3 hosts, its ``peer`` 4 of the second family on the same hosts."""
    rng = random.Random(seed)
    per_host = devices // HOSTS
    half = per_host // 2
    names = [f"dev-{n:05d}" for n in range(devices)]
    hosts = {name: f"host-{n // per_host:03d}" for n, name in enumerate(names)}
    families = [names[start : start + 8] for start in range(0, devices, 8)]
    gang_at = set(rng.sample(range(jobs), gangs))
    with_gangs: list[QueuedJob] = []
    singles_only: list[QueuedJob] = []
    for n in range(jobs):
        single = QueuedJob(
            id=f"job-{n:06d}",
            repository=f"octo/repo-{rng.randrange(REPOSITORIES):02d}",
            session_id=f"s-{n // 3:06d}",
            priority=rng.choice([Priority.NORMAL] * 8 + [Priority.GATE, Priority.BACKGROUND]),
            ready_at=rng.uniform(0, 600),
            candidates=tuple(rng.choice(families)),
            vcpus=rng.choice([1, 2, 2, 4]),
            arrival=n,
        )
        if n not in gang_at:
            with_gangs.append(single)
            singles_only.append(single)
            continue
        starts = [host * per_host for host in rng.sample(range(HOSTS), 3)]
        dut = tuple(names[start + slot] for start in starts for slot in rng.sample(range(half), 4))
        peer = tuple(names[start + slot] for start in starts for slot in rng.sample(range(half, per_host), 4))
        with_gangs.append(
            dataclasses.replace(single, candidates=(), roles=(Role("dut", dut), Role("peer", peer)))
        )
        singles_only.append(dataclasses.replace(single, candidates=dut))
    return with_gangs, singles_only, hosts


def bench_gang_decision(*, quick: bool) -> None:
    """Time ``plan_dispatch`` with gang jobs in the queue, against the same queue of single-device jobs."""
    jobs_count, gangs, repeat = (1_000, 100, 3) if quick else (10_000, 1_000, 21)
    with_gangs, singles_only, hosts = gang_queue(jobs_count, gangs, 2_000)
    rng = random.Random(11)
    room = {job.session_id: 2 for job in with_gangs}
    host_room = {host: rng.randint(2, 28) for host in sorted(set(hosts.values()))}
    for free_count in (20, 200):
        free = set(rng.sample(sorted(hosts), free_count))

        def decide(queue: list[QueuedJob], free: set[str] = free) -> DispatchPlan:
            return plan_dispatch(
                queue,
                now=700.0,
                free_devices=free,
                session_room=room,
                last_dispatch={},
                device_hosts=hosts,
                host_room=host_room,
            )

        plan = decide(with_gangs)
        singles_ms = median_ms(lambda: decide(singles_only), repeat)
        gangs_ms = median_ms(lambda: decide(with_gangs), repeat)
        print(
            f"{jobs_count} jobs ({gangs} two-device gangs), {free_count} free devices on {HOSTS} hosts: "
            f"decision {gangs_ms:.1f} ms (single-device jobs only: {singles_ms:.1f} ms, "
            f"{gangs_ms / singles_ms:.2f}x), {len(plan.gangs)} gangs started"
        )
        if not quick:
            met = gangs_ms <= GANG_TARGET_MS
            print(
                f"{'met ' if met else 'MISSED'} a dispatch decision with gangs in at most {GANG_TARGET_MS} ms"
            )


def bench_boardless_decision(*, quick: bool) -> None:
    """Time ``plan_dispatch`` with boardless jobs in the queue (every host a candidate), against the same
    queue with each of them a single-device job."""
    jobs_count, builds, repeat = (1_000, 100, 3) if quick else (10_000, 1_000, 21)
    _, singles_only, hosts = gang_queue(jobs_count, 0, 2_000)
    every_host = tuple(sorted(set(hosts.values())))
    rng = random.Random(13)
    build_at = set(rng.sample(range(jobs_count), builds))
    with_builds = [
        dataclasses.replace(job, candidates=(), hosts=every_host, boardless=True) if n in build_at else job
        for n, job in enumerate(singles_only)
    ]
    room = {job.session_id: 2 for job in with_builds}
    host_room = {host: rng.randint(2, 28) for host in every_host}
    for free_count in (20, 200):
        free = set(rng.sample(sorted(hosts), free_count))

        def decide(queue: list[QueuedJob], free: set[str] = free) -> DispatchPlan:
            return plan_dispatch(
                queue,
                now=700.0,
                free_devices=free,
                session_room=room,
                last_dispatch={},
                device_hosts=hosts,
                host_room=host_room,
            )

        plan = decide(with_builds)
        singles_ms = median_ms(lambda: decide(singles_only), repeat)
        builds_ms = median_ms(lambda: decide(with_builds), repeat)
        print(
            f"{jobs_count} jobs ({builds} boardless, each of {HOSTS} hosts a candidate), "
            f"{free_count} free devices: decision {builds_ms:.1f} ms "
            f"(single-device jobs only: {singles_ms:.1f} ms, {builds_ms / singles_ms:.2f}x), "
            f"{len(plan.placed)} boardless placed"
        )
        if not quick:
            met = builds_ms <= GANG_TARGET_MS
            print(
                f"{'met ' if met else 'MISSED'} a dispatch decision with boardless jobs in at most "
                f"{GANG_TARGET_MS} ms"
            )


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


def bench_decision(*, quick: bool) -> None:
    """Time ``plan_dispatch`` alone, against sorting the queue by arrival, and print the figures."""
    jobs_count, repeat = (1_000, 3) if quick else (10_000, 21)
    jobs, devices = queue(jobs_count, REPOSITORIES, 2_000)
    rng = random.Random(5)
    for free_count in (20, 200):
        free = set(rng.sample(devices, free_count))
        room = {job.session_id: 2 for job in jobs}

        def decide(free: set[str] = free, room: dict[str, int] = room) -> object:
            return plan_dispatch(jobs, now=700.0, free_devices=free, session_room=room, last_dispatch={})

        def decide_and_rank(free: set[str] = free, room: dict[str, int] = room) -> object:
            return tuple(
                plan_dispatch(jobs, now=700.0, free_devices=free, session_room=room, last_dispatch={}).order
            )

        plan = plan_dispatch(jobs, now=700.0, free_devices=free, session_room=room, last_dispatch={})
        baseline = median_ms(lambda: sorted(jobs, key=_arrival), repeat)
        decision = median_ms(decide, repeat)
        ranked = median_ms(decide_and_rank, repeat)
        print(
            f"{len(jobs)} jobs, {free_count} free devices: decision {decision:.1f} ms "
            f"(baseline sort {baseline:.1f} ms, {decision / baseline:.1f}x; with every queue position "
            f"{ranked:.1f} ms), {len(plan.assignments)} dispatched"
        )
        if not quick:
            met = decision <= TARGET_MS
            print(f"{'met ' if met else 'MISSED'} a dispatch decision in at most {TARGET_MS} ms")


@dataclass(frozen=True, slots=True)
class RoundFigure:
    """One timed dispatch round."""

    queued: int
    granted: int
    seconds: float


async def fill(database: Database, lab: Inventory, sessions: int) -> None:
    """Write the lab and queue ``sessions`` four-task sessions, each repository wanting one SDK and form
    factor (so about a twelfth of the lab suits each), a tenth of them gates and a tenth background."""
    async with database.sessions() as session, session.begin():
        await apply_diff(session, lab, diff_inventories(Inventory(), lab), Change("bench", database.clock()))
    await hear_hosts(database)  # a host is offline until its agent speaks (issue 28): the lab's agents run
    async with database.sessions() as session, session.begin():
        for n in range(sessions):
            repository = n % REPOSITORIES
            requested = {
                "labels": {
                    "sdk": [SDKS[repository % len(SDKS)]],
                    "form_factor": [FORM_FACTORS[repository % len(FORM_FACTORS)]],
                }
            }
            tasks = {f"task-{t}": requested for t in range(TASKS_PER_SESSION)}
            resolution = {
                "tasks": [{"id": task, "requested": requested} for task in tasks],
                "scheduling": {"max_devkits": TASKS_PER_SESSION},
            }
            new = builders.session(
                str(uuid.UUID(int=n + 1)),
                tasks,
                repository=f"octo/repo-{repository:02d}",
                resolution=resolution,
            )
            priority = {0: Priority.GATE, 1: Priority.BACKGROUND}.get(n % 10, Priority.NORMAL)
            await create_session(session, dataclasses.replace(new, priority=priority.value), database.clock())


async def finish_leased(database: Database) -> None:
    """Every leased job ends and frees its device, as if its runner host had reported it done."""
    ended = database.clock()
    async with database.sessions() as session, session.begin():
        await session.execute(delete(DeviceLeaseRow))
        await session.execute(
            update(JobRow)
            .where(JobRow.state == JobState.LEASED)
            .values(state=JobState.SUCCEEDED, finished_at=ended)
        )


async def dispatch_rounds(url: str, lab: Inventory, sessions: int, rounds: int) -> list[RoundFigure]:
    """Queue the jobs on the database at ``url`` and time ``rounds`` dispatch rounds."""
    database = Database.connect(url)
    try:
        await upgrade(database.engine)
        await fill(database, lab, sessions)
        dispatcher = Dispatcher(database)
        figures = []
        for _ in range(rounds):
            async with database.sessions() as session:
                queued = await session.scalar(select(func.count()).where(JobRow.state == JobState.QUEUED))
            start = time.perf_counter()
            done = await dispatcher.dispatch_once()
            figures.append(RoundFigure(queued or 0, len(done.granted), time.perf_counter() - start))
            await finish_leased(database)
        return figures
    finally:
        await database.close()


@asynccontextmanager
async def scratch_postgres(server: str) -> AsyncIterator[str]:
    """A PostgreSQL database of the benchmark's own on ``server`` (so tests' data is never touched), dropped
    afterwards."""
    name = f"kerrigan_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as connection:
            await connection.execute(text(f'CREATE DATABASE "{name}"'))
        try:
            yield make_url(server).set(database=name).render_as_string(hide_password=False)
        finally:
            async with admin.connect() as connection:
                await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


async def on_postgres(server: str, lab: Inventory, sessions: int, rounds: int) -> list[RoundFigure]:
    """:func:`dispatch_rounds` on a scratch database."""
    async with scratch_postgres(server) as url:
        return await dispatch_rounds(url, lab, sessions, rounds)


def bench_end_to_end(*, quick: bool, postgres: str | None) -> None:
    """Time whole dispatch rounds on SQLite (and PostgreSQL) and print jobs dispatched per second."""
    # 12 pools or more: synthetic_lab gives each pool one of the 12 SDK and form factor pairs in turn.
    pools, per_pool, sessions, rounds = (12, 10, 60, 2) if quick else (40, 50, 2_500, 3)
    lab = synthetic_lab(pools, per_pool)
    results: list[tuple[str, list[RoundFigure]]] = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        results.append(("sqlite", asyncio.run(dispatch_rounds(url, lab, sessions, rounds))))
    if postgres:
        results.append(("postgresql", asyncio.run(on_postgres(postgres, lab, sessions, rounds))))
    print(
        f"end to end, {sessions * TASKS_PER_SESSION} jobs for {len(lab.devices)} devices "
        f"(Dispatcher.dispatch_once; leased jobs end between rounds):"
    )
    print(f"{'database':>10} {'round':>5} {'queued':>7} {'dispatched':>10} {'ms':>9} {'jobs/s':>8}")
    for name, figures in results:
        for number, figure in enumerate(figures, 1):
            print(
                f"{name:>10} {number:>5} {figure.queued:>7} {figure.granted:>10} "
                f"{figure.seconds * 1000:>9.1f} {figure.granted / figure.seconds:>8.0f}"
            )
        granted = sum(figure.granted for figure in figures)
        seconds = sum(figure.seconds for figure in figures)
        print(f"{name:>10} {'all':>5} {'':>7} {granted:>10} {seconds * 1000:>9.1f} {granted / seconds:>8.0f}")
        if not granted:  # a round that leased nothing timed no dispatch at all: its figure means nothing
            raise SystemExit(f"{name}: no job was dispatched in {len(figures)} rounds")
    if not postgres:
        print(f"postgresql skipped: set {POSTGRES_ENV} or pass --postgres")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, a small lab, few repeats")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        default=os.environ.get(POSTGRES_ENV),
        help=f"also dispatch on this PostgreSQL server (default: ${POSTGRES_ENV})",
    )
    args = parser.parse_args()
    bench_decision(quick=args.quick)
    bench_gang_decision(quick=args.quick)
    bench_boardless_decision(quick=args.quick)
    bench_end_to_end(quick=args.quick, postgres=args.postgres)


if __name__ == "__main__":
    main()
