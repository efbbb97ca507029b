"""The reconciler tests' rig (their fixtures, ``github`` and ``rig``, are this folder's conftest.py's).

Two ways in: the ``harness`` (Kerrigan's app and its own reconciler with its defaults, deliveries over
HTTP), and a :class:`Rig`: sessions started with :func:`start_workflows` on the lab database, jobs moved in
the store as the runner protocol moves them, and reconcilers built here (small backoff; driven round by
round, or running), so a test controls the clock (the ``db`` fixture's FakeClock) and which reconcilers run.

The stand-in is a :class:`WatchedStandIn`: besides what it records itself, it counts the requests in flight
per session (its check run's POST and PATCHes), keeps the status sequence each check run went through, and
can hold requests at a gate until the test opens it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

import aiohttp
from aiohttp import web
from sqlalchemy import select

from kerrigan.core.lifecycle import ENDED, JobState
from kerrigan.core.sessions import Session
from kerrigan.github.budget import Budget
from kerrigan.github.client import GitHubClient, InstallationTokens
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.reconciler import Reconciler
from kerrigan.github.sessions import Trigger, start_workflows
from kerrigan.store.check_runs import behind_count
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import find_sessions
from kerrigan.store.transitions import VISIBLE, move_job, settle_session
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import (
    INSTALLATION,
    REPO,
    check_run_name,
    manifest_files,
    settings_for,
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RANK = {"queued": 0, "in_progress": 1, "completed": 2}
CREATE = r"/repos/[^/]+/[^/]+/check-runs$"
UPDATE = r"/repos/[^/]+/[^/]+/check-runs/\d+$"
SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
_RUN_PATH = re.compile(r"/check-runs/(\d+)$")


# -- the stand-in, watched -----------------------------------------------------------------------------


@dataclass
class Gate:
    """Requests with ``method`` whose path matches ``pattern`` wait here until :meth:`open`."""

    method: str
    pattern: re.Pattern[str]
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    def open(self) -> None:
        self.opened.set()


class WatchedStandIn(GitHubStandIn):
    """The stand-in, watching every request that writes a check run, keyed by its session (the
    check run's ``external_id``): how many are in flight at once, the most ever, the order they came in,
    and the statuses each check run went through."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight: Counter[str] = Counter()
        self.most_in_flight: Counter[str] = Counter()
        self.arrived: list[tuple[str, str]] = []  # (method, session id) of each write, as it came in
        self.statuses: defaultdict[int, list[tuple[str, str | None]]] = defaultdict(list)
        self.gates: list[Gate] = []

    def hold(self, method: str, pattern: str) -> Gate:
        """Hold matching writes until the gate is opened."""
        gate = Gate(method.upper(), re.compile(pattern))
        self.gates.append(gate)
        return gate

    async def _session_of(self, request: web.Request) -> str | None:
        if request.method == "POST" and re.search(CREATE, request.path):
            with contextlib.suppress(ValueError):
                body = json.loads(await request.read())
                if isinstance(body, dict) and body.get("external_id"):
                    return str(body["external_id"])
            return None
        matched = _RUN_PATH.search(request.path)
        if request.method == "PATCH" and matched:
            run = self.check_runs.get(int(matched.group(1)))
            return str(run["external_id"]) if run is not None else None
        return None

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        session_id = await self._session_of(request)
        if session_id is None:
            return await super()._middleware(request, handler)
        self.arrived.append((request.method, session_id))
        self.in_flight[session_id] += 1
        self.most_in_flight[session_id] = max(self.most_in_flight[session_id], self.in_flight[session_id])
        try:
            for gate in self.gates:
                if gate.method == request.method and gate.pattern.search(request.path):
                    await gate.opened.wait()
            return await super()._middleware(request, handler)
        finally:
            self.in_flight[session_id] -= 1
            for run in self.check_runs.values():
                if run["external_id"] == session_id:
                    seen = self.statuses[run["id"]]
                    now = (run["status"], run["conclusion"])
                    if not seen or seen[-1] != now:
                        seen.append(now)

    def writes(self, session_id: str, method: str | None = None) -> int:
        """How many check-run writes of the session came in (answered or not yet)."""
        return sum(1 for m, s in self.arrived if s == session_id and method in (None, m))


# -- what must hold at the end -------------------------------------------------------------------------


async def stored_sessions(database: Database) -> list[Session]:
    async with database.sessions() as session:
        return await find_sessions(session, REPO)


def disagreements(github: WatchedStandIn, sessions: Iterable[Session]) -> list[str]:
    """Every way GitHub's check runs differ from the sessions: one check run per session, carrying its id,
    showing its state and conclusion, the latest version confirmed."""
    problems = []
    for session in sessions:
        runs = [run for run in github.check_runs.values() if run["external_id"] == session.id]
        if len(runs) != 1:
            problems.append(f"session {session.id}: {len(runs)} check runs")
            continue
        [run] = runs
        if run["id"] != session.check_run_id:
            problems.append(f"session {session.id}: check run {run['id']}, stored {session.check_run_id}")
        want = (session.state.value, session.conclusion.value if session.conclusion else None)
        if (run["status"], run["conclusion"]) != want:
            problems.append(f"session {session.id}: GitHub shows {run['status']}/{run['conclusion']}, {want}")
        if run["name"] != check_run_name(session.workflow):
            problems.append(f"session {session.id}: check run named {run['name']}")
        if session.shown_version != session.version:
            problems.append(f"session {session.id}: version {session.version}, shown {session.shown_version}")
    return problems


def regressions(github: WatchedStandIn) -> list[str]:
    """Check runs that went back: completed to in progress, in progress to queued."""
    found = []
    for run_id, seen in github.statuses.items():
        ranks = [RANK[status] for status, _ in seen]
        if ranks != sorted(ranks):
            found.append(f"check run {run_id} went {' -> '.join(status for status, _ in seen)}")
    return found


def overlapping(github: WatchedStandIn) -> dict[str, int]:
    """Sessions whose check run had more than one write in flight at once."""
    return {session: most for session, most in github.most_in_flight.items() if most > 1}


async def until(condition: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    """Wait until ``condition()`` holds (with a guard)."""
    check = cast("Callable[[], Awaitable[bool] | bool]", condition)  # T is bool (mypy cannot tell)
    await wait_until(check, timeout=timeout, interval=0.01)


# -- the rig: sessions, jobs and reconcilers of our own ---------------------------------------------------


@dataclass
class Rig:
    """The lab database, the watched stand-in and an HTTP session; sessions, jobs and reconcilers."""

    db: Database
    github: WatchedStandIn
    clock: FakeClock
    http: aiohttp.ClientSession
    commits: int = 0

    def app(
        self, database: Database | None = None, *, fake_time: bool = False, budget: Budget | None = None
    ) -> GitHubApp:
        """A GitHubApp on the database; ``fake_time``: its budget counts in the FakeClock's seconds (as the
        reconciler made by :meth:`reconciler` with ``fake_time`` does)."""
        database = database or self.db
        settings = settings_for(self.db, self.github)
        if not fake_time and budget is None:
            return GitHubApp.connect(database, settings, self.http)
        assert settings.github_app_id is not None
        assert settings.github_private_key is not None
        clock = self.unix if fake_time else time.time
        client = GitHubClient(self.http, base_url=settings.github_api_url, budget=budget, clock=clock)
        tokens = InstallationTokens(client, settings.github_app_id, settings.github_private_key)
        return GitHubApp(database, settings, client, tokens)

    def unix(self) -> float:
        return self.clock().timestamp()

    def reconciler(
        self, app: GitHubApp | None = None, *, fake_time: bool = False, **options: Any
    ) -> Reconciler:
        """A reconciler with a small backoff that polls often."""
        options = {"backoff_base_s": 0.01, "poll_s": 0.02, **options}
        if fake_time:
            options["clock"] = self.unix
        return Reconciler(app or self.app(fake_time=fake_time), **options)

    async def start(self, count: int = 1, *, app: GitHubApp | None = None) -> list[Session]:
        """``count`` sessions of hil-smoke (two jobs each), each at a commit of its own."""
        app = app or self.app()
        repo = app.repository(INSTALLATION, REPO)
        triggers = []
        for _ in range(count):
            self.commits += 1
            sha = hashlib.sha1(f"commit {self.commits}".encode()).hexdigest()
            self.github.add_commit(REPO, sha, manifest_files("hil-smoke.yml"))
            triggers.append(Trigger(sha=sha, event=None, event_name="push", ref="main", only={"hil-smoke"}))
        started = await asyncio.gather(*(start_workflows(app, repo, trigger) for trigger in triggers))
        return [session for sessions in started for session in sessions]

    async def jobs(self, session_id: str) -> list[int]:
        async with self.db.sessions() as session:
            rows = await session.scalars(
                select(JobRow.pk)
                .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                .where(SessionRow.id == session_id)
                .order_by(JobRow.pk)
            )
            return list(rows.all())

    async def move(self, job_pk: int, *states: JobState, exit_status: int = 0) -> None:
        """Move a job as the runner protocol does, in one transaction: leases and acceptances are not news;
        a start stamps ``started_at``; a start or an end settles the session (recording a version)."""
        db = self.db
        async with db.writing(), db.sessions() as session, session.begin():
            job = await session.get(JobRow, job_pk, with_for_update=True)
            assert job is not None
            for to in states:
                at = db.clock()
                await move_job(session, job, to, at, exit_status=exit_status if to in ENDED else None)
                if to is JobState.RUNNING:
                    job.started_at = at
                if to in VISIBLE:
                    await settle_session(session, job.session_pk, at)

    async def run_through(self, job_pk: int, exit_status: int = 0) -> None:
        """A job's whole life: leased and accepted, started, ended with ``exit_status``."""
        await self.move(job_pk, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await self.move(
            job_pk, JobState.SUCCEEDED if exit_status == 0 else JobState.FAILED, exit_status=exit_status
        )

    async def row(self, session_id: str) -> SessionRow:
        async with self.db.sessions() as session:
            row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
            assert row is not None
            return row

    async def sessions(self) -> list[Session]:
        return await stored_sessions(self.db)

    async def caught_up(self) -> bool:
        async with self.db.sessions() as session:
            return await behind_count(session) == 0

    def run(self, session: Session) -> dict[str, Any]:
        """The session's check run on GitHub."""
        [run] = [run for run in self.github.check_runs.values() if run["external_id"] == session.id]
        return run


@contextlib.asynccontextmanager
async def running(*reconcilers: Reconciler) -> AsyncIterator[None]:
    """Reconcilers running in the background; stopped at the end."""
    tasks = [asyncio.create_task(reconciler.run()) for reconciler in reconcilers]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


@contextlib.asynccontextmanager
async def ticking(clock: FakeClock) -> AsyncIterator[None]:
    """The FakeClock follows the loop's clock meanwhile (for reconcilers that record short waits)."""

    async def tick() -> None:
        loop = asyncio.get_running_loop()
        last = loop.time()
        while True:
            await asyncio.sleep(0.005)
            now = loop.time()
            clock.advance(now - last)
            last = now

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def drive(rig: Rig, session: Session, rng: random.Random) -> None:
    """Start both jobs of a session and end them, in a random order with random pauses; one in four fails."""
    jobs = await rig.jobs(session.id)
    steps = [(job, "start") for job in jobs]
    rng.shuffle(steps)
    ends = [(job, "end") for job in jobs]
    rng.shuffle(ends)
    for job, step in steps + ends:
        await asyncio.sleep(rng.random() * 0.02)
        if step == "start":
            await rig.move(job, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        else:
            failed = rng.random() < 0.25
            await rig.move(
                job, JobState.FAILED if failed else JobState.SUCCEEDED, exit_status=3 if failed else 0
            )
