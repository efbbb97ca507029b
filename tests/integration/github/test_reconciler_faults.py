"""The check-run reconciler's promises (DESIGN.md, "Check runs follow the session"), proved against the
GitHub stand-in's fault injection, on SQLite and (with ``KERRIGAN_TEST_POSTGRES_URL``) PostgreSQL.

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
import logging
import random
import re
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

import aiohttp
import pytest
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
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.waiting import wait_until
from tests.conftest import FakeClock
from tests.integration.github.conftest import (
    FORK_SHA,
    INSTALLATION,
    MERGE_SHA,
    PUSH_WORKFLOWS,
    REPO,
    SHA,
    SMOKE_SHA,
    Harness,
    check_run_name,
    manifest_files,
    push_payload,
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


@pytest.fixture
async def github(app_key: tuple[str, str]) -> AsyncIterator[WatchedStandIn]:
    """The ``github`` fixture of tests/integration/conftest.py, watched (the harness uses it too)."""
    private, public = app_key
    stand_in = WatchedStandIn(public_key=public, private_key=private)
    await stand_in.start()
    try:
        stand_in.add_installation(INSTALLATION, "octo")
        stand_in.add_repository(REPO, INSTALLATION)
        stand_in.add_commit(REPO, SHA, manifest_files())
        stand_in.add_commit(REPO, SMOKE_SHA, manifest_files("hil-smoke.yml"))
        stand_in.add_commit(REPO, FORK_SHA, manifest_files())
        stand_in.add_commit(REPO, MERGE_SHA, manifest_files())
        yield stand_in
    finally:
        await stand_in.close()


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


@pytest.fixture
async def rig(lab_db: Database, github: WatchedStandIn, clock: FakeClock) -> AsyncIterator[Rig]:
    async with aiohttp.ClientSession() as http:
        yield Rig(lab_db, github, clock, http)


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


# -- 1. a lost connection never duplicates a check run ----------------------------------------------------

LOST_CREATES = {
    "acted, then answered 502": {"act_first": True, "status": 502},
    "acted, then dropped": {"act_first": True, "drop": True},
    "answered 502 before acting": {"status": 502},
    "dropped before acting": {"drop": True},
}


@pytest.mark.parametrize("fault", LOST_CREATES.values(), ids=LOST_CREATES.keys())
async def test_a_lost_create_never_duplicates_a_check_run(harness: Harness, fault: dict[str, Any]) -> None:
    github = harness.github
    assert isinstance(github, WatchedStandIn)
    lost = github.faults.inject("POST", CREATE, times=3, **fault)
    assert await harness.deliver("push", push_payload(SHA)) == 202
    await harness.settle()

    assert lost.hits == 3
    sessions = await harness.sessions()
    assert sorted(session.workflow for session in sessions) == sorted(PUSH_WORKFLOWS)
    assert harness.check_run_names() == sorted(check_run_name(name) for name in PUSH_WORKFLOWS)
    assert disagreements(github, sessions) == []
    creates = harness.requests("POST", "/check-runs")
    if fault.get("act_first"):  # GitHub made them: each was found by its external_id, not made again
        assert harness.requests("GET", f"/commits/{SHA}/check-runs")
        assert len(creates) == len(PUSH_WORKFLOWS)
    else:  # GitHub made nothing: each was made by the next try
        assert len(creates) == len(PUSH_WORKFLOWS) + 3


# -- 2. transient failures are retried without a limit ------------------------------------------------------

TRANSIENT = {
    "500": {"status": 500},
    "502": {"status": 502},
    "503": {"status": 503},
    "429 with Retry-After 0": {"status": 429, "headers": {"Retry-After": "0"}},
    "403 secondary limit, Retry-After 1": {
        "status": 403,
        "headers": {"Retry-After": "1"},
        "message": SECONDARY,
        "times": 1,
    },
    "403 secondary limit, Retry-After 0": {
        "status": 403,
        "headers": {"Retry-After": "0"},
        "message": SECONDARY,
    },
    "dropped": {"drop": True},
    "acted, then dropped": {"act_first": True, "drop": True},
    "acted, then 503": {"act_first": True, "status": 503},
    "slow (0.3 s)": {"delay_s": 0.3, "times": 2},
    "502 six times in a row": {"status": 502, "times": 6},  # more than the client's own 5 attempts
}


@pytest.mark.parametrize("fault", TRANSIENT.values(), ids=TRANSIENT.keys())
async def test_transient_failures_are_retried_until_github_shows_the_latest_version(
    rig: Rig, fault: dict[str, Any]
) -> None:
    github = rig.github
    options = {"times": 3, **fault}
    creates = github.faults.inject("POST", CREATE, **options)
    updates = github.faults.inject("PATCH", UPDATE, **options)
    async with ticking(rig.clock), running(rig.reconciler()):
        [session] = await rig.start()
        await until(rig.caught_up)
        first, second = await rig.jobs(session.id)
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(first, JobState.SUCCEEDED)
        await rig.move(second, JobState.FAILED, exit_status=3)
        await until(rig.caught_up)

    # A create GitHub acted on is adopted, not sent again: the fault meets the one POST only.
    made = fault.get("act_first") or not (fault.get("status") or fault.get("drop"))
    assert (creates.hits, updates.hits) == (1 if made else options["times"], options["times"])
    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert disagreements(github, [stored]) == []
    assert regressions(github) == []


async def test_backoff_keeps_growing_across_waits_in_place(rig: Rig) -> None:
    """Two failures retried in place, the third waited out as the session's due time: the session counts
    three failures, so the next wait is the fourth step of the backoff, not the second."""
    reconciler = rig.reconciler(backoff_base_s=0.01, wait_in_place_s=0.029)  # steps 1, 2 in place; 3 not
    [session] = await rig.start()
    await reconciler.round()
    rig.github.faults.inject("PATCH", UPDATE, status=500, times=3)
    first, _ = await rig.jobs(session.id)
    await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1

    row = await rig.row(session.id)
    assert rig.github.writes(session.id, "PATCH") == 3
    assert row.sync_attempts == 3
    assert row.sync_due_at is not None
    assert row.sync_due_at > rig.clock()
    rig.clock.advance(1)
    assert await reconciler.round() == 1
    assert disagreements(rig.github, await rig.sessions()) == []
    assert (await rig.row(session.id)).sync_attempts == 0


# -- 3. a secondary limit without Retry-After waits at least a minute ---------------------------------------

LIMITS = {
    "403 secondary limit": {"status": 403, "message": SECONDARY},
    "429": {"status": 429},
}


@pytest.mark.parametrize("fault", LIMITS.values(), ids=LIMITS.keys())
async def test_a_secondary_limit_without_retry_after_waits_at_least_a_minute(
    rig: Rig, fault: dict[str, Any]
) -> None:
    github, clock = rig.github, rig.clock
    reconciler = rig.reconciler(fake_time=True)  # the budget counts in the FakeClock's seconds too
    app = reconciler.app
    limited, other = await rig.start(2, app=app)
    assert await reconciler.round() == 2
    github.faults.inject("PATCH", UPDATE, **fault)
    job, _ = await rig.jobs(limited.id)
    await rig.move(job, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1

    limited_at = clock()
    row = await rig.row(limited.id)
    assert row.sync_due_at is not None
    assert row.sync_due_at >= limited_at + timedelta(seconds=60)
    assert row.shown_version < row.version
    assert github.writes(limited.id, "PATCH") == 1
    # The whole installation waits: a version of another session recorded now does not go either.
    job, _ = await rig.jobs(other.id)
    await rig.move(job, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    for step in (0, 30, 29):
        clock.advance(step)
        await reconciler.sweep()
        await reconciler.round()
        assert github.writes(limited.id, "PATCH") == 1
        assert github.writes(other.id, "PATCH") == 0
    clock.advance(1)  # a minute after the limit
    await until(lambda: _rounds_until_caught_up(rig, reconciler))
    assert github.writes(limited.id, "PATCH") == 2
    assert github.writes(other.id, "PATCH") == 1
    assert disagreements(github, await rig.sessions()) == []


async def _rounds_until_caught_up(rig: Rig, reconciler: Reconciler) -> bool:
    await reconciler.round()
    return await rig.caught_up()


# -- 4. a refused update never hides the session's state, nor leaves it stuck -------------------------------

REFUSAL = "Invalid request.\n\noutput.summary is too long (injected)."


async def test_a_refused_final_update_shows_the_conclusion_in_a_short_body_and_keeps_the_refusal(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    github = rig.github
    reconciler = rig.reconciler()
    [session] = await rig.start()
    first, second = await rig.jobs(session.id)
    await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1
    assert rig.run(session)["status"] == "in_progress"
    refusal = github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=1)
    await rig.move(first, JobState.SUCCEEDED)
    await rig.move(second, JobState.FAILED, exit_status=3)
    with caplog.at_level(logging.ERROR, logger="kerrigan.github.reconciler"):
        assert await reconciler.round() == 1

    assert refusal.hits == 1
    run = rig.run(session)
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert "(short report: GitHub refused the full one)" in run["output"]["title"]
    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error
    assert "422" in stored.check_run_error
    assert any(REFUSAL in record.getMessage() for record in caplog.records)
    assert disagreements(github, [stored]) == []
    assert await reconciler.round() == 0  # nothing left to send


@pytest.mark.parametrize("then", ["a later version", "the refused-retry time"])
async def test_a_version_refused_on_every_request_leaves_the_session_whole_and_is_not_stuck(
    rig: Rig, then: str
) -> None:
    github, clock = rig.github, rig.clock
    reconciler = rig.reconciler()
    [session] = await rig.start()
    assert await reconciler.round() == 1
    first, second = await rig.jobs(session.id)
    github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=None)
    if then == "a later version":  # an in-progress version is refused; the completed one follows
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        refused_state: tuple[str, str | None] = ("in_progress", None)
    else:  # the final version is refused
        await rig.run_through(first)
        await rig.run_through(second)
        refused_state = ("completed", "success")
    assert await reconciler.round() == 1

    row = await rig.row(session.id)
    assert (row.state, row.conclusion) == refused_state  # the session is whole
    assert row.check_run_error is not None
    assert REFUSAL in row.check_run_error
    assert row.shown_version < row.version
    assert rig.run(session)["status"] == "queued"  # GitHub still shows what it last took
    assert github.writes(session.id, "PATCH") == 2  # the full body, then the short one
    assert await reconciler.round() == 0  # not tried again at once
    github.faults.clear()
    if then == "a later version":
        await rig.move(first, JobState.SUCCEEDED)
        await rig.run_through(second)
    else:
        clock.advance(599)
        await reconciler.sweep()
        assert await reconciler.round() == 0
        clock.advance(1)
        await reconciler.sweep()
    assert await reconciler.round() == 1

    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "success")
    assert disagreements(github, [stored]) == []
    assert "(short report" not in rig.run(session)["output"]["title"]


SHORT_BODY_LOST = {
    "acted, then answered 502": {"act_first": True, "status": 502},
    "answered 502 before acting": {"status": 502},
    "dropped before acting": {"drop": True},
}


@pytest.mark.parametrize("lost", SHORT_BODY_LOST.values(), ids=SHORT_BODY_LOST.keys())
async def test_a_refused_create_whose_short_body_is_lost_is_retried_and_made_once(
    rig: Rig, lost: dict[str, Any]
) -> None:
    """GitHub refuses the full body of a create, and the short body's answer is then lost: that is no
    refusal (it is retried with backoff, not after the refused-retry time), and a short create GitHub made
    is found by its external_id, not made again."""
    github = rig.github
    reconciler = rig.reconciler()
    github.faults.inject("POST", CREATE, status=422, message=REFUSAL, times=1)
    github.faults.inject("POST", CREATE, times=1, **lost)
    [session] = await rig.start()
    assert await reconciler.round() == 1
    rig.clock.advance(600)  # past the refused-retry time: whatever was left to do is done
    await reconciler.round()

    [stored] = await rig.sessions()
    assert disagreements(github, [stored]) == []
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error
    if lost.get("act_first"):  # the short check run GitHub made is the one adopted
        assert "(short report: GitHub refused the full one)" in rig.run(session)["output"]["title"]
        assert github.writes(session.id, "POST") == 2


async def test_a_short_update_failing_for_a_while_is_retried_with_backoff(rig: Rig) -> None:
    github = rig.github
    reconciler = rig.reconciler()
    [session] = await rig.start()
    assert await reconciler.round() == 1
    github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=1)
    github.faults.inject("PATCH", UPDATE, status=503, times=2)
    first, second = await rig.jobs(session.id)
    await rig.run_through(first)
    await rig.run_through(second, exit_status=3)
    assert await reconciler.round() == 1

    [stored] = await rig.sessions()
    assert disagreements(github, [stored]) == []
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error


# -- 5. versions in order, one request at a time, the latest wins ------------------------------------------


async def test_versions_recorded_while_a_request_is_in_flight_go_as_one_the_latest(rig: Rig) -> None:
    github = rig.github
    [session] = await rig.start()
    first, second = await rig.jobs(session.id)
    async with running(rig.reconciler()):
        await until(rig.caught_up)
        gate = github.hold("PATCH", UPDATE)
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)

        async def in_flight() -> bool:
            return github.in_flight[session.id] == 1

        await until(in_flight)
        before = (await rig.row(session.id)).version
        await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(first, JobState.SUCCEEDED)
        await rig.move(second, JobState.FAILED, exit_status=3)
        assert (await rig.row(session.id)).version == before + 3
        gate.open()
        await until(rig.caught_up)

    patches = [r for r in github.requests if r.method == "PATCH" and re.search(UPDATE, r.path)]
    assert len(patches) == 2  # the one in flight, then the latest: the two between were never sent
    assert (patches[-1].body["status"], patches[-1].body["conclusion"]) == ("completed", "failure")
    assert github.statuses[rig.run(session)["id"]] == [
        ("queued", None),
        ("in_progress", None),
        ("completed", "failure"),
    ]
    assert overlapping(github) == {}
    assert disagreements(github, await rig.sessions()) == []


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


async def test_many_transitions_while_github_is_slow_keep_order_one_request_at_a_time(rig: Rig) -> None:
    github = rig.github
    github.faults.inject("POST", CREATE, delay_s=0.05, times=None)
    github.faults.inject("PATCH", UPDATE, delay_s=0.05, times=None)
    rng = random.Random(5)
    async with ticking(rig.clock), running(rig.reconciler()):
        sessions = await rig.start(5)
        await asyncio.gather(*(drive(rig, session, rng) for session in sessions))
        await until(rig.caught_up)

    stored = await rig.sessions()
    assert all(session.state.value == "completed" for session in stored)
    assert overlapping(github) == {}
    assert regressions(github) == []
    assert disagreements(github, stored) == []
    versions = sum(session.version for session in stored)
    assert len(github.arrived) < versions  # versions recorded while one was in flight were coalesced


# -- 7. progress of many sessions under load ---------------------------------------------------------------


async def test_fifty_sessions_driven_at_once_against_a_slow_github_all_agree_at_the_end(rig: Rig) -> None:
    github = rig.github
    github.faults.inject("POST", CREATE, delay_s=0.02, times=None)
    github.faults.inject("PATCH", UPDATE, delay_s=0.02, times=None)
    github.faults.inject("PATCH", UPDATE, status=502, probability=0.1, times=None)
    # Three writes a session at the least: more than GitHub's 80 a minute, whose waits are not tested here.
    app = rig.app(budget=Budget(creating_per_minute=10_000))
    rng = random.Random(7)
    async with ticking(rig.clock), running(rig.reconciler(app)):
        sessions = await rig.start(50, app=app)
        await asyncio.gather(*(drive(rig, session, rng) for session in sessions))
        await until(rig.caught_up, timeout=30)

    stored = await rig.sessions()
    assert len(stored) == 50
    assert all(session.state.value == "completed" for session in stored)
    assert disagreements(github, stored) == []
    assert overlapping(github) == {}
    assert regressions(github) == []
