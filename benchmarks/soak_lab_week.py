"""A lab's week, compressed: is any pull request red, or left yellow, because of the lab? (issue 31)

On loopback: ``kerrigan serve`` (SQLite with ``--sqlite``; else PostgreSQL, two ``kerrigan serve`` replicas
and one ``kerrigan worker``), a ``kerrigan runner`` agent process on each of 3 runner hosts, 24 simulated
boards on one PDU stand-in (each host's devices file wires its 8 boards by command, as ``kerrigan demo``
does: ``kerrigan.testing.board_wiring``), and the GitHub stand-in (in this process, GitHub's rate limits
on). A driver pushes to 6 repositories at random (``--pushes-per-hour`` each) over ``--hours`` of lab
time, ``--speed`` times faster than real time. Each push's commit holds the job script and its verdicts:
the soak decides whether each task passes or fails by design, so a check run's conclusion can be judged
against the truth. The job logs in on its board's console, marks its start there, runs for its time (10
lab minutes), marks its end and exits with its verdict; a board that stops answering is a device fault
(exit 75, Kerrigan's contract for "the device failed me"), a wrong answer fails the test.

The week's trouble, drawn from ``--seed``, each at its share of the run so that a short run has it too:
``--hang-rate`` of the jobs see their board hang mid-run (silent until its power is cycled); one board
(``pcie-03``) answers the ``smoke`` task wrongly 80% of the time (flaky); one (``pcie-07``) dies for good
a fifth of the way in; the owner takes ``som-04`` for maintenance (an hour); ``rig-2`` is restarted twice
(its agent killed as a power loss kills it, started again) and ``rig-3`` lost for an hour (at least 25
s, past the runner lease, compressed to 15 s); a person
reserves ``som-09`` for an hour through the API; the PDU answers nothing for ten lab minutes (at least 20
s, longer than the power commands' timeout). Outages are capped at a share of a short run.

Printed, each against its goal; the exit status is 1 when one is missed:

- check runs concluded ``failure`` whose commit passes by design (the lab's failure shown as the code's;
  those the flaky board caused before Kerrigan named it suspect are counted apart: no one could tell yet),
  and check runs whose commit fails by design concluded anything else (but the lab's conclusion when the
  failing task never ran: a task it needs failed for the lab past its retries); check runs concluded for
  the lab (``action_required``/``neutral``: not red, but not green either);
- check runs not completed at the end (or missing); the times a healthy board sat idle longer than
  :data:`IDLE_GRACE_S` while a queued job could have run on it (seen from outside the dispatcher:
  :func:`watch_idle`), and the longest (those while a gang queued past 60 s may have kept the board, by
  the queue's rule, apart);
- deliveries lost (not taken, stored or processed) or processed twice (more than one check run for a
  commit and workflow); jobs run twice (one job id starting on the boards twice); devices held by a job at
  the end;
- hung boards back in service (the first job to succeed on the board after): median and p95, and any
  never back; the flaky board named suspect and at which lab hour (a goal once it ran one repository's
  task :data:`FLAKY_DECISIVE_RUNS` times); the dead board ``bad`` and how long after it died (a goal once a
  job was sent to it); jobs leased the board in maintenance, or reserved;
- GitHub requests per push and the installation's hourly budget at this rate in lab time; secondary-limit
  answers (in compressed time: the soak's rate in real time is far above a lab's).

    python benchmarks/soak_lab_week.py --quick --sqlite     # 2 lab hours at 240x: about 75 s in all
    python benchmarks/soak_lab_week.py --quick --postgres postgresql+asyncpg://postgres@127.0.0.1/soak_a
    python benchmarks/soak_lab_week.py --sqlite              # the week: 168 lab hours at 600x

The workflows: ``smoke`` as a matrix of two jobs, ``suite`` after it (``needs``), and ``pair``, a gang of
two boards on one host; 40% of the pushes go to a pull request's branch.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

import aiohttp
from sqlalchemy import func, select

from kerrigan.core.device_status import Health
from kerrigan.core.dispatch_order import AGING_S
from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import HOLDING_A_DEVICE, FailureClass, JobState
from kerrigan.core.matrix import task_of
from kerrigan.core.recovery import RECOVERY_TASK
from kerrigan.core.sessions import SessionState
from kerrigan.store.audit import Change
from kerrigan.store.check_runs import behind_count
from kerrigan.store.database import Database
from kerrigan.store.deliveries import pending_count
from kerrigan.store.inventory import set_state
from kerrigan.store.models import (
    DeliveryRow,
    DeviceLeaseRow,
    DeviceRow,
    JobRow,
    ReservationRow,
    RunnerHostRow,
    SessionRow,
)
from kerrigan.store.suspects import FAILED, PASSED
from kerrigan.store.tokens import create_token
from kerrigan.testing.board import Mode, SimulatedBoard
from kerrigan.testing.board_wiring import wired_device, write_devices_file
from kerrigan.testing.github import GitHubStandIn, pull_request_payload, push_payload, signed_headers
from kerrigan.testing.pdu import GudePdu
from kerrigan.testing.process_lab import ProcessLab, runner_agent, store_lab
from kerrigan.testing.processes import Served, free_port, wait_ready

SECRET: Final = "soak-secret"  # noqa: S105 -- the soak's own throwaway webhook secret
INSTALLATION: Final = 1
ACCOUNT: Final = "lab"
REPOSITORIES: Final = tuple(f"{ACCOUNT}/firmware-{n}" for n in range(6))
HOSTS: Final = ("rig-1", "rig-2", "rig-3")
POOLS: Final = ("som", "pcie")  # 12 boards each, spread over the three hosts
BOARDS_PER_POOL: Final = 12
BOOT_S: Final = 0.5
BOOT_TIMEOUT_S: Final = 5
TASKS: Final = ("smoke", "suite", "pair")
WORKFLOW: Final = "hil"
FAIL_RATE: Final = 0.12  # commits whose suite fails by design
PULL_SHARE: Final = 0.4  # pushes to a pull request's branch (the others to main)
PULLS: Final = 2  # open pull requests a repository
HOUR_S: Final = 3600.0
JOB_LAB_S: Final = 600.0  # a job's test time, in lab seconds (at least JOB_MIN_S of real time)
JOB_MIN_S: Final = 0.5
START: Final = "soak-start"
FLAKY: Final = "pcie-03"  # fails FLAKY_TASK far more often than its peers
FLAKY_TASK: Final = "smoke"
FLAKY_RATE: Final = 0.8
# Suspects are judged per repository's task (a matrix cell is a task): spread over 12 boards, a board runs
# one cell about 9 times a week, too few to name at Kerrigan's 1% false discovery rate over the week's ~200
# (device, task) pairs. So one repository asks for a board revision the lab has 4 of, the flaky one among
# them, as a team on scarce hardware does; there it runs each cell about 25 times. By 15 runs at 80% its
# failures are beyond doubt (one-sided Fisher p near 1e-6 against peers failing 15%).
FLAKY_DECISIVE_RUNS: Final = 15
SCARCE: Final = ("pcie-01", "pcie-02", "pcie-03", "pcie-04")  # the boards of revision b
SCARCE_REPOSITORY: Final = REPOSITORIES[1]  # a pcie repository: its workflow asks for revision b
DEAD: Final = "pcie-07"  # dies for good
MAINTAINED: Final = "som-04"  # its owner takes it for maintenance
RESERVED: Final = "som-09"  # a person reserves it
RESERVER: Final = "octocat"
RESTARTED: Final = "rig-2"  # restarted twice
LOST: Final = "rig-3"  # lost for an hour
# The runner lease, compressed as the week is (60 s by default): a host lost for a lab hour must outlast it
# for its jobs to be found lost and retried, as they are in a real lab.
RUNNER_LEASE_S: Final = 15
HOST_LOST_MIN_S: Final = 25.0
PDU_SILENT_LAB_S: Final = 600.0
PDU_SILENT_MIN_S: Final = 20.0  # real seconds: longer than the power commands' timeout (10 s)
END: Final = "soak-end"
GOAL_MISSED: Final = 1
RAN: Final = PASSED | FAILED  # the jobs that say something of their board, as Kerrigan counts them
# An idle board and a queued job that could run on it meet within the dispatcher's round and the agent's
# poll, real seconds that no compression shortens: a board idle longer than this was left so.
IDLE_GRACE_S: Final = 3.0

# The job: log in on the board's console, mark the start, run, mark the end, exit with the verdict. A board
# that does not answer is the device's fault, not the test's: exit 75 (DEVICE_FAULT_EXIT).
JOB_SCRIPT: Final = r"""#!/usr/bin/env python3
import os, re, select, sys, time

task = sys.argv[1]
verdicts = dict(line.split("=") for line in open("scripts/verdicts").read().split())
seconds = float(open("scripts/seconds").read())
console = os.environ.get("KERRIGAN_CONSOLE") or os.environ["KERRIGAN_DEVICE_DUT_CONSOLE"]  # a gang's dut
fd = os.open(console, os.O_RDWR | os.O_NOCTTY)
seen = ""

def expect(pattern, wait_s=10.0):
    global seen
    deadline = time.monotonic() + wait_s
    while not re.search(pattern, seen.rpartition("\n")[2]):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            print(f"the board did not answer within {wait_s:g} s: a device fault")
            sys.exit(75)
        seen += os.read(fd, 4096).decode(errors="replace")
    found, seen = seen, ""
    return found

def run(line):
    os.write(fd, (line + "\r").encode())
    return expect(r"# $")

os.write(fd, b"\r")
if re.search(r"login: $", expect(r"(login: |# )$")):
    os.write(fd, b"root\r")
    expect(r"# $")
job = os.environ["KERRIGAN_JOB_ID"]
run(f"echo START {job} {task}")
time.sleep(seconds)
# The answer on a line of its own: the board echoes the command line, which holds the same words.
if not re.search(rf"(?m)^END {re.escape(job)} {task}\r?$", run(f"echo END {job} {task}")):
    print(f"{task}: the board's answer was wrong: the test failed")
    sys.exit(1)
print(f"{task} on {os.environ['KERRIGAN_DEVICE_ID']}: verdict {verdicts[task]}")
sys.exit(int(verdicts[task]))
""".replace("START", START).replace("END", END)


def manifest(pool: str, revision: str | None = None) -> str:
    """The workflow of a repository whose boards are ``pool``'s (of ``revision`` if given): ``smoke`` on two
    boards (a matrix), then ``suite`` (it needs ``smoke``), and ``pair``, a gang of two boards on one host
    (it drives ``dut``)."""
    shapes = {"smoke": "    matrix: {slot: ['1', '2']}\n", "suite": "    needs: smoke\n"}
    shapes["pair"] = "    devices: {dut: {}, peer: {}}\n"
    labels = f"form_factor: {pool}" + (f", rev: {revision}" if revision else "")
    tasks = "".join(
        f"  - id: {task}\n    run: ./scripts/job.py {task}\n    vcpus: 1\n{shapes[task]}" for task in TASKS
    )
    return (
        f"name: {WORKFLOW}\non: {{push: {{branches: [main]}}, pull_request: {{branches: [main]}}}}\n"
        f"scheduling:\n  max_devkits: 2\n  labels: {{{labels}}}\ntasks:\n{tasks}"
    )


def inventory() -> str:
    """3 hosts, 2 pools of 12 boards, each pool's boards spread over the hosts."""
    lines = ["hosts:", *(f"  - id: {host}" for host in HOSTS), "pools:"]
    for pool in POOLS:
        lines += [f"  - id: {pool}", f"    name: {pool}", "    owners: [octocat]"]
        lines += [f"    labels: {{form_factor: {pool}}}", "    devices:"]
        for n in range(BOARDS_PER_POOL):
            device = f"{pool}-{n + 1:02d}"
            lines.append(
                f"      - {{id: {device}, board: modalix, target_type: devkit, os_type: linux, "
                f"host: {HOSTS[n % len(HOSTS)]}, labels: {{rev: {revision_of(device)}}}}}"
            )
    return "\n".join(lines) + "\n"


def device_ids() -> list[str]:
    return [f"{pool}-{n + 1:02d}" for pool in POOLS for n in range(BOARDS_PER_POOL)]


def host_of(device: str) -> str:
    return HOSTS[(int(device.rpartition("-")[2]) - 1) % len(HOSTS)]


@dataclass(frozen=True)
class Push:
    """A push the driver sends: when (lab seconds from the start), where, and each task's verdict."""

    at: float
    repository: str
    sha: str
    verdicts: Mapping[str, int]
    pull: int | None = None  # a push to this pull request's branch (else to main)

    @property
    def fails(self) -> bool:
        return any(self.verdicts.values())


def schedule(hours: float, per_hour: float, rng: random.Random) -> list[Push]:
    """The week's pushes: each repository pushes at random (a Poisson process) ``per_hour`` times an hour."""
    pushes = []
    for repository in REPOSITORIES:
        at = rng.expovariate(per_hour / HOUR_S)
        while at < hours * HOUR_S:
            verdicts = {"smoke": 0, "suite": 1 if rng.random() < FAIL_RATE else 0, "pair": 0}
            pull = rng.randint(1, PULLS) if rng.random() < PULL_SHARE else None
            pushes.append(Push(at, repository, f"{rng.getrandbits(160):040x}", verdicts, pull))
            at += rng.expovariate(per_hour / HOUR_S)
    return sorted(pushes, key=lambda push: push.at)


@dataclass
class Boards:
    """The 24 boards on the PDU, and what the soak saw on them: job starts per job id, hangs."""

    pdu: GudePdu
    boards: dict[str, SimulatedBoard]
    outlets: dict[str, int]
    hang_rate: float
    rng: random.Random
    starts: collections.Counter[str] = field(default_factory=collections.Counter)
    hangs: list[tuple[str, datetime]] = field(default_factory=list)

    def listen(self, device: str) -> None:
        board = self.boards[device]

        def heard(line: str) -> str | None:
            words = line.split()
            if words[:2] == ["echo", START]:
                self.starts[words[2]] += 1
                if self.rng.random() < self.hang_rate:
                    board.hang()
                    self.hangs.append((device, datetime.now(UTC)))
            elif (
                words[:2] == ["echo", END]
                and device == FLAKY
                and words[3:] == [FLAKY_TASK]
                and self.rng.random() < FLAKY_RATE
            ):
                return "i2c i2c-3: transfer timed out"  # the test reads garbage: it fails
            return None

        board.on_command(heard)


@contextlib.asynccontextmanager
async def wired_boards(folder: Path, hang_rate: float, rng: random.Random) -> AsyncIterator[Boards]:
    """The PDU stand-in and a board on each of its outlets; a devices file per host in ``folder``."""
    async with contextlib.AsyncExitStack() as stack:
        pdu = GudePdu(outlets=len(device_ids()))
        await pdu.start()
        stack.push_async_callback(pdu.close)
        found = Boards(pdu, {}, {}, hang_rate, rng)
        wiring: dict[str, dict[str, Any]] = {host: {} for host in HOSTS}
        for outlet, device in enumerate(device_ids(), start=1):
            board = SimulatedBoard(boot_s=BOOT_S)
            await board.start(serve_socket=True)
            stack.push_async_callback(board.close)
            board.attach(pdu, outlet)
            found.boards[device], found.outlets[device] = board, outlet
            found.listen(device)
            wiring[host_of(device)][device] = wired_device(
                pdu.url, outlet, board, boot_timeout_s=BOOT_TIMEOUT_S
            )
        for host, devices in wiring.items():
            write_devices_file(folder / f"devices-{host}.yml", devices)
        yield found


@contextlib.asynccontextmanager
async def kerrigan_process(
    folder: Path, name: str, env: Mapping[str, str], *args: str
) -> AsyncIterator[None]:
    """``kerrigan ARGS`` with ``env``, its output in ``folder/NAME.log``; stopped (SIGTERM) on the way out."""
    with (folder / f"{name}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "kerrigan.cli", *args, env={**os.environ, **env}, stdout=log, stderr=log
        )
        try:
            yield
        finally:
            if process.returncode is None:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), 15)
                except TimeoutError:
                    process.kill()
                    await process.wait()


@dataclass(frozen=True)
class Lab:
    """The running lab: the servers' URLs (webhooks go to each in turn), the database, the stand-in."""

    bases: tuple[str, ...]
    database: Database
    github: GitHubStandIn
    boards: Boards
    agents: Agents


@contextlib.asynccontextmanager
async def lab(folder: Path, url: str, *, replicas: int, args: argparse.Namespace) -> AsyncIterator[Lab]:
    """The lab on ``url``: ``replicas`` servers (with a worker of their own when there are two or more),
    the agents, the boards, the stand-in."""
    rng = random.Random(args.seed)
    database = Database.connect(url)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(database.close)
        tokens = await store_lab(database, inventory())
        github = GitHubStandIn(validate=False, enforce_limits=True)
        # GitHub's limits run on lab time as the week does: 5,000 requests a lab hour, 80 content-creating
        # ones a lab minute. On real time a week's requests in minutes would spend an hour's budget (the
        # first week's run: deliveries waited 44 minutes for the reset).
        github.limits.window_s = HOUR_S / args.speed
        github.limits.content_window_s = 60.0 / args.speed
        github.limits.secondary_retry_after = max(1, round(60.0 / args.speed))
        await github.start()
        stack.push_async_callback(github.close)
        github.add_installation(INSTALLATION, ACCOUNT)
        for repository in REPOSITORIES:
            github.add_repository(repository, INSTALLATION)
        env = {
            "KERRIGAN_DATABASE_URL": url,
            "KERRIGAN_GITHUB_API_URL": github.url,
            "KERRIGAN_GITHUB_PRIVATE_KEY": str(github.private_key),
            "KERRIGAN_GITHUB_APP_ID": github.app_id,
            "KERRIGAN_WEBHOOK_SECRET": SECRET,
            "KERRIGAN_RUNNER_LEASE_S": str(RUNNER_LEASE_S),
            **({"KERRIGAN_WORKERS": "none"} if replicas > 1 else {}),
        }
        bases = []
        for replica in range(replicas):
            port = free_port()
            await stack.enter_async_context(
                kerrigan_process(folder, f"serve-{replica}", {**env, "KERRIGAN_PORT": str(port)}, "serve")
            )
            bases.append(f"http://127.0.0.1:{port}")
        if replicas > 1:
            await stack.enter_async_context(kerrigan_process(folder, "worker", env, "worker"))
        for base in bases:
            await wait_ready(base)
        boards = await stack.enter_async_context(wired_boards(folder, args.hang_rate, rng))
        agents = Agents(
            {
                # the hosts spread over the replicas
                host: ProcessLab(
                    Served(bases[index % len(bases)], github.url, github.app_id, str(github.private_key)),
                    database,
                    folder,
                    tokens,
                    env,
                )
                for index, host in enumerate(HOSTS)
            }
        )
        stack.push_async_callback(agents.close)
        for host in HOSTS:
            await agents.start(host)
        yield Lab(tuple(bases), database, github, boards, agents)


class Agents:
    """A ``kerrigan runner`` process per host, each killed (as a host that loses its power) and started
    again at will."""

    def __init__(self, labs: Mapping[str, ProcessLab]) -> None:
        self.labs = labs
        self.running: dict[str, contextlib.AsyncExitStack] = {}

    async def start(self, host: str) -> None:
        stack = contextlib.AsyncExitStack()
        options = ("--devices-file", str(self.labs[host].folder / f"devices-{host}.yml"), "--max-weight", "8")
        await stack.enter_async_context(runner_agent(self.labs[host], host, *options))
        self.running[host] = stack

    async def kill(self, host: str) -> None:
        await self.running.pop(host).aclose()

    async def close(self) -> None:
        for host in list(self.running):
            await self.kill(host)


@dataclass
class Events:
    """When each fault of the week struck and ended (wall clock), for the accounting."""

    began: datetime
    died: datetime | None = None
    outages: list[tuple[str, str, datetime, datetime]] = field(default_factory=list)  # what, host, from, to
    maintenance: tuple[datetime, datetime] | None = None
    reservation: str | None = None  # its id
    leases: dict[tuple[str, int], datetime] = field(default_factory=dict)  # (device, job) -> granted
    notes: list[str] = field(default_factory=list)
    # A healthy board idle while a queued job could have run on it: since when (still so), and each such
    # span that ended (the board, real seconds).
    idle_since: dict[str, float] = field(default_factory=dict)
    idle_waits: list[tuple[str, float]] = field(default_factory=list)
    # The same while the board may have been kept for a gang that had waited AGING_S (the queue's rule).
    kept_since: dict[str, float] = field(default_factory=dict)
    kept_waits: list[tuple[str, float]] = field(default_factory=list)

    def lab_hour(self, at: datetime, speed: float) -> float:
        return (at - self.began).total_seconds() * speed / HOUR_S


async def faults(lab: Lab, args: argparse.Namespace, events: Events) -> None:
    """The week's trouble, each at its share of the run (so that a short run has it too), lasting its lab
    time (capped at a share of the run): a board dies for good, the owner's maintenance, a runner host
    restarted twice and one lost for an hour, a person's reservation, a PDU silent for ten minutes."""
    span = args.hours * HOUR_S
    speed = args.speed
    loop = asyncio.get_running_loop()
    start = loop.time()

    async def at(share: float) -> None:
        await asyncio.sleep(max(0.0, start + share * span / speed - loop.time()))

    def lasting(lab_s: float, share: float) -> float:
        """Real seconds of an outage ``lab_s`` long, at most ``share`` of the run."""
        return min(lab_s, share * span) / speed

    async def dies() -> None:
        await at(0.2)
        board = lab.boards.boards[DEAD]
        board.mode = Mode.HANG_AT_BOOT  # at every boot from now on
        board.hang()
        events.died = datetime.now(UTC)

    async def maintenance() -> None:
        await at(0.15)
        began = datetime.now(UTC)
        await device_state(lab.database, MAINTAINED, DeviceState.MAINTENANCE, "the owner's maintenance")
        await asyncio.sleep(lasting(HOUR_S, 0.2))
        await device_state(lab.database, MAINTAINED, DeviceState.AVAILABLE, "maintenance done")
        events.maintenance = (began, datetime.now(UTC))

    async def outage(what: str, host: str, share: float, seconds: float) -> None:
        await at(share)
        down = datetime.now(UTC)
        await lab.agents.kill(host)
        await asyncio.sleep(seconds)
        await lab.agents.start(host)
        events.outages.append((what, host, down, datetime.now(UTC)))

    async def pdu_silent() -> None:
        await at(0.7)
        began = datetime.now(UTC)
        lab.boards.pdu.hang()
        await asyncio.sleep(max(PDU_SILENT_MIN_S, PDU_SILENT_LAB_S / speed))
        lab.boards.pdu.behave()
        events.outages.append(("PDU silent", "pdu", began, datetime.now(UTC)))

    async def reserve() -> None:
        await at(0.5)
        events.reservation = await reservation(lab, RESERVED, lasting(HOUR_S, 0.2), wait_s=span / speed)

    await asyncio.gather(
        dies(),
        maintenance(),
        outage("host restarted", RESTARTED, 0.3, max(1.0, 120 / speed)),
        outage("host lost", LOST, 0.4, max(HOST_LOST_MIN_S, lasting(HOUR_S, 0.25))),
        reserve(),
        outage("host restarted", RESTARTED, 0.6, max(1.0, 120 / speed)),
        pdu_silent(),
    )


async def device_state(database: Database, device: str, state: DeviceState, reason: str) -> None:
    """The device's owner puts it in ``state``, as ``kerrigan inventory`` or its page would."""
    async with database.sessions() as session, session.begin():
        change = Change("octocat", datetime.now(UTC))
        await set_state(session, device, state, reason, until=None, change=change)


async def reservation(lab: Lab, device: str, seconds: float, *, wait_s: float) -> str:
    """A person reserves ``device`` for ``seconds`` (waiting up to ``wait_s``), through the API; its id."""
    async with lab.database.sessions() as session, session.begin():
        token = await create_token(session, RESERVER, datetime.now(UTC))
    body = {"device": device, "duration_s": max(1, round(seconds)), "wait_s": max(1, round(wait_s))}
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{lab.bases[0]}/api/v1/reservations", json=body, headers=headers) as answer,
    ):
        found = await answer.json()
        if answer.status not in (200, 201, 202):
            raise RuntimeError(f"the reservation was refused: {answer.status} {found}")
        return str(found["id"])


async def drive(lab: Lab, pushes: list[Push], speed: float) -> list[str]:
    """Send each push at its time; the delivery ids the servers took."""
    job_s = max(JOB_MIN_S, JOB_LAB_S / speed)
    script = {"scripts/job.py": JOB_SCRIPT, "scripts/seconds": f"{job_s:.2f}"}
    workflows = {
        repository: {
            f".kerrigan/workflows/{WORKFLOW}.yml": manifest(
                POOLS[n % len(POOLS)], "b" if repository == SCARCE_REPOSITORY else None
            )
        }
        for n, repository in enumerate(REPOSITORIES)
    }
    loop = asyncio.get_running_loop()
    began = loop.time()
    taken = []
    async with aiohttp.ClientSession() as http:
        for index, push in enumerate(pushes):
            await asyncio.sleep(max(0.0, began + push.at / speed - loop.time()))
            verdicts = " ".join(f"{task}={verdict}" for task, verdict in push.verdicts.items())
            files = {**workflows[push.repository], **script, "scripts/verdicts": verdicts}
            lab.github.add_commit(push.repository, push.sha, files)
            event, payload = delivery(lab.github, push)
            body = json.dumps(payload).encode()
            headers = signed_headers(SECRET, event, body)
            base = lab.bases[index % len(lab.bases)]
            for _ in range(20):  # a refused or lost delivery is GitHub's to send again
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.post(f"{base}/webhooks/github", data=body, headers=headers) as answer:
                        if answer.status == 202:
                            taken.append(headers["X-GitHub-Delivery"])
                            break
                await asyncio.sleep(1)
    return taken


async def watch_leases(lab: Lab, events: Events) -> None:
    """Note each job's device lease as it is granted (a lease row lasts only while the job holds it)."""
    while True:
        async with lab.database.sessions() as session:
            rows = (
                await session.execute(
                    select(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk, DeviceLeaseRow.granted_at).where(
                        DeviceLeaseRow.job_pk.is_not(None)
                    )
                )
            ).all()
        for device, job, granted in rows:
            events.leases.setdefault((device, job), granted)
        await asyncio.sleep(0.2)


async def watch_idle(lab: Lab, events: Events) -> None:
    """Note how long each healthy board sat idle while a queued job could have run on it, as seen from
    outside the dispatcher: a board that is available, not ``bad``, held by no lease (a job's or a
    reservation's), owed no check or recovery, on a runner host that is online, unpaused and beat within
    the lease; and a ready job of a pull request's or a push's session of the board's pool, below its
    session's ``max_devkits``, whose retry does not avoid the board (a gang: with enough such boards on the
    board's host for its roles). Per board, not per job: in a busy pool every queued job matches the board
    that just freed, but only the first in line is owed it."""
    while True:
        now = time.monotonic()
        async with lab.database.sessions() as session:
            queued = (
                await session.execute(
                    select(
                        JobRow.pk,
                        JobRow.requirements,
                        JobRow.avoid_devices,
                        SessionRow.pk,
                        SessionRow.max_devkits,
                        JobRow.ready_at,
                    )
                    .join(SessionRow, JobRow.session_pk == SessionRow.pk)
                    .where(
                        JobRow.state == JobState.QUEUED,
                        JobRow.ready_at.is_not(None),
                        SessionRow.health_check_device.is_(None),
                    )
                )
            ).all()
            held = collections.Counter(
                (
                    await session.scalars(
                        select(JobRow.session_pk).join(DeviceLeaseRow, DeviceLeaseRow.job_pk == JobRow.pk)
                    )
                ).all()
            )
            leased = set((await session.scalars(select(DeviceLeaseRow.device_id))).all())
            owed = set(
                (
                    await session.scalars(
                        select(SessionRow.health_check_device).where(
                            SessionRow.health_check_device.is_not(None),
                            SessionRow.state != SessionState.COMPLETED,
                        )
                    )
                ).all()
            )
            hosts = {
                host.id
                for host in (await session.scalars(select(RunnerHostRow))).all()
                if host.online
                and host.paused_at is None
                and host.last_heartbeat_at is not None
                and (datetime.now(UTC) - host.last_heartbeat_at).total_seconds() < RUNNER_LEASE_S / 2
            }
            idle = [
                device
                for device in (await session.scalars(select(DeviceRow))).all()
                if device.state is DeviceState.AVAILABLE
                and device.health is not Health.BAD
                and device.id not in leased
                and device.id not in owed
                and device.host in hosts
            ]
        shapes = {job: _shape(requirements) for job, requirements, *_ in queued}
        aged = datetime.now(UTC) - timedelta(seconds=AGING_S)
        # A gang queued past AGING_S has its host's free boards kept for it (docs/manifest.md): a board of
        # its pool may sit idle for it, by the queue's rule, not the lab's fault.
        kept_for_gangs = {
            shapes[job][0]
            for job, _, _, _, _, ready in queued
            if shapes[job][2] > 1 and ready is not None and ready < aged
        }
        waiting: set[str] = set()
        kept: set[str] = set()
        for job, _, avoid, session_pk, max_devkits, _ in queued:
            pool, revision, gang = shapes[job]
            if held[session_pk] + gang > max_devkits:
                continue  # its session's own cap: not the lab's
            boards = [
                device
                for device in idle
                if device.id.split("-")[0] == pool
                and revision in (None, revision_of(device.id))
                and device.id not in avoid
            ]
            per_host = collections.Counter(device.host for device in boards)
            owed_it = {device.id for device in boards if per_host[device.host] >= gang}
            (kept if pool in kept_for_gangs else waiting).update(owed_it)
        kept -= waiting
        for since, waits, now_idle in (
            (events.idle_since, events.idle_waits, waiting),
            (events.kept_since, events.kept_waits, kept),
        ):
            for board in now_idle:
                since.setdefault(board, now)
            for board in set(since) - now_idle:
                waits.append((board, now - since.pop(board)))
        await asyncio.sleep(0.25)


def _shape(requirements: dict[str, Any] | None) -> tuple[str, str | None, int]:
    """A queued job's pool (its ``form_factor``), the board revision it asks for if any, and how many
    boards it takes (a gang: one a role)."""
    roles = (requirements or {}).get("roles") or [requirements or {}]  # a gang's roles share the pool
    labels = roles[0].get("labels") or {}
    pools = labels.get("form_factor") or [""]
    revisions = labels.get("rev") or [None]
    return str(pools[0]), revisions[0], len(roles)


def revision_of(device: str) -> str:
    return "b" if device in SCARCE else "a"


def delivery(github: GitHubStandIn, push: Push) -> tuple[str, dict[str, Any]]:
    """The event GitHub sends for ``push`` (a pull request opened by its first push, synchronized by the
    next), the stand-in's pull request moved along."""
    if push.pull is None:
        return "push", push_payload(push.repository, push.sha, installation=INSTALLATION)
    branch = f"feature-{push.pull}"
    if push.pull in github.repositories[push.repository].pulls:
        github.push_to_pull(push.repository, push.pull, push.sha)
        action = "synchronize"
    else:
        github.add_pull(push.repository, push.pull, head_sha=push.sha, head_ref=branch)
        action = "opened"
    payload = pull_request_payload(
        push.repository, push.pull, push.sha, action=action, installation=INSTALLATION, branch=branch
    )
    return "pull_request", payload


async def settled(lab: Lab, expected_runs: int, timeout: float) -> float:
    """Wait until GitHub shows ``expected_runs`` check runs, all completed, nothing is pending or behind,
    and no job holds a device; seconds waited, or -1 at ``timeout``."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    while loop.time() - began < timeout:
        runs = list(lab.github.check_runs.values())
        if len(runs) >= expected_runs and all(run["status"] == "completed" for run in runs):
            async with lab.database.sessions() as session:
                pending = await pending_count(session)
                behind = await behind_count(session)
                holding = await session.scalar(
                    select(func.count(JobRow.pk)).where(JobRow.state.in_(HOLDING_A_DEVICE))
                )
            if not pending and not behind and not holding:
                return loop.time() - began
        await asyncio.sleep(0.5)
    return -1.0


@dataclass(frozen=True)
class Goal:
    """One line of the table: what, the figure, and whether it meets its goal (None: a figure only)."""

    what: str
    figure: str
    met: bool | None


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def account(  # noqa: PLR0915 -- one table, read in one place
    lab: Lab, pushes: list[Push], taken: list[str], events: Events, args: argparse.Namespace
) -> list[Goal]:
    """The goals, from the stand-in's check runs, the store and what the boards saw."""
    truth = {push.sha: push for push in pushes}
    runs = list(lab.github.check_runs.values())
    per = collections.Counter((run["head_sha"], run["name"]) for run in runs)
    async with lab.database.sessions() as session:
        stored = set((await session.scalars(select(DeliveryRow.delivery_id))).all())
        unprocessed = await session.scalar(
            select(func.count(DeliveryRow.pk)).where(DeliveryRow.processed_at.is_(None))
        )
        held = (
            await session.execute(select(DeviceLeaseRow.device_id).where(DeviceLeaseRow.job_pk.is_not(None)))
        ).all()
        jobs = list((await session.scalars(select(JobRow))).all())
        session_of_run = dict((await session.execute(select(SessionRow.check_run_id, SessionRow.pk))).all())
        repository_of = dict((await session.execute(select(SessionRow.pk, SessionRow.repository))).all())
        cancel_reasons = dict(
            (await session.execute(select(SessionRow.check_run_id, SessionRow.cancel_reason))).all()
        )
        devices = {row.id: row for row in (await session.scalars(select(DeviceRow))).all()}
        reserved = (
            await session.scalar(select(ReservationRow).where(ReservationRow.id == events.reservation))
            if events.reservation
            else None
        )
    now = time.monotonic()
    # Spans still open at the end count to now.
    idle_waits = [*events.idle_waits, *((board, now - since) for board, since in events.idle_since.items())]
    kept_waits = [*events.kept_waits, *((board, now - since) for board, since in events.kept_since.items())]
    idle_long = [span for span in idle_waits if span[1] > IDLE_GRACE_S]
    longest = max(idle_waits, key=lambda span: span[1], default=("-", 0.0))
    jobs_of: dict[int, list[JobRow]] = collections.defaultdict(list)
    for job in jobs:
        jobs_of[job.session_pk].append(job)

    # The flaky board, per repository's task (each matrix cell one, as Kerrigan judges them): its runs, and
    # when it was named suspect there (a failure on it first judged a suspect's).
    def flaky_task(job: JobRow) -> tuple[str, str] | None:
        if job.device_id != FLAKY or task_of(job.task_id) != FLAKY_TASK:
            return None
        return repository_of[job.session_pk], job.task_id

    flaky_runs = collections.Counter(
        key for job in jobs if job.state in RAN and (key := flaky_task(job)) is not None
    )
    named_in: dict[tuple[str, str], datetime] = {}
    for job in jobs:
        if job.suspect_runs and job.finished_at and (key := flaky_task(job)) is not None:
            named_in[key] = min(job.finished_at, named_in.get(key, job.finished_at))
    unnamed = sorted(
        key for key, runs in flaky_runs.items() if runs >= FLAKY_DECISIVE_RUNS and key not in named_in
    )

    def before_named(run: dict[str, Any]) -> bool:
        """A red check run whose test failures (what makes it red: the lab's own failures conclude it for the
        lab) were all the flaky board's before anyone could tell."""
        failed = [
            job
            for job in jobs_of.get(session_of_run.get(run["id"], -1), [])
            if job.state is JobState.FAILED and job.failure_class is FailureClass.TEST and job.finished_at
        ]
        return bool(failed) and all(
            (key := flaky_task(job)) is not None and (key not in named_in or job.finished_at <= named_in[key])
            for job in failed
        )

    red = [r for r in runs if r.get("conclusion") == "failure" and not truth[r["head_sha"]].fails]
    unavoidable = [r for r in red if before_named(r)]
    lab_red = [r for r in red if not before_named(r)]

    def superseded(run: dict[str, Any]) -> bool:
        """Cancelled because a later push to its repository's branch superseded it, as Kerrigan does."""
        reason = cancel_reasons.get(run["id"]) or ""
        if run.get("conclusion") != "cancelled" or not reason.startswith("superseded by "):
            return False
        pushed = truth[run["head_sha"]]
        later = reason.removeprefix("superseded by ").strip()
        return any(
            push.repository == pushed.repository and push.at > pushed.at and push.sha.startswith(later)
            for push in pushes
        )

    superseded_runs = [r for r in runs if superseded(r)]

    def tested(run: dict[str, Any]) -> bool:
        """A job of the run's session failed its test: the code's failure was seen."""
        return any(
            job.failure_class is FailureClass.TEST
            for job in jobs_of.get(session_of_run.get(run["id"], -1), [])
        )

    lab_concluded = [r for r in runs if r.get("conclusion") in ("action_required", "neutral")]
    # A failing commit whose failing task the lab kept from running (a task it needs failed for the lab
    # past its retries) is the lab's conclusion, not a hidden failure: nobody saw the code fail.
    untested = [r for r in lab_concluded if truth[r["head_sha"]].fails and not tested(r)]
    code_hidden = [
        r
        for r in runs
        if r["status"] == "completed"
        and truth[r["head_sha"]].fails
        and r.get("conclusion") != "failure"
        and not superseded(r)
        and r not in untested
    ]
    for run in [*lab_red, *lab_concluded]:  # what a later session needs to find the cause
        failed = [
            f"{job.task_id} on {job.device_id} ({job.host}): {job.reason or 'exit'} {job.exit_status}"
            for job in jobs_of.get(session_of_run.get(run["id"], -1), [])
            if job.state in (JobState.FAILED, JobState.RETRIED)
        ]
        print(f"  {run['conclusion']} for the lab: {run['head_sha'][:8]} {run['name']}: {'; '.join(failed)}")
    shown = {run["head_sha"] for run in runs}
    missing = [push for push in pushes if push.sha not in shown]
    open_runs = [run for run in runs if run["status"] != "completed"]
    lost = len(pushes) - len(taken) + sum(1 for delivery in taken if delivery not in stored)
    lost += int(unprocessed or 0)
    twice = sum(count - 1 for count in per.values() if count > 1)
    ran_twice = [job for job, count in lab.boards.starts.items() if count > 1]

    # Hung boards back in service: the first job (a recovery or any other) that succeeded on the board after
    # it hung. A board no job was given since is not counted as never back: nothing tried it.
    back, never, untried = [], [], []
    for device, when in lab.boards.hangs:
        if device == DEAD:
            continue
        after = [job for job in jobs if job.device_id == device and job.started_at and job.started_at > when]
        found = min(
            (job.finished_at for job in after if job.state is JobState.SUCCEEDED and job.finished_at),
            default=None,
        )
        if found is not None:
            back.append((found - when).total_seconds())
        elif after:
            never.append(device)
        else:
            untried.append(device)
    hung = len(back) + len(never) + len(untried)
    hang_line = (
        f"{hung} hangs; back in service median {statistics.median(back):.1f} s, "
        f"p95 {percentile(back, 0.95):.1f} s (real time); given no job since: {untried}"
        if back
        else f"{hung} hangs, none back in service"
    )

    tried_dead = [
        job
        for job in jobs
        if job.device_id == DEAD and events.died and job.created_at and job.created_at > events.died
    ]
    dead = devices[DEAD]
    dead_bad = dead.health is Health.BAD
    dead_took = (
        f"{(dead.health_at - events.died).total_seconds():.0f} s after it died"
        if dead_bad and dead.health_at and events.died
        else f"health {dead.health.value}"
    )
    speed = args.speed

    def leased_on(device: str, window: tuple[datetime, datetime] | None) -> list[int]:
        """Jobs granted ``device`` within ``window`` (a job leased just before it began may still start in
        it: the lease decided, as a running job is let finish)."""
        if window is None:
            return []
        return sorted(
            job
            for (leased, job), granted in events.leases.items()
            if leased == device and window[0] < granted < window[1]
        )

    in_maintenance = leased_on(MAINTAINED, events.maintenance)
    reserved_window = None
    if reserved is not None and reserved.granted_at is not None:
        reserved_window = (reserved.granted_at, reserved.ended_at or datetime.now(UTC))
    in_reservation = leased_on(RESERVED, reserved_window)
    reservation_line = (
        f"granted {(reserved.granted_at - reserved.created_at).total_seconds():.1f} s after asked, "
        f"{reserved.state}; jobs leased it meanwhile: {len(in_reservation)}"
        if reserved is not None and reserved.granted_at is not None
        else "never granted"
    )

    requests = len(lab.github.requests)
    per_push = requests / max(1, len(pushes))
    budget = lab.github.limits.primary_limit
    hourly = per_push * len(pushes) / max(args.hours, 1e-9)
    secondary = [hit for hit in lab.github.limits.limited if hit.kind.startswith("secondary")]
    test_jobs = [job for job in jobs if job.task_id != RECOVERY_TASK]
    states = collections.Counter(str(job.state) for job in test_jobs)
    most_flaky = max(flaky_runs.values(), default=0)
    flaky_line = "; ".join(
        f"{repository.partition('/')[2]} {task}: {runs} runs, "
        + (
            f"named at lab hour {events.lab_hour(named_in[repository, task], speed):.1f}"
            if (repository, task) in named_in
            else "not named"
        )
        for (repository, task), runs in sorted(flaky_runs.items())
    )
    flaky_line = (
        f"{len(unavoidable)} check runs red before it was named (no one could tell yet); {flaky_line}"
    )
    outages = "; ".join(
        f"{what} {host} at lab hour {events.lab_hour(down, speed):.1f}, {(up - down).total_seconds():.0f} s"
        for what, host, down, up in sorted(events.outages, key=lambda outage: outage[2])
    )
    return [
        Goal("check runs red for the lab (goal 0)", f"{len(lab_red)} of {len(runs)}", not lab_red),
        Goal(
            "code failures shown as anything else (goal 0)",
            f"{len(code_hidden)} of {sum(1 for p in pushes if p.fails)} failing commits",
            not code_hidden,
        ),
        Goal("check runs cancelled, superseded by a later push", f"{len(superseded_runs)}", None),
        Goal(
            "check runs concluded for the lab (action_required, neutral)",
            f"{len(lab_concluded)} {[r['head_sha'][:8] for r in lab_concluded][:5]}; of failing commits "
            f"whose failing task the lab kept from running: {len(untested)}",
            None,
        ),
        Goal(
            "check runs not completed or missing at the end (goal 0)",
            f"{len(open_runs)} open, {len(missing)} missing",
            not open_runs and not missing,
        ),
        Goal(
            f"board idle while a job it could run queued, over {IDLE_GRACE_S:g} s (goal 0)",
            f"{len(idle_long)}; longest {longest[1]:.1f} s ({longest[0]}); {len(idle_waits)} times in all, "
            f"median {statistics.median([span[1] for span in idle_waits] or [0.0]):.2f} s",
            not idle_long,
        ),
        Goal(
            "the same while a gang queued past 60 s may have kept it",
            f"{sum(1 for _, waited in kept_waits if waited > IDLE_GRACE_S)} over {IDLE_GRACE_S:g} s; "
            f"longest {max((waited for _, waited in kept_waits), default=0.0):.1f} s",
            None,
        ),
        Goal("deliveries lost (goal 0)", f"{lost} of {len(pushes)}", lost == 0),
        Goal("deliveries processed twice (goal 0)", f"{twice} extra check runs", twice == 0),
        Goal(
            "jobs run twice on the boards (goal 0)",
            f"{len(ran_twice)} of {len(lab.boards.starts)} {ran_twice[:5]}",
            not ran_twice,
        ),
        Goal(
            "devices held by a job at the end (goal 0)",
            f"{len(held)} {[row[0] for row in held][:5]}",
            not held,
        ),
        Goal(
            "hung boards never back in service (goal 0)", f"{len(never)} {never[:5]}; {hang_line}", not never
        ),
        # A goal once it ran a repository's task FLAKY_DECISIVE_RUNS times: fewer runs cannot tell.
        Goal(
            f"flaky board {FLAKY} named suspect for {FLAKY_TASK}",
            f"{len(unnamed)} not named after {FLAKY_DECISIVE_RUNS} runs {unnamed}; {flaky_line}",
            not unnamed if most_flaky >= FLAKY_DECISIVE_RUNS else None,
        ),
        # Only a board given a job after it died can be found dead.
        Goal(
            f"dead board {DEAD} bad",
            f"{dead_took}; jobs on it after it died: {len(tried_dead)}",
            dead_bad if tried_dead else None,
        ),
        Goal(
            f"jobs leased {MAINTAINED} in maintenance (goal 0)",
            f"{len(in_maintenance)}",
            not in_maintenance,
        ),
        Goal(
            f"jobs leased {RESERVED} reserved (goal 0)",
            reservation_line,
            reserved_window is not None and not in_reservation,
        ),
        Goal("outages", outages or "none", None),
        Goal(
            "GitHub requests per push",
            f"{per_push:.1f} ({requests} requests); {hourly:.0f} an hour of lab time, "
            f"{100 * hourly / budget:.1f}% of the installation's {budget}",
            None,
        ),
        Goal("secondary-limit answers", f"{len(secondary)} (in compressed time)", None),
        Goal("jobs (test tasks), by state", dict_text(states), None),
    ]


def dict_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in sorted(counts.items()))


def show(goals: list[Goal]) -> bool:
    """Print the table; whether every goal was met."""
    width = max(len(goal.what) for goal in goals)
    for goal in goals:
        mark = {True: "ok", False: "MISSED", None: ""}[goal.met]
        print(f"  {goal.what:<{width}}  {mark:<6}  {goal.figure}")
    return all(goal.met is not False for goal in goals)


@contextlib.contextmanager
def workspace(keep: bool) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="kerrigan-soak-week-"))
    try:
        yield folder
    finally:
        if keep:
            print(f"(logs and database kept in {folder})")
        else:
            shutil.rmtree(folder, ignore_errors=True)


async def soak(args: argparse.Namespace) -> bool:
    """One run: the lab, the pushes, the settle, the table."""
    rng = random.Random(args.seed)
    pushes = schedule(args.hours, args.pushes_per_hour, rng)
    with workspace(args.keep) as folder:
        async with postgres_database(args.postgres) if not args.sqlite else sqlite_database(folder) as url:
            replicas = 1 if args.sqlite else 2
            kind = "SQLite, one server" if args.sqlite else "PostgreSQL, two server replicas and a worker"
            print(
                f"== {args.hours:g} lab hours at {args.speed:g}x ({kind}): {len(pushes)} pushes "
                f"({sum(1 for push in pushes if push.pull)} to pull requests) from "
                f"{len(REPOSITORIES)} repositories, {len(HOSTS)} runner hosts, {len(device_ids())} boards, "
                f"hang rate {args.hang_rate:.0%}, seed {args.seed}"
            )
            began = time.perf_counter()
            async with lab(folder, url, replicas=replicas, args=args) as running:
                ready = time.perf_counter() - began
                events = Events(datetime.now(UTC))
                watching = asyncio.create_task(watch_leases(running, events))
                idling = asyncio.create_task(watch_idle(running, events))
                taken, _ = await asyncio.gather(
                    drive(running, pushes, args.speed), faults(running, args, events)
                )
                sent = time.perf_counter() - began
                waited = await settled(running, len(pushes), args.settle_s)
                watching.cancel()
                idling.cancel()
                print(
                    f"  lab up in {ready:.1f} s; pushes sent over {sent - ready:.1f} s; "
                    + (
                        f"settled {waited:.1f} s after the last"
                        if waited >= 0
                        else f"NOT settled in {args.settle_s:g} s"
                    )
                )
                goals = await account(running, pushes, taken, events, args)
            met = show(goals)
            verdict = "every goal met" if met else "A GOAL WAS MISSED"
            print(f"  {time.perf_counter() - began:.0f} s in all: {verdict}")
            if not met and not args.keep:
                print("  (rerun with --keep for the servers' and agents' logs)")
            return met


@contextlib.asynccontextmanager
async def sqlite_database(folder: Path) -> AsyncIterator[str]:
    yield f"sqlite+aiosqlite:///{folder / 'kerrigan.db'}"


@contextlib.asynccontextmanager
async def postgres_database(url: str | None) -> AsyncIterator[str]:
    """A database of its own on the server of ``url``, dropped at the end (soak_github_faults' way)."""
    if not url:
        raise SystemExit("PostgreSQL needs --postgres URL (or KERRIGAN_TEST_POSTGRES_URL); or use --sqlite")
    from soak_github_faults import scratch_database  # noqa: PLC0415 -- only with PostgreSQL

    async with scratch_database(url) as scratch:
        yield scratch


def main() -> None:
    """Parse arguments and run; exit 1 when a goal is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 lab hours at 240x (about a minute of pushes)")
    parser.add_argument("--hours", type=float, default=168.0, help="lab hours to run (a week: 168)")
    parser.add_argument("--speed", type=float, default=600.0, help="lab seconds per real second")
    parser.add_argument("--pushes-per-hour", type=float, default=1.0, help="per repository, in lab time")
    parser.add_argument("--hang-rate", type=float, default=0.05, help="jobs whose board hangs mid-run")
    parser.add_argument("--sqlite", action="store_true", help="one server on SQLite (else PostgreSQL)")
    parser.add_argument("--postgres", default=os.environ.get("KERRIGAN_TEST_POSTGRES_URL"))
    parser.add_argument("--settle-s", type=float, default=300.0, help="how long to wait for the end")
    parser.add_argument("--seed", type=int, default=31)
    parser.add_argument("--keep", action="store_true", help="keep the logs and the database")
    args = parser.parse_args()
    if args.quick:
        args.hours, args.speed = 2.0, 240.0
    sys.exit(0 if asyncio.run(soak(args)) else GOAL_MISSED)


if __name__ == "__main__":
    main()
