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
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping
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
from kerrigan.runner.server import ServerClient, ServerRefused, ServerUnavailable
from kerrigan.runner.sources import SourceCache, SourceError, unpack
from kerrigan.runner.topology import SYSFS_CPU_ROOT, read_topology
from kerrigan.runner.workspaces import WorkspaceStore

log = logging.getLogger(__name__)

OUTPUT_INTERVAL_S: Final = 0.5
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
    """One runner host's agent."""

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
        self._changed = asyncio.Event()
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._processes: dict[str, asyncio.subprocess.Process] = {}
        self._stop_reasons: dict[str, str] = {}
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
        """Register, pick up where a previous agent left off, then work until cancelled."""
        self.settings.work_dir.mkdir(parents=True, exist_ok=True)
        registration = await self.server.register(self.resources(), {})
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
        loops = [self._heartbeats(), self._polls(), self._schedule(), self._maintenance()]
        tasks = [asyncio.create_task(loop) for loop in loops]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self.stop()

    async def stop(self) -> None:
        """Stop taking work; cancel the jobs under way (process groups: SIGTERM, then SIGKILL) and report."""
        self._stopping = True
        for job_id in list(self._tasks):
            self._stop(job_id, "cancelled")
        pending = list(self._tasks.values())
        if pending:
            await asyncio.wait(pending, timeout=self.settings.kill_grace_s + 15)

    def recover(self) -> None:
        """Jobs a previous agent left: follow running ones to their end, prepare accepted ones again."""
        for record in self.records.load_all():
            self.jobs[record.id] = record
            if record.state == "ended":
                if not record.reported:
                    self._spawn(record.id, self._report_end(record))
                continue
            if record.state == "running" and record.cpus:
                try:
                    self.allocator.register(record.id, record.cpus)
                except ValueError as err:
                    log.warning("job %s: its recorded CPUs are not registered again: %s", record.id, err)
                self._spawn(record.id, self._follow(record))
            else:
                record.state = "accepted"
                self._spawn(record.id, self._prepare(record))
            log.info("job %s: picked up after a restart (%s)", record.id, record.state)

    def _spawn(self, job_id: str, work: Any) -> None:
        task = asyncio.create_task(work, name=f"kerrigan-job-{job_id}")
        self._tasks[job_id] = task

        def done(finished: asyncio.Task[None]) -> None:
            if self._tasks.get(job_id) is finished:
                del self._tasks[job_id]
            if not finished.cancelled() and finished.exception() is not None:
                log.error("job %s: %s", job_id, finished.exception(), exc_info=finished.exception())
            self._changed.set()

        task.add_done_callback(done)

    # -- loops -------------------------------------------------------------------------------------

    async def _heartbeats(self) -> None:
        interval = self.settings.heartbeat_s or self.lease_ttl_s / 4
        while True:
            try:
                await self.server.heartbeat(self.heartbeat_body())
            except (ServerUnavailable, ServerRefused) as err:
                log.warning("heartbeat failed: %s", err)
                if isinstance(err, ServerRefused) and err.code == "not_registered":
                    await self.server.register(self.resources(), self.devices)
            await asyncio.sleep(interval)

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

    async def _polls(self) -> None:
        while not self._stopping:
            try:
                answer = await self.server.poll(self.poll_timeout_s)
            except (ServerUnavailable, ServerRefused) as err:
                log.warning("poll failed: %s", err)
                await asyncio.sleep(1.0)
                continue
            for job_id in answer.get("cancel", []):
                self._stop(str(job_id), "cancelled")
            for job_id in answer.get("withdraw", []):
                await self._withdraw(str(job_id))
            for offer in answer.get("offers", []):
                if str(offer.get("id")) not in self.jobs:
                    await self._offered(offer)

    async def _schedule(self) -> None:
        """Start waiting jobs whose claims fit under max_weight, each counting before the next."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            if self._stopping:
                continue
            running = sum(r.claim for r in self.jobs.values() if r.state in ("starting", "running"))
            # Gate jobs first (marked only when both sides negotiated gate_jobs), then arrival order.
            gates = "gate_jobs" in self.capabilities
            waiting = sorted(
                (r for r in self.jobs.values() if r.state == "waiting"),
                key=lambda r: (not (gates and r.offer.get("gate") is True), r.ready_at or 0.0, int(r.id)),
            )
            for job_id in startable([(r.id, r.claim) for r in waiting], running, self.settings.limits):
                record = self.jobs[job_id]
                record.state = "starting"  # counts against max_weight from now on
                self._spawn(job_id, self._start(record))

    async def _maintenance(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            self.maintain()

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
        job_id = str(offer["id"])
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
        busy = {r.workspace for r in self.jobs.values() if r.workspace and r.state != "ended"}
        plan = plan_admission(
            self.workspaces.free_bytes(),
            self.workspaces.workspaces(running=busy),
            self.settings.disk,
            self.clock(),
            protected=frozenset({workspace}),
        )
        self.workspaces.apply(plan, in_use=busy)
        if plan.refusal is not None:
            free_now = self.workspaces.free_bytes()
            await self._refuse(
                job_id,
                {
                    "reason": "runner_disk_full",
                    "free_bytes": free_now,
                    "floor_bytes": plan.refusal.floor_bytes,
                },
            )
            return
        try:
            answer = await self.server.job(job_id, "accept")
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("job %s: accept failed: %s", job_id, err)
            return
        if answer.get("state") != "accepted":
            log.info("job %s: not ours to run (%s)", job_id, answer.get("state"))
            return
        record = JobRecord(job_id, offer, accepted_at=self.clock(), workspace=workspace)
        self.jobs[job_id] = record
        self.records.save(record)
        self._spawn(job_id, self._prepare(record))

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
        """Fetch the source into the workspace; then the job waits for capacity."""
        offer = record.offer
        github = offer.get("github") or {}
        assert record.workspace is not None
        path = self.workspaces.mark_used(record.workspace, self.clock())
        try:
            if github.get("token") and offer.get("sha"):
                tarball = await self.sources.fetch(
                    str(offer["repository"]), str(offer["sha"]), str(github["api_url"]), str(github["token"])
                )
                await asyncio.to_thread(unpack, tarball, path)
        except (SourceError, OSError) as err:
            log.warning("job %s: %s", record.id, err)
            note = f"kerrigan: cannot fetch the source: {err}\n"
            await self._end(record, exit_status=None, outcome=None, note=note)
            return
        if record.state == "ended":  # withdrawn or cancelled while fetching
            return
        record.state, record.ready_at = "waiting", self.clock()
        self.records.save(record)
        self._changed.set()

    async def _start(self, record: JobRecord) -> None:
        """Give the job its CPUs, record them, tell the server, start the command and follow it."""
        cpus = self.allocator.allocate(record.id, record.claim)
        record.cpus = list(cpus)
        self.records.save(record)  # the CPU set is on record before the command starts
        try:
            answer = await self.server.job(record.id, "start", {"cpus": format_cpu_list(cpus)})
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("job %s: start not acknowledged (%s); not starting it", record.id, err)
            self.allocator.release(record.id)
            record.state = "waiting"
            self._changed.set()
            return
        if answer.get("state") != "running":
            # Withdrawn or cancelled before the start reached the server: its answer decides.
            self.allocator.release(record.id)
            record.state, record.ended_at, record.reported = "ended", self.clock(), True
            state = answer.get("state")
            record.outcome = "withdrawn" if state == "refused_before_start" else str(state)
            self.records.save(record)
            return
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
        with self.records.output_path(record.id).open("ab") as output:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=workspace,
                env=job_environment(record.offer, cpus, os.environ),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=output,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        self._processes[record.id] = process
        record.state, record.started_at, record.pid = "running", self.clock(), process.pid
        self.records.save(record)
        log.info("job %s: started on CPUs %s (pid %s)", record.id, format_cpu_list(cpus), process.pid)
        await self._follow(record)

    async def _follow(self, record: JobRecord) -> None:
        """Upload output until the job's process ends (or is stopped), then report the end."""
        timeout_s = record.offer.get("timeout_s")
        deadline = (record.started_at or self.clock()) + timeout_s if isinstance(timeout_s, int) else None
        while not await self._exited(record):
            await self._upload(record)
            if deadline is not None and self.clock() >= deadline and record.id not in self._stop_reasons:
                self._stop(record.id, "timed_out")
            await asyncio.sleep(OUTPUT_INTERVAL_S)
        self._processes.pop(record.id, None)
        self.allocator.release(record.id)
        result = self._result(record)
        outcome = self._stop_reasons.pop(record.id, None)
        status = result.get("exit_status") if result else None
        if status is None and record.pid is not None and outcome is None:
            status = -int(signal.SIGKILL)  # the launcher itself was killed: no result
        await self._end(record, status, outcome, accounting=self._accounting(record, result))

    async def _exited(self, record: JobRecord) -> bool:
        process = self._processes.get(record.id)
        if process is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 0.05)
            return process.returncode is not None
        # Re-attached after a restart: not our child, so watch for the pid to go.
        if record.pid is None:
            return True
        try:
            os.kill(record.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return _is_zombie(record.pid)

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

    async def _upload(self, record: JobRecord, final: bool = False) -> None:
        """Cut new output into pages and send the pages the server has not acknowledged, in order."""
        if self.records.cut_pages(record, final=final):
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
                    return
                body = {
                    "seq": record.first_kept,
                    "offset": kept[0],
                    "data": kept[1],
                    "truncated_before_seq": record.first_kept,
                }
            else:
                body = {"seq": record.uploaded, "offset": page[0], "data": page[1]}
            try:
                answer = await self.server.job(record.id, "output", body)
            except ServerRefused as err:
                if err.code == "gap" and isinstance(err.body.get("next_seq"), int):
                    record.uploaded = int(err.body["next_seq"])  # re-send from where the server is
                    continue
                log.warning("job %s: output refused: %s", record.id, err)
                return
            except ServerUnavailable as err:
                log.warning("job %s: output not sent yet: %s", record.id, err)
                return
            record.uploaded = int(answer.get("next_seq", record.uploaded + 1))
            self.records.save(record)

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
        await self._upload(record, final=True)
        self.records.drop_output(record)
        record.state, record.ended_at = "ended", self.clock()
        record.exit_status, record.outcome, record.accounting = exit_status, outcome, accounting
        self.records.save(record)
        if record.workspace:
            with contextlib.suppress(OSError):
                self.workspaces.mark_used(record.workspace, self.clock())
        self._changed.set()
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

    def _stop(self, job_id: str, outcome: str) -> None:
        """Stop a job: a running one's process group gets SIGTERM, then SIGKILL after the grace period."""
        record = self.jobs.get(job_id)
        if record is None or record.state == "ended":
            return
        if record.state in ("accepted", "waiting"):
            task = self._tasks.get(job_id)
            if task is not None:
                task.cancel()
            self._spawn(job_id, self._end(record, None, outcome))
            return
        if job_id in self._stop_reasons or record.pid is None:
            return
        self._stop_reasons[job_id] = outcome
        log.info("job %s: stopping (%s)", job_id, outcome)
        self._spawn(f"{job_id}-stop", self._kill_group(record.pid))

    async def _kill_group(self, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        deadline = self.clock() + self.settings.kill_grace_s
        while self.clock() < deadline:
            try:
                os.killpg(pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            await asyncio.sleep(0.1)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)

    async def _withdraw(self, job_id: str) -> None:
        """The server asks to withdraw a job whose queue-wait budget ran out; only one not started goes."""
        record = self.jobs.get(job_id)
        if record is not None and record.state not in ("accepted", "waiting"):
            return  # started (or ended): the start already answered
        if record is not None:
            task = self._tasks.get(job_id)
            if task is not None:
                task.cancel()
            record.state, record.outcome, record.ended_at = "ended", "withdrawn", self.clock()
            record.reported = True
            self.records.save(record)
        with contextlib.suppress(ServerUnavailable, ServerRefused):
            await self.server.job(job_id, "withdrawn")
        log.info("job %s: withdrawn (queue_wait_exceeded)", job_id)


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].split()[0] == "Z"
