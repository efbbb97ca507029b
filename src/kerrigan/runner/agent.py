"""The runner agent (``kerrigan runner``): takes offered jobs for its host's devices and runs them.

For each offer it decides admission (seed 003: the exact vCPU claim against the host's allocatable CPUs,
``max_queue_depth``, disk space after evicting idle workspaces), accepts or refuses with a typed reason,
fetches the repository at the job's commit into the job's workspace, waits until the claim fits under
``max_weight`` (without holding back smaller jobs), gives the job specific CPUs, records them, and starts
the command through :mod:`kerrigan.runner.launch` in its own process group. Output is cut into numbered
pages and uploaded as it comes; the end is reported with the exit status and the job's ``reservation_use``.

Heartbeats renew the host's leases and carry its resources (by name), device states, the jobs waiting on
the host for capacity (so the server can ask to withdraw one whose queue-wait budget ran out) and its
health. Cancel and withdraw requests arrive on the poll. A restarted agent finds its job records, registers
the CPU sets of jobs still running and follows them to their end.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import aiohttp

from kerrigan.core.accounting import health_report, reservation_use
from kerrigan.core.cpus import CpuAllocator, format_cpu_list
from kerrigan.core.disk import DiskPolicy, plan_admission
from kerrigan.core.host_capacity import HostLimits, admission_refusal, startable
from kerrigan.core.resources import ResourceCatalog, Unit, initial_values
from kerrigan.runner.records import JobRecord, JobRecords
from kerrigan.runner.server import Registration, ServerClient, ServerRefused, ServerUnavailable
from kerrigan.runner.sources import SourceCache, SourceError, empty_folder, unpack
from kerrigan.runner.topology import SYSFS_CPU_ROOT, read_topology
from kerrigan.runner.workspaces import UnsafeWorkspaceError, WorkspaceStore

log = logging.getLogger(__name__)

OUTPUT_INTERVAL_S: Final = 0.5
OUTPUT_RETRY_S: Final = 10.0  # while a job runs, an output call gives up sooner so timeouts stay on time
RECONCILE_AFTER_S: Final = 5.0  # a job accepted this recently may not show in a heartbeat answer yet
IDLE_POLL_S: Final = 1.0  # between polls that brought nothing new
CLAIM_CATALOG: Final = ResourceCatalog([("vcpus", Unit.COUNT)])  # what the agent knows of a claim
MAINTENANCE_INTERVAL_S: Final = 600.0
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How ``kerrigan runner`` was started."""

    server_url: str
    token: str
    host_id: str
    work_dir: Path
    limits: HostLimits = field(default_factory=HostLimits)
    disk: DiskPolicy = field(default_factory=DiskPolicy)
    sysfs_root: Path = SYSFS_CPU_ROOT
    kill_grace_s: float = 10.0
    heartbeat_s: float | None = None  # None: a quarter of the lease time the server gives
    systemd_scope: str = "auto"  # auto (when root under systemd), always or never


def _systemd_prefix(mode: str, job_id: str, cpus: tuple[int, ...]) -> list[str]:
    """``systemd-run --scope`` with ``AllowedCPUs=`` where systemd can do it (cgroup pinning)."""
    available = shutil.which("systemd-run") is not None and Path("/run/systemd/system").is_dir()
    wanted = mode == "always" or (mode == "auto" and available and os.geteuid() == 0)
    if not wanted or not cpus:
        return []
    return [
        "systemd-run",
        "--scope",
        "--quiet",
        "--collect",
        f"--unit=kerrigan-job-{job_id}-{os.getpid()}",
        "-p",
        f"AllowedCPUs={format_cpu_list(cpus)}",
        "--",
    ]


def job_environment(
    offer: Mapping[str, Any], cpus: tuple[int, ...], base: Mapping[str, str]
) -> dict[str, str]:
    """The command's environment: the agent's own, without its settings, plus the job's (DESIGN.md)."""
    env = {key: value for key, value in base.items() if not key.startswith("KERRIGAN_")}
    github = offer.get("github") or {}
    env.update(
        {
            "CI": "true",
            "KERRIGAN": "true",
            "GITHUB_REPOSITORY": str(offer.get("repository", "")),
            "GITHUB_SHA": str(offer.get("sha", "")),
            "GITHUB_API_URL": str(github.get("api_url", "")),
            "KERRIGAN_JOB_ID": str(offer.get("id", "")),
            "KERRIGAN_SESSION_ID": str(offer.get("session", "")),
            "KERRIGAN_TASK_ID": str(offer.get("task", "")),
            "KERRIGAN_DEVICE_ID": str(offer.get("device", "")),
            "KERRIGAN_DEVICE_BOARD": str(offer.get("board") or ""),
            "KERRIGAN_DEVICE_LABELS": json.dumps(offer.get("labels") or {}, sort_keys=True),
            "KERRIGAN_CPUS": format_cpu_list(cpus),
        }
    )
    if github.get("token"):
        env["GITHUB_TOKEN"] = str(github["token"])
    if offer.get("workflow_run_id") is not None:
        env["KERRIGAN_WORKFLOW_RUN_ID"] = str(offer["workflow_run_id"])
    return env


class Agent:
    """One runner host's agent.

    A job's record moves ``accepted`` → ``waiting`` (its source is in place) → ``starting`` (chosen to
    start: its claim counts) → ``running`` → ``ended``. One task per job drives it; stopping a job (cancel,
    withdraw, timeout, the agent's own stop) sets a reason the task acts on at its next step, so no step is
    cut off half-done.
    """

    def __init__(
        self, settings: AgentSettings, http: aiohttp.ClientSession, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.http = http
        self.clock = clock
        self.server = ServerClient(http, settings.server_url, settings.token)
        self.records = JobRecords(settings.work_dir)
        self.workspaces = WorkspaceStore(settings.work_dir)
        self.sources = SourceCache(settings.work_dir, http)
        self.allocator = CpuAllocator(read_topology(settings.sysfs_root))
        self.jobs: dict[str, JobRecord] = {}
        self.devices: dict[str, str] = {}
        self.refusals: dict[str, int] = {}
        self.lease_ttl_s = 60.0
        self.poll_timeout_s = 25.0
        self.capabilities: frozenset[str] = frozenset()  # what registration agreed on
        self._credentials: dict[str, dict[str, Any]] = {}  # job -> its GitHub token; in memory only
        self._changed = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._stop_reasons: dict[str, str] = {}
        self._accepting: set[str] = set()
        self._stopping = False

    # -- lifecycle ---------------------------------------------------------------------------------

    def resources(self) -> dict[str, int]:
        """The host's resource values, by name."""
        values = {
            "vcpus": self.allocator.limit,
            "max_weight": self.settings.limits.max_weight,
            "max_queue_depth": self.settings.limits.max_queue_depth,
            "floor_bytes": self.settings.disk.floor_bytes,
        }
        with contextlib.suppress(OSError):
            values["free_disk_bytes"] = self.workspaces.free_bytes()
        with contextlib.suppress(OSError, ValueError):
            values["memory_bytes"] = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return values

    async def run(self) -> None:
        """Register, pick up where a previous agent left off, then work until cancelled.

        A server that cannot be reached is waited for; one that refuses the host (a wrong token) raises
        :class:`ServerRefused`.
        """
        self.settings.work_dir.mkdir(parents=True, exist_ok=True)
        self.settings.work_dir.chmod(0o700)  # job records and workspaces are the agent's alone
        registration = await self._register()
        self.lease_ttl_s = registration.lease_ttl_s
        self.poll_timeout_s = registration.poll_timeout_s
        self.capabilities = registration.capabilities
        self.devices = {str(device["id"]): "present" for device in registration.devices}
        log.info(
            "registered %s: protocol %s, capabilities %s, devices %s",
            self.settings.host_id,
            registration.protocol,
            sorted(registration.capabilities),
            sorted(self.devices) or "none",
        )
        self.recover()
        loops = [
            self._every(self._heartbeat, lambda: self.settings.heartbeat_s or self.lease_ttl_s / 4),
            self._every(self._poll, lambda: 0.0),
            self._schedule(),
            self._every(self.maintain_async, lambda: MAINTENANCE_INTERVAL_S),
        ]
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.stop()

    async def _register(self) -> Registration:
        while True:
            try:
                return await self.server.register(self.resources(), self.devices)
            except ServerUnavailable as err:
                log.warning("the server cannot be reached yet (%s); trying again", err)
                await asyncio.sleep(5.0)

    async def _every(self, step: Callable[[], Awaitable[None]], interval: Callable[[], float]) -> None:
        """Run ``step`` forever; a failure is logged and the loop goes on (one bad answer must not stop
        the host and cancel its jobs)."""
        while True:
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s failed; going on", getattr(step, "__name__", "a step"))
                await asyncio.sleep(1.0)
            await asyncio.sleep(interval())

    async def stop(self) -> None:
        """Stop taking work; stop the jobs under way (their process groups get SIGTERM, SIGKILL after the
        grace period) and report them cancelled."""
        self._stopping = True
        for job_id in list(self.jobs):
            self._stop(job_id, "cancelled")
        pending = [task for task in self._tasks.values() if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.settings.kill_grace_s * 2 + 20)

    def recover(self) -> None:
        """Jobs a previous agent left: follow running ones to their end, accept waiting ones again (for a
        fresh token) and prepare them, report ended ones not yet reported."""
        for record in self.records.load_all():
            self.jobs[record.id] = record
            if record.state == "ended":
                if not record.reported:
                    self._spawn(record.id, self._report_end(record))
                continue
            if record.state in ("running", "starting") and record.pid is not None:
                if record.cpus:
                    try:
                        self.allocator.register(record.id, record.cpus)
                    except ValueError as err:
                        log.warning("job %s: its recorded CPUs are not registered again: %s", record.id, err)
                record.state = "running"
                self._spawn(record.id, self._follow(record))
            else:
                record.state = "accepted"
                self._spawn(record.id, self._accept_again(record))
            log.info("job %s: picked up after a restart (%s)", record.id, record.state)

    def _spawn(self, job_id: str, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work, name=f"kerrigan-job-{job_id}")
        self._tasks[job_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(job_id) is finished:
                del self._tasks[job_id]
            if not finished.cancelled() and finished.exception() is not None:
                log.error("job %s: %s", job_id, finished.exception(), exc_info=finished.exception())
            self._changed.set()

        task.add_done_callback(done)

    # -- heartbeats and polls ----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        sent_at = self.clock()
        held = {
            job_id
            for job_id, record in self.jobs.items()
            if record.state != "ended" and record.accepted_at < sent_at - RECONCILE_AFTER_S
        }
        try:
            answer = await self.server.heartbeat(self.heartbeat_body())
        except ServerRefused as err:
            log.warning("heartbeat refused: %s", err)
            if err.code == "not_registered":
                await self.server.register(self.resources(), self.devices)
            return
        except ServerUnavailable as err:
            log.warning("heartbeat failed: %s", err)
            return
        server_jobs = answer.get("jobs")
        if isinstance(server_jobs, dict):
            await self._reconcile(held, {str(k): str(v) for k, v in server_jobs.items()})

    async def _reconcile(self, held: set[str], server_jobs: dict[str, str]) -> None:
        """Make the server's view and ours agree: it is the one that decides what a job is."""
        for job_id in held - server_jobs.keys():
            record = self.jobs.get(job_id)
            if record is not None and record.state != "ended" and job_id not in self._accepting:
                # The server no longer holds us to it (its lease expired, it was cancelled while we were
                # away): stop it and tell nobody, the server has decided.
                log.warning("job %s: the server no longer has it on this host; stopping it", job_id)
                record.reported = True
                self._stop(job_id, "lost")
        for job_id, state in server_jobs.items():
            record = self.jobs.get(job_id)
            if job_id in self._accepting or (record is not None and record.state != "ended"):
                continue
            if record is not None and record.reported:
                log.warning("job %s: the server still has it %s; reporting its end again", job_id, state)
                self._spawn(job_id, self._report_end(record))
            elif record is None:
                log.warning(
                    "job %s: the server has it %s here, but this agent does not hold it", job_id, state
                )
                with contextlib.suppress(ServerUnavailable, ServerRefused):
                    await self.server.job(job_id, "finish", {"exit_status": -1})

    def heartbeat_body(self) -> dict[str, Any]:
        """Resources, device states, jobs waiting here for capacity (ms) and the health report."""
        now = self.clock()
        waiting = {
            job_id: int((now - record.ready_at) * 1000)
            for job_id, record in self.jobs.items()
            if record.state == "waiting" and record.ready_at is not None
        }
        return {
            "resources": self.resources(),
            "devices": dict(self.devices),
            "waiting": waiting,
            "health": self.health(),
        }

    def health(self) -> dict[str, Any]:
        """The host's health over its retained job records."""
        finished = [job for record in self.jobs.values() if (job := record.finished()) is not None]
        report = health_report(finished, self.clock(), self.refusals)
        report["running"] = sum(1 for record in self.jobs.values() if record.state == "running")
        report["waiting"] = sum(1 for record in self.jobs.values() if record.state in ("accepted", "waiting"))
        return report

    async def _poll(self) -> None:
        if self._stopping:
            await asyncio.sleep(1.0)
            return
        try:
            answer = await self.server.poll(self.poll_timeout_s)
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("poll failed: %s", err)
            await asyncio.sleep(1.0)
            return
        new = False
        for job_id in map(str, answer.get("cancel", [])):
            new = self._stop(job_id, "cancelled") or new
        for job_id in map(str, answer.get("withdraw", [])):
            new = await self._withdraw(job_id) or new
        for offer in answer.get("offers", []):
            new = True
            try:
                await self._offered(offer)
            except Exception:
                log.exception("offer %r could not be handled", offer.get("id"))
        if not new:
            # Only requests already under way (a cancel waiting out its grace period): do not spin.
            await asyncio.sleep(IDLE_POLL_S)

    # -- scheduling --------------------------------------------------------------------------------

    async def _schedule(self) -> None:
        """Start waiting jobs whose claims fit under max_weight, each counting before the next."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            if self._stopping:
                continue
            for record in list(self.jobs.values()):  # stopped while their preparation finished
                if record.state == "waiting" and record.id not in self._tasks:
                    reason = self._stop_reasons.get(record.id)
                    if reason is not None and reason != "withdrawn":
                        self._spawn(record.id, self._end(record, None, self._stop_reasons.pop(record.id)))
            running = sum(r.claim for r in self.jobs.values() if r.state in ("starting", "running"))
            # Gate jobs first (marked only when both sides negotiated gate_jobs), then arrival order.
            gates = "gate_jobs" in self.capabilities
            waiting = sorted(
                (
                    r
                    for r in self.jobs.values()
                    if r.state == "waiting" and r.id not in self._tasks and r.id not in self._stop_reasons
                ),
                key=lambda r: (not (gates and r.offer.get("gate") is True), r.ready_at or 0.0, int(r.id)),
            )
            for job_id in startable([(r.id, r.claim) for r in waiting], running, self.settings.limits):
                record = self.jobs[job_id]
                record.state = "starting"  # counts against max_weight from now on
                self._spawn(job_id, self._start(record))

    async def maintain_async(self) -> None:
        """:meth:`maintain`, off the event loop (it walks and deletes folders)."""
        await asyncio.to_thread(self.maintain)

    def maintain(self) -> None:
        """Expire job records and idle workspaces after 24 hours, and unused cached tarballs."""
        now = self.clock()
        self.records.expire(self.jobs, now)
        busy = {r.workspace for r in self.jobs.values() if r.workspace and r.state != "ended"}
        self.workspaces.expire_idle(now, in_use=busy)
        self.sources.expire(now)

    # -- one job -----------------------------------------------------------------------------------

    async def _offered(self, offer: dict[str, Any]) -> None:
        """Admit or refuse an offer."""
        job_id = str(offer.get("id", ""))
        if not job_id.isdigit():
            log.warning("ignoring an offer without a job id: %r", offer.get("id"))
            return
        known = self.jobs.get(job_id)
        if known is not None and known.state != "ended":
            # Offered again (our accept's answer was lost, or its lease was renewed): accepting is idempotent.
            await self._accept(job_id)
            return
        if known is not None:  # ended here before, and sent back to the queue since: a new attempt
            del self.jobs[job_id]
        # The claim is keyed by resource name and resolved through the agent's own catalog (seed 001).
        raw_claim = offer.get("claim")
        values, skipped = initial_values(CLAIM_CATALOG, raw_claim if isinstance(raw_claim, dict) else {})
        for item in skipped:
            log.warning("job %s: claim resource %r skipped: %s", job_id, item.name, item.reason)
        claim = values.value(CLAIM_CATALOG, "vcpus")
        if claim is None:
            await self._refuse(job_id, {"reason": "invalid_claim", "detail": "the claim names no vcpus"})
            return
        accepted_waiting = sum(1 for r in self.jobs.values() if r.state in ("accepted", "waiting"))
        refusal = admission_refusal(claim, self.allocator, accepted_waiting, self.settings.limits)
        if refusal is not None:
            body = {"reason": "runner_full", "detail": refusal.detail, "retry": refusal.retry}
            await self._refuse(job_id, body)
            return
        workspace = self._workspace_name(offer)
        disk_full = await asyncio.to_thread(self._admit_disk, workspace)
        if disk_full is not None:
            await self._refuse(job_id, {"reason": "runner_disk_full", **disk_full})
            return
        record = JobRecord(job_id, offer, accepted_at=self.clock(), workspace=workspace)
        self.jobs[job_id] = record  # before the accept: a heartbeat meanwhile must not think it foreign
        self._accepting.add(job_id)
        try:
            state = await self._accept(job_id)
        finally:
            self._accepting.discard(job_id)
        if state != "accepted":
            del self.jobs[job_id]
            log.info("job %s: not ours to run (%s)", job_id, state)
            return
        self.records.save(record)
        self._spawn(job_id, self._prepare(record))

    async def _accept(self, job_id: str) -> str | None:
        """Accept (again); the state the server answers, keeping the token it hands out."""
        try:
            answer = await self.server.job(job_id, "accept")
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("job %s: accept failed: %s", job_id, err)
            return None
        if isinstance(answer.get("github"), dict):
            self._credentials[job_id] = answer["github"]
        return str(answer.get("state"))

    async def _accept_again(self, record: JobRecord) -> None:
        """After a restart: the token was not kept on disk, so accept again for a fresh one."""
        state = await self._accept(record.id)
        if state == "accepted":
            await self._prepare(record)
        elif state is not None:
            log.info("job %s: the server has it %s now; dropping it", record.id, state)
            record.state, record.ended_at, record.reported = "ended", self.clock(), True
            record.outcome = "lost"
            self.records.save(record)

    def _admit_disk(self, workspace: str) -> dict[str, int] | None:
        """Disk admission (seed 003); the refusal's byte counts, or None to admit. Runs in a thread."""
        policy = self.settings.disk
        free = self.workspaces.free_bytes()
        if not policy.enabled or free >= policy.soft_goal_bytes:
            return None  # nothing to measure or evict
        busy = {r.workspace for r in self.jobs.values() if r.workspace and r.state != "ended"}
        plan = plan_admission(
            free,
            self.workspaces.workspaces(running=busy),
            policy,
            self.clock(),
            protected=frozenset({workspace}),
        )
        self.workspaces.apply(plan, in_use=busy)
        if plan.refusal is None:
            return None
        return {"free_bytes": self.workspaces.free_bytes(), "floor_bytes": plan.refusal.floor_bytes}

    async def _refuse(self, job_id: str, body: dict[str, Any]) -> None:
        reason = str(body["reason"])
        self.refusals[reason] = self.refusals.get(reason, 0) + 1
        log.info("job %s: refused %s (%s)", job_id, reason, body.get("detail") or body)
        with contextlib.suppress(ServerUnavailable, ServerRefused):
            await self.server.job(job_id, "refuse", body)

    def _workspace_name(self, offer: Mapping[str, Any]) -> str:
        """The task's workspace; a second job of the same task at once gets its own (one job at a time)."""
        base = _UNSAFE.sub("-", f"{offer.get('repository', '')}--{offer.get('task', '')}").strip("-.")
        busy = {r.workspace for r in self.jobs.values() if r.state != "ended"}
        name, n = base or "job", 1
        while name in busy:
            n += 1
            name = f"{base}.{n}"
        return name

    async def _prepare(self, record: JobRecord) -> None:
        """Put the job's source in its workspace; then it waits for capacity. A stop asked meanwhile is
        acted on once the step under way is done (an unpack is never cut off half-written)."""
        offer = record.offer
        github = self._credentials.get(record.id, {})
        assert record.workspace is not None
        try:
            path = self.workspaces.mark_used(record.workspace, self.clock())
            if offer.get("repository") and offer.get("sha"):
                if not github.get("token"):
                    raise SourceError("the server gave no token to fetch the repository with")
                tarball = await self.sources.fetch(
                    str(offer["repository"]), str(offer["sha"]), str(github["api_url"]), str(github["token"])
                )
                await asyncio.to_thread(unpack, tarball, path)
            else:  # nothing to fetch: still no files from an earlier job
                await asyncio.to_thread(empty_folder, path)
        except (SourceError, OSError, UnsafeWorkspaceError) as err:
            log.warning("job %s: %s", record.id, err)
            await self._end(record, None, self._stop_reasons.pop(record.id, None), note=f"kerrigan: {err}\n")
            return
        if record.id in self._stop_reasons:
            await self._end(record, None, self._stop_reasons.pop(record.id))
            return
        record.state, record.ready_at = "waiting", self.clock()
        self.records.save(record)
        self._changed.set()

    async def _start(self, record: JobRecord) -> None:
        """Give the job its CPUs, record them, tell the server, start the command and follow it."""
        cpus = self.allocator.allocate(record.id, record.claim)
        try:
            record.cpus = list(cpus)
            self.records.save(record)  # the CPU set is on record before the command starts
            try:
                answer = await self.server.job(record.id, "start", {"cpus": format_cpu_list(cpus)})
            except ServerUnavailable as err:
                log.warning("job %s: start not acknowledged (%s); trying again later", record.id, err)
                self.allocator.release(record.id)
                await asyncio.sleep(5.0)
                record.state = "waiting"
                return
            except ServerRefused as err:
                log.warning("job %s: the server refused its start (%s); dropping it", record.id, err)
                self.allocator.release(record.id)
                record.state, record.ended_at, record.reported, record.outcome = (
                    "ended",
                    self.clock(),
                    True,
                    "lost",
                )
                self.records.save(record)
                return
            if answer.get("state") != "running":
                # Withdrawn or cancelled before the start reached the server: its answer decides.
                self.allocator.release(record.id)
                state = answer.get("state")
                record.state, record.ended_at, record.reported = "ended", self.clock(), True
                record.outcome = "withdrawn" if state == "refused_before_start" else str(state)
                self.records.save(record)
                return
            reason = self._stop_reasons.get(record.id)
            if reason is not None and reason != "withdrawn":  # stopped while starting: it never runs
                self.allocator.release(record.id)
                await self._end(record, None, self._stop_reasons.pop(record.id))
                return
            self._stop_reasons.pop(record.id, None)  # a withdrawal the start answered: it runs
            await self._launch(record, cpus)
        except Exception as err:
            log.exception("job %s: could not start", record.id)
            self.allocator.release(record.id)
            await self._end(record, None, None, note=f"kerrigan: the job could not be started: {err}\n")
            return
        await self._follow(record)

    async def _launch(self, record: JobRecord, cpus: tuple[int, ...]) -> None:
        assert record.workspace is not None
        workspace = self.workspaces.mark_used(record.workspace, self.clock())
        command = str(record.offer.get("command") or "")
        launcher = [
            sys.executable,
            "-m",
            "kerrigan.runner.launch",
            "--result",
            str(self.records.result_path(record.id)),
            "--cpus",
            ",".join(map(str, cpus)),
            "--grace-s",
            str(self.settings.kill_grace_s),
            "--",
            "/bin/sh",
            "-c",
            command or "echo 'kerrigan: the task has no command' >&2; exit 2",
        ]
        argv = _systemd_prefix(self.settings.systemd_scope, record.id, cpus) + launcher
        env = job_environment(record.offer | {"github": self._credentials.get(record.id)}, cpus, os.environ)
        with self.records.output_path(record.id).open("ab") as output:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=workspace,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        self._processes[record.id] = process
        record.state, record.started_at, record.pid = "running", self.clock(), process.pid
        record.pid_started = process_start_time(process.pid)
        self.records.save(record)
        log.info("job %s: started on CPUs %s (pid %s)", record.id, format_cpu_list(cpus), process.pid)

    async def _follow(self, record: JobRecord) -> None:
        """Upload output until the job's process ends (or is stopped), then report the end."""
        timeout_s = record.offer.get("timeout_s")
        deadline = (record.started_at or self.clock()) + timeout_s if isinstance(timeout_s, int) else None
        while not await self._exited(record):
            await self._upload(record, retry_s=OUTPUT_RETRY_S)
            if deadline is not None and self.clock() >= deadline:
                self._stop(record.id, "timed_out")
            await asyncio.sleep(OUTPUT_INTERVAL_S)
        self._processes.pop(record.id, None)
        self.allocator.release(record.id)
        result = self._result(record)
        outcome = self._stop_reasons.pop(record.id, None)
        status = result.get("exit_status") if result else None
        if status is None and outcome is None:
            status = -int(signal.SIGKILL)  # the launcher itself was killed: no result
        await self._end(record, status, outcome, accounting=self._accounting(record, result))

    async def _exited(self, record: JobRecord) -> bool:
        process = self._processes.get(record.id)
        if process is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.05)
            return process.returncode is not None
        # Re-attached after a restart: not our child. Its result file, or its pid gone (or reused by
        # another process, told apart by its start time), says it ended.
        if record.pid is None or self.records.result_path(record.id).exists():
            return True
        started = process_start_time(record.pid)
        return started is None or (record.pid_started is not None and started != record.pid_started)

    def _result(self, record: JobRecord) -> dict[str, Any] | None:
        try:
            found = json.loads(self.records.result_path(record.id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    @staticmethod
    def _accounting(record: JobRecord, result: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """``reservation_use`` from the launcher's result; absent (never zero) when there is none."""
        cpu_s, wall_s = (result or {}).get("cpu_s"), (result or {}).get("wall_s")
        if not isinstance(cpu_s, int | float) or not isinstance(wall_s, int | float):
            return None
        return {"reservation_use": reservation_use(float(cpu_s), float(wall_s), record.claim)}

    async def _upload(self, record: JobRecord, final: bool = False, retry_s: float = 120.0) -> bool:
        """Cut new output into pages and send the pages the server has not acknowledged, in order;
        whether all were sent."""
        if await asyncio.to_thread(self.records.cut_pages, record, final):
            self.records.save(record)
        while record.uploaded < record.next_page:
            body: dict[str, Any]
            page = self.records.page(record, record.uploaded)
            if page is None:  # evicted before it was sent: say so, starting at the first page kept
                kept = self.records.page(record, record.first_kept)
                if kept is None or "log_pages" not in self.capabilities:
                    log.error(
                        "job %s: output page %s is gone and cannot be replayed", record.id, record.uploaded
                    )
                    return True
                body = {
                    "seq": record.first_kept,
                    "offset": kept[0],
                    "data": kept[1],
                    "truncated_before_seq": record.first_kept,
                }
            else:
                body = {"seq": record.uploaded, "offset": page[0], "data": page[1]}
            try:
                answer = await self.server.call(
                    "POST", f"/jobs/{record.id}/output", body, retry_timeout_s=retry_s
                )
            except ServerRefused as err:
                if err.code == "gap" and isinstance(err.body.get("next_seq"), int):
                    record.uploaded = int(err.body["next_seq"])  # re-send from where the server is
                    continue
                log.warning("job %s: output refused (%s); skipping page %s", record.id, err, record.uploaded)
                record.uploaded += 1  # a page the server will never take must not hold up the rest
                continue
            except ServerUnavailable as err:
                log.warning("job %s: output not sent yet: %s", record.id, err)
                return False
            record.uploaded = int(answer.get("next_seq", record.uploaded + 1))
            self.records.save(record)
        return True

    async def _end(
        self,
        record: JobRecord,
        exit_status: int | None,
        outcome: str | None,
        accounting: dict[str, Any] | None = None,
        note: str = "",
    ) -> None:
        if note:
            with self.records.output_path(record.id).open("a", encoding="utf-8") as output:
                output.write(note)
        # All output reaches the server before the end does: the check run shows the last lines.
        while not await self._upload(record, final=True) and not record.reported:
            await asyncio.sleep(5.0)
        self.records.drop_output(record)
        record.state, record.ended_at = "ended", self.clock()
        record.exit_status, record.outcome, record.accounting = exit_status, outcome, accounting
        self.records.save(record)
        self._credentials.pop(record.id, None)
        if record.workspace:
            with contextlib.suppress(OSError, UnsafeWorkspaceError):
                self.workspaces.mark_used(record.workspace, self.clock())
        self._changed.set()
        if not record.reported:
            await self._report_end(record)

    async def _report_end(self, record: JobRecord) -> None:
        body: dict[str, Any] = {"exit_status": record.exit_status if record.exit_status is not None else -1}
        if record.outcome in ("cancelled", "timed_out"):
            body["outcome"] = record.outcome
        if record.accounting is not None:
            body["accounting"] = record.accounting
        while True:
            try:
                await self.server.job(record.id, "finish", body)
                break
            except ServerUnavailable as err:
                log.warning("job %s: end not reported yet: %s", record.id, err)
                await asyncio.sleep(5.0)
            except ServerRefused as err:
                log.warning("job %s: end refused: %s", record.id, err)
                break
        record.reported = True
        self.records.save(record)
        log.info("job %s: ended (%s, exit %s)", record.id, record.outcome or "done", record.exit_status)

    def _stop(self, job_id: str, outcome: str) -> bool:
        """Stop a job; whether this was news. A running one's process group gets SIGTERM (the launcher
        SIGKILLs what is left after the grace period); one not started yet ends without running."""
        record = self.jobs.get(job_id)
        if record is None or record.state == "ended" or job_id in self._stop_reasons:
            return False
        self._stop_reasons[job_id] = outcome
        log.info("job %s: stopping (%s)", job_id, outcome)
        if record.state == "waiting" and job_id not in self._tasks:
            self._spawn(job_id, self._end(record, None, self._stop_reasons.pop(job_id)))
        elif record.state == "running" and record.pid is not None:
            self._spawn(f"{job_id}-stop", self._kill_group(record))
        # accepted (fetching) and starting: their task acts on the reason at its next step.
        return True

    async def _kill_group(self, record: JobRecord) -> None:
        """SIGTERM the job's process group; the launcher ends what ignores it after the grace period. Only
        a launcher that is itself stuck gets SIGKILL, after twice that."""
        pid = record.pid
        assert pid is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = self.clock() + self.settings.kill_grace_s * 2 + 5
        while self.clock() < deadline:
            if await self._exited(record):
                return
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    async def _withdraw(self, job_id: str) -> bool:
        """The server asks to withdraw a job whose queue-wait budget ran out; only one not started goes.
        Whether this was news."""
        record = self.jobs.get(job_id)
        if record is not None and (
            record.state not in ("accepted", "waiting") or job_id in self._stop_reasons
        ):
            return False  # started (the start answered), ended, or being withdrawn already
        if record is not None:
            self._stop_reasons[job_id] = "withdrawn"
        self._spawn(f"{job_id}-withdraw", self._send_withdrawn(job_id, record))
        return True

    async def _send_withdrawn(self, job_id: str, record: JobRecord | None) -> None:
        while True:
            try:
                answer = await self.server.job(job_id, "withdrawn")
                break
            except ServerUnavailable as err:
                log.warning("job %s: withdrawal not reported yet: %s", job_id, err)
                await asyncio.sleep(5.0)
            except ServerRefused as err:
                log.warning("job %s: withdrawal refused: %s", job_id, err)
                answer = {}
                break
        if record is None:
            return
        if answer.get("state") == "running":  # the server has it started: it runs after all
            self._stop_reasons.pop(job_id, None)
            return
        task = self._tasks.get(job_id)
        if task is not None and not task.done() and record.state == "accepted":
            return  # still fetching: _prepare ends it (the server already has it withdrawn)
        self._stop_reasons.pop(job_id, None)
        record.state, record.outcome, record.ended_at, record.reported = (
            "ended",
            "withdrawn",
            self.clock(),
            True,
        )
        self.records.save(record)
        self._credentials.pop(job_id, None)
        self._changed.set()
        log.info("job %s: withdrawn (queue_wait_exceeded)", job_id)


PR_SET_DUMPABLE: Final = 4


def not_dumpable() -> bool:
    """Make this process non-dumpable: processes of the same user (its jobs) can then no longer read its
    memory or ``/proc/<pid>/environ``, where the runner token is. Whether it took."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def process_start_time(pid: int) -> int | None:
    """When a process started (clock ticks since boot), to tell it from a later one with the same pid;
    None when there is no such process (or only its zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])
