"""The failure table, rerun: pushes while GitHub fails, then what users would see.

Kerrigan, runner agents and the GitHub stand-in run in this process on loopback (the harness of
``benchmarks/bench_github_budget.py``, the stand-in's rate limits off: faults are the subject here). Each
push is a commit of 2 workflows with 1 job each. While they run, GitHub answers some requests of every route
Kerrigan and its runners use (check-run creates, updates and lists, manifest reads, token mints, tarball
downloads, token revokes) with 500/502, 429, secondary-rate-limit 403s with and without ``Retry-After``,
acts and then answers 502, drops the connection, or answers slowly: probabilities per route, drawn from a
seed. Printed: check runs per commit and workflow (duplicates), sessions not completed or not shown at the
end (stuck), jobs failed only by a transient GitHub error, sessions where the database and GitHub disagree.
Then: GitHub refusing a session's final update once with 422 (the session must still complete on GitHub).

With PostgreSQL (``--postgres URL`` or ``KERRIGAN_TEST_POSTGRES_URL``; a database of its own is made there
and dropped): ``kerrigan serve`` with two ``kerrigan worker`` processes while GitHub answers slowly
(deliveries processed twice, from sessions per delivery), and one worker killed with SIGKILL while it
holds deliveries (seconds until they are processed; ``KERRIGAN_DELIVERY_LEASE_S`` is set to 6 s here).

    python benchmarks/soak_github_faults.py            # 60 pushes, 10 refused final updates, PostgreSQL
    python benchmarks/soak_github_faults.py --quick    # 12 pushes, 3 refused; PostgreSQL without the kill
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from bench_github_budget import SECRET, Bench, LimitedStandIn, job_outcomes, manifest, started
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.models import DeliveryRow, JobRow, SessionRow
from kerrigan.testing.github import push_payload, signed_headers
from kerrigan.testing.processes import free_port, wait_ready

SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
CHECK_RUN = r"/check-runs/\d+$"


def inject_faults(github: LimitedStandIn) -> None:
    """GitHub's passing failures on every route, each with a probability (the stand-in's seed draws)."""
    inject = github.faults.inject
    retry = {"Retry-After": "1"}
    # At most two secondary limits without Retry-After: each pauses an installation for a minute.
    inject("PATCH", CHECK_RUN, status=403, message=SECONDARY, times=2, probability=0.02)
    routes = {
        ("POST", r"/check-runs$"): 0.04,
        ("PATCH", CHECK_RUN): 0.04,
        ("GET", r"/commits/[^/]+/check-runs$"): 0.08,
        ("GET", r"/contents/"): 0.04,
        ("POST", r"/access_tokens$"): 0.04,
        ("GET", r"/tarball/"): 0.04,
        ("GET", r"^/_codeload/"): 0.04,
        ("DELETE", r"^/installation/token$"): 0.04,
    }
    for (method, path), p in routes.items():
        inject(method, path, status=500, times=None, probability=p)
        inject(method, path, status=502, times=None, probability=p)
        inject(method, path, status=429, headers=retry, times=None, probability=p / 2)
        inject(method, path, status=403, message=SECONDARY, headers=retry, times=None, probability=p / 2)
        inject(method, path, drop=True, times=None, probability=p / 2)
        inject(method, path, delay_s=1.5, times=None, probability=p)
        if method != "GET":  # GitHub did it, and the answer is lost or an error
            inject(method, path, status=502, act_first=True, times=None, probability=p)
            inject(method, path, drop=True, act_first=True, times=None, probability=p / 2)


async def disagreements(bench: Bench) -> tuple[int, int, list[str]]:
    """Sessions not completed or not shown up to date; sessions where GitHub shows another state."""
    async with bench.database.sessions() as session:
        rows = (
            await session.execute(
                select(
                    SessionRow.id,
                    SessionRow.state,
                    SessionRow.conclusion,
                    SessionRow.check_run_id,
                    SessionRow.version,
                    SessionRow.shown_version,
                )
            )
        ).all()
    stuck = sum(1 for row in rows if row.state != "completed" or row.shown_version < row.version)
    differ = []
    for row in rows:
        run = bench.github.check_runs.get(row.check_run_id) if row.check_run_id else None
        if run is None:
            differ.append(f"{row.id[:8]}: no check run")
        elif (run["status"], run.get("conclusion")) != (str(row.state), row.conclusion):
            differ.append(
                f"{row.id[:8]}: {row.state}/{row.conclusion} vs {run['status']}/{run.get('conclusion')}"
            )
    return len(rows), stuck, differ


def duplicates(github: LimitedStandIn) -> tuple[collections.Counter[int], int]:
    """Check runs per commit and name: a histogram, and how many extra runs there are."""
    per = collections.Counter((run["head_sha"], run["name"]) for run in github.check_runs.values())
    return collections.Counter(per.values()), sum(count - 1 for count in per.values())


async def soak(pushes: int, refused_finals: int, seed: int) -> None:
    """The faults table, on SQLite in this process."""
    with tempfile.TemporaryDirectory(prefix="kerrigan-soak-") as name:
        async with started(
            Path(name), 3, workflows=2, jobs=1, seed=seed, limits=False, agent_retry_s=600.0
        ) as bench:
            inject_faults(bench.github)
            print(
                f"== {pushes} pushes (2 workflows, 1 job each) over 3 installations, GitHub failing "
                f"(seed {seed})"
            )
            began = time.perf_counter()
            for index in range(pushes):
                repository, installation = bench.repositories[index % len(bench.repositories)]
                await bench.push(repository, installation, f"{index + 1:040x}")
                await asyncio.sleep(0.25)
            waited = await bench.settled(pushes * 2, 900, progress=True)
            elapsed = time.perf_counter() - began
            hits = collections.Counter()
            for fault in bench.github.faults:
                if fault.hits:
                    what = "drop" if fault.drop else (f"{fault.status}" if fault.status else "slow")
                    what += " after acting" if fault.act_first else ""
                    hits[what] += fault.hits
            bench.github.faults.clear()
            await asyncio.sleep(1.0)
            total, stuck, differ = await disagreements(bench)
            histogram, extra = duplicates(bench.github)
            outcomes = await job_outcomes(bench.database)
            transient = sum(count for state, count in outcomes.items() if state != "succeeded")
            print(
                f"  {'settled' if waited >= 0 else 'NOT SETTLED (900 s)'} after {elapsed:.0f} s; "
                f"{len(bench.github.requests)} requests, faults applied: {dict(sorted(hits.items()))}"
            )
            print(
                f"  check runs per commit and workflow: {dict(sorted(histogram.items()))} "
                f"-> duplicates: {extra}"
            )
            print(f"  sessions: {total}, stuck (not completed, or GitHub behind): {stuck}")
            print(
                f"  jobs: {dict(sorted(outcomes.items()))} "
                f"-> failed only by a transient GitHub error: {transient}"
            )
            print(f"  sessions where the database and GitHub disagree: {len(differ)} {differ[:5]}")
            await refuse_finals(bench, refused_finals, pushes)


async def refuse_finals(bench: Bench, count: int, offset: int) -> None:
    """Sessions whose final update GitHub refuses once with 422: each must still complete on GitHub."""
    bench.files = {".kerrigan/workflows/slow.yml": manifest(0, 1).replace("echo job 0", "sleep 2")}
    before = set(bench.github.check_runs)
    for index in range(count):
        repository, installation = bench.repositories[index % len(bench.repositories)]
        await bench.push(repository, installation, f"{offset + index + 1:040x}")
    refusals = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while len(refusals) < count and loop.time() < deadline:
        for run_id, run in list(bench.github.check_runs.items()):
            if run_id in before or run["status"] != "in_progress":
                continue
            before.add(run_id)
            refusals.append(
                bench.github.faults.inject(
                    "PATCH", rf"/check-runs/{run_id}$", status=422, message="Invalid request."
                )
            )
        await asyncio.sleep(0.02)
    async with bench.database.sessions() as session:
        expected = int(await session.scalar(select(func.count(SessionRow.pk))) or 0)
    await bench.settled(expected, 180)
    _, stuck, differ = await disagreements(bench)
    refused = sum(fault.hits for fault in refusals)
    async with bench.database.sessions() as session:
        kept = await session.scalar(
            select(func.count(SessionRow.pk)).where(SessionRow.check_run_error.is_not(None))
        )
    completed = sum(
        1
        for fault in refusals
        if fault.hits
        and any(
            run["status"] == "completed"
            for run_id, run in bench.github.check_runs.items()
            if fault.pattern.search(f"/check-runs/{run_id}")
        )
    )
    print(
        f"== GitHub refuses the final update of {count} sessions once (422): {refused} refused, "
        f"{completed} of them completed on GitHub all the same; refusals kept on the session: {kept}; "
        f"stuck {stuck}, disagreeing {len(differ)} {differ[:3]}"
    )


# -- PostgreSQL: two workers, and one killed ---------------------------------------------------------------


@contextlib.asynccontextmanager
async def scratch_database(url: str) -> Any:
    """A database of its own on the PostgreSQL server of ``url``, dropped at the end."""
    import asyncpg  # noqa: PLC0415 -- only with PostgreSQL

    parsed = make_url(url)
    name = f"kerrigan_soak_{uuid.uuid4().hex[:8]}"
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    admin = await asyncpg.connect(dsn)
    await admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.close()


async def deliveries_state(database: Database) -> tuple[int, int, int]:
    """Pending deliveries, the most sessions any delivery made, deliveries tried more than once."""
    async with database.sessions() as session:
        pending = await pending_count(session)
        per = (
            await session.execute(
                select(SessionRow.delivery_id, func.count(SessionRow.pk)).group_by(SessionRow.delivery_id)
            )
        ).all()
        retried = await session.scalar(select(func.count(DeliveryRow.pk)).where(DeliveryRow.attempts > 1))
    return pending, max((count for _, count in per), default=0), int(retried or 0)


async def postgres(url: str, pushes: int, kill: bool) -> None:
    """``kerrigan serve`` with two worker processes on PostgreSQL, GitHub answering slowly."""
    lease_s = 6
    async with scratch_database(url) as db_url:
        database = Database.connect(db_url)
        await upgrade(database.engine)
        github = LimitedStandIn(seed=1, limits=False)
        github.add_installation(1, "octo")
        github.add_repository("octo/firmware", 1)
        files = {f".kerrigan/workflows/wf-{w}.yml": manifest(w, 1) for w in range(2)}
        github.add_commit("octo/firmware", "*", files)
        await github.start()
        github.faults.inject("GET", r"/contents/", delay_s=1.0, times=None)  # GitHub answers slowly
        port = free_port()
        env = {
            **os.environ,
            "KERRIGAN_DATABASE_URL": db_url,
            "KERRIGAN_PORT": str(port),
            "KERRIGAN_GITHUB_API_URL": github.url,
            "KERRIGAN_GITHUB_PRIVATE_KEY": str(github.private_key),
            "KERRIGAN_GITHUB_APP_ID": github.app_id,
            "KERRIGAN_WEBHOOK_SECRET": SECRET,
            "KERRIGAN_WORKERS": "2",
            "KERRIGAN_DELIVERY_LEASE_S": str(lease_s),
        }
        server = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kerrigan.cli",
            "serve",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            await wait_ready(base)
            async with aiohttp.ClientSession() as http:

                async def send(count: int, first: int) -> None:
                    for index in range(count):
                        body = json.dumps(push_payload("octo/firmware", f"{first + index:040x}")).encode()
                        async with http.post(
                            f"{base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body)
                        ) as response:
                            assert response.status == 202

                began = time.perf_counter()
                await send(pushes, 1)
                while (await deliveries_state(database))[0]:
                    await asyncio.sleep(0.1)
                drained = time.perf_counter() - began
                _, most, retried = await deliveries_state(database)
                per = collections.Counter(
                    (run["head_sha"], run["name"]) for run in github.check_runs.values()
                )
                print(
                    f"== PostgreSQL, 2 worker processes, GitHub answering each manifest read after 1 s: "
                    f"{pushes} deliveries in {drained:.1f} s; most sessions from one delivery: {most} "
                    f"(2 workflows: 2 is right); deliveries tried more than once: {retried}; check runs "
                    f"per commit and workflow above 1: {sum(1 for n in per.values() if n > 1)}"
                )
                if kill:
                    await kill_one(server.pid, database, send, pushes, lease_s)
        finally:
            with contextlib.suppress(ProcessLookupError):
                server.terminate()
            await server.wait()
            await github.close()
            await database.close()


async def kill_one(server_pid: int, database: Database, send: Any, pushes: int, lease_s: int) -> None:
    """SIGKILL a worker while it holds deliveries; seconds until every held one is processed."""
    workers = [int(pid) for pid in Path(f"/proc/{server_pid}/task/{server_pid}/children").read_text().split()]
    await send(pushes, 10_000)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30
    held: set[str] = set()
    while not held and loop.time() < deadline:
        async with database.sessions() as session:
            held = set(
                (
                    await session.scalars(
                        select(DeliveryRow.delivery_id).where(
                            DeliveryRow.processed_at.is_(None), DeliveryRow.claim_token.is_not(None)
                        )
                    )
                ).all()
            )
        await asyncio.sleep(0.05)
    victim = workers[0]
    os.kill(victim, signal.SIGKILL)
    killed = time.perf_counter()
    while True:
        async with database.sessions() as session:
            left = await session.scalar(
                select(func.count(DeliveryRow.pk)).where(
                    DeliveryRow.delivery_id.in_(held), DeliveryRow.processed_at.is_(None)
                )
            )
        if not left:
            break
        if time.perf_counter() - killed > 10 * lease_s:
            break
        await asyncio.sleep(0.1)
    held_done = time.perf_counter() - killed
    while (await deliveries_state(database))[0] and time.perf_counter() - killed < 120:
        await asyncio.sleep(0.1)
    drained = time.perf_counter() - killed
    _, most, retried = await deliveries_state(database)
    async with database.sessions() as session:
        jobs = await session.scalar(select(func.count(JobRow.pk)))
    print(
        f"== a worker (pid {victim}) killed with SIGKILL holding deliveries ({len(held)} claimed then): "
        f"{'all processed' if not left else f'{left} NOT processed'} {held_done:.1f} s after the kill "
        f"(lease {lease_s} s: {'met' if held_done <= lease_s + 3 else 'MISSED'}, within one lease and a "
        f"delivery's work); backlog of {pushes} settled {drained:.1f} s after; most sessions from one "
        f"delivery: {most}; tried more than once: {retried}; jobs {jobs}"
    )


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 pushes, 3 refusals; no kill test")
    parser.add_argument("--postgres", default=os.environ.get("KERRIGAN_TEST_POSTGRES_URL"))
    parser.add_argument("--kill", action="store_true", help="the kill test in --quick too")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    pushes = 12 if args.quick else 60
    asyncio.run(soak(pushes, 3 if args.quick else 10, args.seed))
    if args.postgres:
        asyncio.run(postgres(args.postgres, 4 if args.quick else 30, kill=args.kill or not args.quick))
    else:
        print("(no PostgreSQL URL: the two-worker and kill runs are skipped)")


if __name__ == "__main__":
    main()
