"""What a push costs on GitHub, and how soon GitHub shows a session's state, under GitHub's limits.

Kerrigan (SQLite, the in-process delivery worker, the reconciler and the dispatcher), runner agents (jobs that
only ``echo``) and the GitHub stand-in all run in this process on loopback, as ``kerrigan demo`` runs them.
The stand-in enforces GitHub's primary limit (5,000 requests an hour per installation, reported in
``x-ratelimit-*`` headers) and its secondary limit on content-creating requests (80 a minute per installation
and for the App's own JWT requests; a 403 "secondary rate limit", with ``Retry-After`` every other time).
Each push is a commit holding 5 workflows of 2 jobs each, run to completed check runs.

Printed: requests per push by kind, the 403s and 429s received (target: none), and the reconciler's lag,
from a session's state change (``sessions.version_at``) to the stand-in receiving a request that shows that
version (or a later one), p50/p95 (target: p95 <= 1 s). Beside them, the old design's figures as the
baseline: a push of 5 workflows read 6 files, created 5 check runs and sent 6 updates. Then a second push of
a commit whose manifests did not change (target: 1 listing request, no file read). Two runs: the 200 pushes
spread over 20 installations (each well under its limits), and one installation with 20 pushes at once
(more than 80 content-creating requests a minute wanted: the budget must hold them back).

    python benchmarks/bench_github_budget.py            # 200 pushes over 20 installations; 1 x 20
    python benchmarks/bench_github_budget.py --quick    # 4 pushes over 2 installations; 1 x 2

The harness (:func:`started`) is shared with ``benchmarks/soak_github_faults.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from sqlalchemy import func, select

import kerrigan.github.reconciler as reconciler_module
import kerrigan.store.sessions as store_sessions
from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.disk import DiskPolicy
from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.runner.agent import Agent, AgentSettings
from kerrigan.store import transitions
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, upgrade
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import apply_diff
from kerrigan.store.models import DeliveryRow, JobRow, SessionRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.github import GitHubStandIn, RecordedRequest, push_payload, signed_headers
from kerrigan.testing.github.errors import error_response
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.processes import free_port

SECRET = "bench-secret"  # noqa: S105 -- the benchmark's own throwaway webhook secret
HOURLY = 5000  # an installation's primary limit (GitHub's least)
CREATING_PER_MINUTE = 80
CREATING = frozenset({"POST", "PATCH", "PUT", "DELETE"})
SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
OLD_DESIGN = {"manifest file reads": 6.0, "check-run creates": 5.0, "check-run updates": 6.0}


def manifest(index: int, jobs: int) -> str:
    """Workflow ``index``: ``jobs`` tasks that only echo, one vCPU each, run side by side."""
    tasks = "\n".join(f"  - {{id: t{task}, run: echo job {task}, vcpus: 1}}" for task in range(jobs))
    return (
        f"name: wf-{index}\n"
        "on: {push: {branches: [main]}}\n"
        # Every push runs to its end: a newer commit does not supersede an older one's session.
        "concurrency: {cancel: none}\n"
        f"scheduling: {{labels: {{sdk: '2.2.0'}}, max_devkits: {jobs}, queue_wait_limit_s: 7200}}\n"
        f"tasks:\n{tasks}\n"
    )


def lab_yaml(hosts: int, devices_per_host: int) -> str:
    """One pool of devices with ``sdk: 2.2.0``, ``devices_per_host`` on each runner host."""
    lines = ["hosts:", *(f"  - id: host-{h:02d}" for h in range(hosts)), "pools:", "  - id: bench"]
    lines += ["    labels: {sdk: '2.2.0'}", "    devices:"]
    for h in range(hosts):
        for d in range(devices_per_host):
            lines += [
                f"      - id: dev-{h:02d}-{d}",
                "        board: modalix",
                "        target_type: devkit",
                "        os_type: linux",
                f"        host: host-{h:02d}",
            ]
    return "\n".join(lines) + "\n"


def percentile(samples: list[float], fraction: float) -> float:
    """The ``fraction`` quantile (nearest rank); 0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


# -- the stand-in, with GitHub's limits and a clock on each request ---------------------------------------


@dataclass
class _Account:
    used: int = 0
    window_end: float = 0.0
    created: collections.deque[float] = field(default_factory=collections.deque)
    refusals: int = 0


class LimitedStandIn(GitHubStandIn):
    """The stand-in, enforcing GitHub's primary and secondary limits (when ``limits``), timing each
    request's arrival, and noting which session version each accepted check-run request shows."""

    def __init__(self, *, seed: int = 0, limits: bool = True) -> None:
        try:  # the stand-in's own limits (kerrigan.testing.github.limits), where it has them
            super().__init__(seed=seed, enforce_limits=limits)  # type: ignore[call-arg]
            self.enforcing = False
        except TypeError:
            super().__init__(seed=seed)
            self.enforcing = limits  # this benchmark's, as the module docstring describes
        self.accounts: dict[str, _Account] = {}
        self.arrivals: list[float] = []  # parallel to self.requests
        self.shows: list[tuple[str, int, float]] = []  # (session id, version, arrival) of accepted ones
        self.sending: dict[str, int] = {}  # session id -> version the reconciler rendered last
        self.on_request: Callable[[web.Request], None] | None = None

    def _account_of(self, request: web.Request) -> str | None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        token = token.strip()
        if not token:
            return None
        found = self.tokens.get(token)
        if found is not None:
            return f"installation {found[0]}"
        if scheme.lower() == "bearer" and token.count(".") == 2:
            return "the App (JWT)"
        return None

    def _limit(self, account: _Account, method: str, now: float) -> web.Response | None:
        if now >= account.window_end:
            account.used, account.window_end = 0, now + 3600
        if account.used >= HOURLY:
            return error_response(403, "API rate limit exceeded", self._headers(account))
        if method in CREATING:
            while account.created and account.created[0] <= now - 60:
                account.created.popleft()
            if len(account.created) >= CREATING_PER_MINUTE:
                account.refusals += 1
                retry = {"Retry-After": "60"} if account.refusals % 2 else {}
                return error_response(403, SECONDARY, self._headers(account) | retry)
            account.created.append(now)
        account.used += 1
        return None

    @staticmethod
    def _headers(account: _Account) -> dict[str, str]:
        return {
            "x-ratelimit-limit": str(HOURLY),
            "x-ratelimit-remaining": str(max(0, HOURLY - account.used)),
            "x-ratelimit-used": str(account.used),
            "x-ratelimit-reset": str(int(account.window_end)),
            "x-ratelimit-resource": "core",
        }

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        arrived = time.time()
        if self.on_request is not None:
            self.on_request(request)
        name = self._account_of(request) if self.enforcing else None
        account = self.accounts.setdefault(name, _Account()) if name is not None else None
        if account is not None:
            refusal = self._limit(account, request.method, arrived)
            if refusal is not None:
                raw = await request.read()
                body = json.loads(raw) if raw else None
                self.requests.append(
                    RecordedRequest(
                        request.method,
                        request.path,
                        dict(request.query),
                        dict(request.headers),
                        body,
                        refusal.status,
                    )
                )
                self.arrivals.append(arrived)
                return refusal
        session_id = await self._session_of(request)
        response = await super()._middleware(request, handler)
        self.arrivals.append(arrived)
        if account is not None and not response.prepared:
            response.headers.update(self._headers(account))
        if response.status < 400 and session_id is not None and session_id in self.sending:
            self.shows.append((session_id, self.sending[session_id], arrived))
        return response

    async def _session_of(self, request: web.Request) -> str | None:
        """The session a check-run create or update is for."""
        if request.method == "PATCH":
            found = re.search(r"/check-runs/(\d+)$", request.path)
            run = self.check_runs.get(int(found.group(1))) if found else None
            return str(run["external_id"]) if run and run.get("external_id") else None
        if request.method == "POST" and request.path.endswith("/check-runs"):
            with contextlib.suppress(ValueError):
                body = json.loads(await request.read() or b"null")
                if isinstance(body, dict) and body.get("external_id"):
                    return str(body["external_id"])
        return None


def classify(request: RecordedRequest) -> str:
    """What kind of request to GitHub this was."""
    method, path = request.method, request.path
    if method == "GET" and path.endswith("/contents/.kerrigan/workflows"):
        return "manifest listings"
    if method == "GET" and "/contents/.kerrigan/workflows/" in path:
        return "manifest file reads"
    if method == "POST" and path.endswith("/check-runs"):
        return "check-run creates"
    if method == "PATCH" and "/check-runs/" in path:
        return "check-run updates"
    if method == "GET" and re.search(r"/commits/[^/]+/check-runs$", path):
        return "check-run lists"
    if method == "POST" and path.endswith("/access_tokens"):
        scoped = isinstance(request.body, dict) and "repositories" in request.body
        return "job token mints" if scoped else "installation token mints"
    if method == "DELETE" and path == "/installation/token":
        return "job token revokes"
    if method == "GET" and "/tarball/" in path:
        return "tarballs (API request)"
    if method == "GET" and path.startswith("/_codeload/"):
        return "tarballs (download)"
    return f"other {method} {path}"


KINDS = (
    "manifest listings",
    "manifest file reads",
    "check-run creates",
    "check-run updates",
    "check-run lists",
    "installation token mints",
    "job token mints",
    "tarballs (API request)",
    "tarballs (download)",
    "job token revokes",
)


# -- Kerrigan, its lab and its runner agents, in this process ----------------------------------------------


@dataclass
class Bench:
    """A running Kerrigan, its stand-in, agents, and what they measured."""

    github: LimitedStandIn
    database: Database
    base: str
    http: aiohttp.ClientSession
    repositories: list[tuple[str, int]]
    files: dict[str, str]
    versions: dict[tuple[str, int], float] = field(default_factory=dict)  # (session, version) -> its time
    pushed: int = 0

    async def push(
        self, repository: str, installation: int, sha: str, *, ref: str = "refs/heads/main"
    ) -> str:
        """A signed push delivery of ``sha`` (its files added to the stand-in first); the delivery id."""
        if sha not in self.github.repositories[repository].commits:
            self.github.add_commit(repository, sha, self.files)
        delivery = secrets.token_hex(16)
        body = json.dumps(push_payload(repository, sha, installation=installation, ref=ref)).encode()
        async with self.http.post(
            f"{self.base}/webhooks/github", data=body, headers=signed_headers(SECRET, "push", body, delivery)
        ) as response:
            assert response.status == 202, response.status
        self.pushed += 1
        return delivery

    async def counts(self) -> dict[str, int]:
        """Sessions, those completed, those GitHub shows up to date, pending deliveries."""
        async with self.database.sessions() as session:
            total = await session.scalar(select(func.count(SessionRow.pk)))
            done = await session.scalar(
                select(func.count(SessionRow.pk)).where(SessionRow.state == "completed")
            )
            shown = await session.scalar(
                select(func.count(SessionRow.pk)).where(
                    SessionRow.state == "completed", SessionRow.shown_version >= SessionRow.version
                )
            )
            pending = await pending_count(session)
        return {"sessions": int(total or 0), "completed": int(done or 0), "shown": int(shown or 0)} | {
            "pending": pending
        }

    async def settled(self, sessions: int, timeout: float, *, progress: bool = False) -> float:
        """Wait until ``sessions`` sessions exist, all completed and shown; seconds waited."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        last_print = began
        while loop.time() - began < timeout:
            counts = await self.counts()
            if (
                counts["sessions"] >= sessions
                and counts["shown"] >= counts["sessions"]
                and not counts["pending"]
            ):
                return loop.time() - began
            if progress and loop.time() - last_print >= 60:
                last_print = loop.time()
                print(f"  ... {loop.time() - began:.0f} s: {counts}", flush=True)
            await asyncio.sleep(0.2)
        return -1.0

    def lags(self) -> tuple[list[float], int]:
        """Per recorded version: seconds from its state change to the first accepted request showing it
        (or a later version); and how many versions no accepted request showed."""
        shows: dict[str, list[tuple[float, int]]] = collections.defaultdict(list)
        for session_id, version, arrived in self.github.shows:
            shows[session_id].append((arrived, version))
        lags, never = [], 0
        for (session_id, version), at in self.versions.items():
            later = [arrived for arrived, shown in shows.get(session_id, []) if shown >= version]
            if later:
                lags.append(max(0.0, min(later) - at))
            else:
                never += 1
        return lags, never


def _instrument(bench_versions: dict[tuple[str, int], float], stand_in: LimitedStandIn) -> Callable[[], None]:
    """Note each version's time as the store records it, and the version each check-run body renders.
    Returns the undo."""
    original_record = transitions.record_version
    original_render = reconciler_module.render
    original_short = reconciler_module.render_short

    def record_version(session: Any, row: SessionRow, at: Any) -> None:
        original_record(session, row, at)
        bench_versions[(str(row.id), int(row.version))] = at.timestamp()

    def render(view: Any, *args: Any, **kwargs: Any) -> Any:
        stand_in.sending[str(view.session.id)] = int(view.session.version)
        return original_render(view, *args, **kwargs)

    def render_short(view: Any, *args: Any, **kwargs: Any) -> Any:
        stand_in.sending[str(view.session.id)] = int(view.session.version)
        return original_short(view, *args, **kwargs)

    transitions.record_version = record_version  # type: ignore[assignment]
    store_sessions.record_version = record_version  # type: ignore[attr-defined]
    reconciler_module.render = render  # type: ignore[assignment]
    reconciler_module.render_short = render_short  # type: ignore[assignment]

    def undo() -> None:
        transitions.record_version = original_record  # type: ignore[assignment]
        store_sessions.record_version = original_record  # type: ignore[attr-defined]
        reconciler_module.render = original_render  # type: ignore[assignment]
        reconciler_module.render_short = original_short  # type: ignore[assignment]

    return undo


@contextlib.asynccontextmanager
async def started(
    folder: Path,
    installations: int,
    repositories_per_installation: int = 1,
    *,
    workflows: int = 5,
    jobs: int = 2,
    hosts: int = 4,
    devices_per_host: int = 2,
    seed: int = 0,
    limits: bool = True,
    database_url: str | None = None,
    environment: dict[str, str] | None = None,
    agent_retry_s: float = 300.0,
) -> AsyncIterator[Bench]:
    """A Kerrigan with its lab, runner agents and a limited stand-in, all in this process."""
    url = database_url or f"sqlite+aiosqlite:///{folder / 'bench.db'}"
    database = Database.connect(url)
    await upgrade(database.engine)
    parsed = parse_inventory(lab_yaml(hosts, devices_per_host), "lab.yml")
    assert parsed.inventory is not None, parsed
    async with database.sessions() as session, session.begin():
        await apply_diff(
            session,
            parsed.inventory,
            diff_inventories(Inventory(), parsed.inventory),
            Change("bench", database.clock()),
        )
    files = {f".kerrigan/workflows/wf-{w}.yml": manifest(w, jobs) for w in range(workflows)}
    github = LimitedStandIn(seed=seed, limits=limits)
    repositories = []
    for installation in range(1, installations + 1):
        github.add_installation(installation, f"lab{installation}")
        for index in range(repositories_per_installation):
            name = f"lab{installation}/firmware-{index}"
            github.add_repository(name, installation)
            repositories.append((name, installation))
    await github.start()
    port = free_port()
    settings = Settings(
        database_url=url,
        host="127.0.0.1",
        port=port,
        public_url=f"http://127.0.0.1:{port}",
        github_api_url=github.url,
        github_app_id=github.app_id,
        github_private_key=github.private_key,
        webhook_secret=SECRET,
        **(environment or {}),
    )
    versions: dict[tuple[str, int], float] = {}
    undo = _instrument(versions, github)
    runner = web.AppRunner(create_app(settings), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    base = f"http://127.0.0.1:{port}"
    async with database.sessions() as session, session.begin():
        tokens = {
            f"host-{h:02d}": await create_runner_token(session, f"host-{h:02d}", database.clock())
            for h in range(hosts)
        }
    http = aiohttp.ClientSession()
    agents = [
        asyncio.create_task(
            Agent(
                AgentSettings(
                    server_url=base,
                    token=token,
                    host_id=host,
                    work_dir=folder / "runners" / host,
                    disk=DiskPolicy(floor_bytes=0),
                    heartbeat_s=1.0,
                    kill_grace_s=2.0,
                    systemd_scope="never",
                    github_retry_s=agent_retry_s,
                    github_backoff_s=0.5,
                    job_users=spare_job_users(),  # each agent its own, as on a host they must be
                ),
                http,
            ).run()
        )
        for host, token in tokens.items()
    ]
    try:
        yield Bench(github, database, base, http, repositories, files, versions)
    finally:
        for agent in agents:
            agent.cancel()
        await asyncio.gather(*agents, return_exceptions=True)
        await http.close()
        await runner.cleanup()
        undo()
        await github.close()
        await database.close()


async def job_outcomes(database: Database) -> collections.Counter[str]:
    """Jobs by state and failure class."""
    async with database.sessions() as session:
        rows = (await session.execute(select(JobRow.state, JobRow.failure_class))).all()
    return collections.Counter(f"{state}{f' ({klass})' if klass else ''}" for state, klass in rows)


# -- the report ---------------------------------------------------------------------------------------------


def by_kind(requests: list[RecordedRequest]) -> collections.Counter[str]:
    """Requests counted by kind."""
    return collections.Counter(classify(request) for request in requests)


def refused(requests: list[RecordedRequest]) -> collections.Counter[str]:
    """403s and 429s by kind."""
    return collections.Counter(
        f"{request.status} {classify(request)}" for request in requests if request.status in (403, 429)
    )


def print_per_push(label: str, kinds: collections.Counter[str], pushes: int) -> None:
    """One line per kind: requests per push."""
    print(f"  {label}: {sum(kinds.values())} requests for {pushes} pushes")
    for kind in KINDS + tuple(sorted(set(kinds) - set(KINDS))):
        if kinds.get(kind):
            print(f"    {kind:<28} {kinds[kind] / pushes:8.2f} per push  ({kinds[kind]})")


async def run_spread(
    installations: int, pushes: int, timeout: float, *, all_at_once: bool, title: str
) -> dict[str, Any]:
    """``pushes`` pushes over ``installations`` installations (one repository each), to completion."""
    with tempfile.TemporaryDirectory(prefix="kerrigan-budget-") as name:
        async with started(Path(name), installations) as bench:
            print(f"\n== {title}", flush=True)
            began = time.perf_counter()
            shas = []
            for index in range(pushes):
                repository, installation = bench.repositories[index % len(bench.repositories)]
                sha = f"{index + 1:040x}"
                shas.append((repository, installation, sha))
                await bench.push(repository, installation, sha)
                if not all_at_once:
                    await asyncio.sleep(0.05)
            waited = await bench.settled(pushes * 5, timeout, progress=True)
            elapsed = time.perf_counter() - began
            requests = list(bench.github.requests)
            counts = await bench.counts()
            outcomes = await job_outcomes(bench.database)
            lags, never = bench.lags()
            # A second push of a commit already read (manifests unchanged): what it costs to read them.
            repository, installation, sha = shas[0]
            before = len(bench.github.requests)
            await bench.push(repository, installation, sha, ref="refs/heads/elsewhere")
            async with bench.database.sessions() as session:
                while await pending_count(session):
                    await asyncio.sleep(0.05)
            again = by_kind(bench.github.requests[before:])
            async with bench.database.sessions() as session:
                deliveries = await session.scalar(select(func.count(DeliveryRow.pk)))
            kinds = by_kind(requests)
            bad = refused(requests)
            print(
                f"  {pushes} pushes over {installations} installation(s), {len(bench.repositories)} "
                f"repositories; {'sent at once' if all_at_once else 'sent one after another'}; "
                f"{'settled' if waited >= 0 else 'NOT SETTLED'} after {elapsed:.0f} s "
                f"({counts['sessions']} sessions, {counts['completed']} completed, {counts['shown']} shown "
                f"up to date, {deliveries} deliveries)"
            )
            print(f"  jobs: {dict(sorted(outcomes.items()))}")
            print_per_push("Kerrigan and its runners", kinds, pushes)
            old = ", ".join(f"{kind} {value:.0f}" for kind, value in OLD_DESIGN.items())
            print(f"  baseline, the old design (5 workflows a push): {old} per push")
            print(f"  403s/429s received: {sum(bad.values())} {dict(bad) if bad else ''}")
            print(
                "  reconciler lag, state change -> GitHub shows it: "
                f"p50 {percentile(lags, 0.5) * 1000:.0f} ms, "
                f"p95 {percentile(lags, 0.95) * 1000:.0f} ms, max {max(lags, default=0) * 1000:.0f} ms "
                f"over {len(lags)} versions ({never} never shown on their own or by a later one)"
            )
            manifests = again["manifest listings"] + again["manifest file reads"]
            print(
                f"  a second push of the same commit (manifests unchanged): {again['manifest listings']} "
                f"listing, {again['manifest file reads']} file reads "
                f"({'met' if manifests == 1 else 'MISSED'}: 1 listing request)"
            )
            return {"lags": lags, "refused": sum(bad.values()), "settled": waited >= 0}


async def run(quick: bool) -> None:
    """The two runs."""
    spread_installations, spread_pushes = (2, 4) if quick else (20, 200)
    single_pushes = 2 if quick else 20
    print(
        "Every figure counts the requests the stand-in received. Kerrigan's budget counts the App's own\n"
        "requests (token mints) like an installation's (80 content-creating a minute), and each job mints a\n"
        "token: the mints, not the installations' budgets, set the pace of a large run."
    )
    spread = await run_spread(
        spread_installations,
        spread_pushes,
        120 if quick else 3600,
        all_at_once=False,
        title=f"{spread_pushes} pushes spread over {spread_installations} installations "
        f"({spread_pushes // spread_installations} each: under 80 content-creating requests a minute each)",
    )
    single = await run_spread(
        1,
        single_pushes,
        120 if quick else 1800,
        all_at_once=True,
        title=f"one installation, {single_pushes} pushes at once (the budget holds it under its limit)",
    )
    p95 = percentile(spread["lags"], 0.95)
    verdict = "quick run, not judged:" if quick else ("met " if p95 <= 1.0 else "MISSED")
    print(f"\n{verdict} reconciler lag p95 <= 1 s under the limits ({p95 * 1000:.0f} ms)")
    refusals = spread["refused"] + single["refused"]
    print(f"{'met ' if refusals == 0 else 'MISSED'} no 403/429 from GitHub ({refusals})")


def main() -> None:
    """Parse arguments and run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="4 pushes over 2 installations; 1 x 2")
    args = parser.parse_args()
    asyncio.run(run(args.quick))


if __name__ == "__main__":
    main()
