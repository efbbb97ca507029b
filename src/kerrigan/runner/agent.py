"""The runner agent (``kerrigan runner``): takes offered jobs for its host's devices and runs them.

For each offer it decides admission (seed 003: the exact vCPU claim against the host's allocatable CPUs,
``max_queue_depth``, disk space after evicting idle workspaces), accepts or refuses with a typed reason,
fetches the repository at the job's commit into the job's workspace, waits until the claim fits under
``max_weight`` (without holding back smaller jobs), gives the job specific CPUs, records them, and starts
the command through :mod:`kerrigan.runner.launch` in its own process group. Output is cut into numbered
pages and uploaded as it comes; the end is reported with the exit status and the job's ``reservation_use``.

Heartbeats renew the host's leases and carry its resources (by name), device states (each device the
devices file names checked before registering and before each heartbeat:
:mod:`kerrigan.runner.devices_file`; every other one present), the jobs waiting on the host for capacity
(so the server can ask to withdraw one whose queue-wait budget ran out) and its health (with how jobs are
isolated: :mod:`kerrigan.runner.isolation`). Cancel and withdraw requests arrive on the poll. A restarted
agent finds its job records, registers the CPU sets of jobs still running and follows them to their end,
and empties the cgroups of jobs that ended while it was away. Given a metrics port, it serves its figures
at ``GET /metrics`` while it runs (:mod:`kerrigan.runner.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

import structlog

from kerrigan.core import runner_fields as fields
from kerrigan.core.accounting import health_report
from kerrigan.core.device_console import ACTION as CONSOLE_ACTION
from kerrigan.core.host_capacity import startable
from kerrigan.core.runner_protocol import HEARTBEATS_PER_LEASE
from kerrigan.runner.isolation.own_files import check_own_files
from kerrigan.runner.isolation.range_lock import RangeLock, hold_range
from kerrigan.runner.metrics import MetricsServer, agent_registry
from kerrigan.runner.processes import job_environment, not_dumpable, process_start_time
from kerrigan.runner.recovery import Recovery
from kerrigan.runner.reporting import lost_body
from kerrigan.runner.server import Registration, ServerRefused, ServerUnavailable, TokenRefused
from kerrigan.runner.settings import AgentSettings

__all__ = ["Agent", "AgentSettings", "job_environment", "not_dumpable", "process_start_time"]

log = logging.getLogger(__name__)

RECONCILE_AFTER_S: Final = 5.0  # a job accepted this recently may not show in a heartbeat answer yet
IDLE_POLL_S: Final = 1.0  # between polls that brought nothing new
MAINTENANCE_INTERVAL_S: Final = 600.0
REVOKE_AT_STOP_S: Final = 5.0  # tokens still not revoked then expire on their own within the hour
PRESENCE_WAIT_S: Final = 5.0  # a heartbeat waits this long for device checks; a slower one is sent the next


class Agent(Recovery):
    """One runner host's agent.

    A job's record moves ``accepted`` → ``waiting`` (its source is in place) → ``starting`` (chosen to
    start: its claim counts) → ``running`` → ``ended``. One task per job drives it; stopping a job (cancel,
    withdraw, timeout, the agent's own stop) sets a reason the task acts on at its next step, so no step is
    cut off half-done.
    """

    metrics_port: int | None = None  # the port GET /metrics listens on while run() runs (the one bound for 0)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Register, pick up where a previous agent left off, then work until cancelled; with a metrics
        port, serve ``GET /metrics`` all the while.

        A server that cannot be reached is waited for; one that refuses the host (a wrong token) raises
        :class:`ServerRefused`, at start or later (a token revoked or replaced meanwhile: the jobs under way
        are stopped first); job users another agent on the host holds raise
        :class:`~kerrigan.runner.isolation.range_lock.RangeLockError`, files a job could change that run as
        root (the agent's code and Python, its work dir)
        :class:`~kerrigan.runner.isolation.own_files.OwnFilesWritableError`, and a metrics address that
        cannot be listened on :class:`~kerrigan.runner.metrics.MetricsAddressError`, before anything else
        starts.
        """
        # Every line this agent (and each job's task, which copies this context) logs names its host.
        structlog.contextvars.bind_contextvars(runner_host=self.settings.host_id)
        users = self._hold_job_users()
        try:
            self._lay_out_work_dir()
            if self.isolation.users is not None:  # can jobs, run as other users, reach what runs as root?
                await asyncio.to_thread(
                    check_own_files, self.settings.work_dir, self.isolation.users, self.settings.job_groups
                )
            metrics = await self._serve_metrics()
            try:
                await self._work()
            finally:
                if metrics is not None:
                    await metrics.stop()
                    self.metrics_port = None
        finally:
            if users is not None:
                users.release()

    def _hold_job_users(self) -> RangeLock | None:
        """This agent's lock on its job users, where jobs run as their own users (none otherwise): raises
        :class:`~kerrigan.runner.isolation.range_lock.RangeLockError` when another agent on the host holds
        some of them."""
        if self.isolation.users is None:
            return None
        return hold_range(self.isolation.users, self.settings.work_dir, self.settings.job_users_locks)

    async def _serve_metrics(self) -> MetricsServer | None:
        """The metrics server, listening, when the settings give a port."""
        host, port = self.settings.metrics_host, self.settings.metrics_port
        if port is None:
            return None
        server = MetricsServer(agent_registry(self))
        self.metrics_port = await server.start(host, port)
        log.info("metrics at http://%s:%d/metrics", host, self.metrics_port)
        return server

    async def _work(self) -> None:
        self.announce_isolation()
        self.announce_disk()
        self.devices = dict(await self.presence.check())  # the devices file's, before the server names ours
        registration = await self._register()
        self.lease_ttl_s = registration.lease_ttl_s
        self.poll_timeout_s = registration.poll_timeout_s
        self.capabilities = registration.capabilities
        listed = [str(device["id"]) for device in registration.devices]
        skipped = self.presence.keep(listed)
        self.devices = dict.fromkeys(listed, "present") | self.presence.states
        if skipped:  # reported with the registration (not known then): registered again without them
            await self._register()
        log.info(
            "registered %s: protocol %s, capabilities %s, devices %s",
            self.settings.host_id,
            registration.protocol,
            sorted(registration.capabilities),
            sorted(self.devices) or "none",
        )
        self.recover()
        loops = [
            self._every(
                self._heartbeat, lambda: self.settings.heartbeat_s or self.lease_ttl_s / HEARTBEATS_PER_LEASE
            ),
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
            await self.presence.close()
            await self.stop()

    def announce_isolation(self) -> None:
        """One line at start: how jobs run apart here, a warning naming what is missing when they do not."""
        if self.isolation.isolated and not self.isolation.missing:
            log.info("%s", self.isolation.summary())
        else:
            log.warning("%s", self.isolation.summary())

    def announce_disk(self) -> None:
        """A warning at start when free disk is under the floor: every job is refused until it is not."""
        try:
            free = self.workspaces.free_bytes()
        except OSError as err:
            log.warning("free disk on the work dir cannot be read: %s", err)
            return
        shortfall = self.settings.disk.shortfall(free)
        if shortfall is not None:
            log.warning("%s", shortfall)

    def _lay_out_work_dir(self) -> None:
        """The agent's state (job records, results, output, cached tarballs, artifacts on their way) in
        folders only it may enter. Where jobs run as their own users they must pass through the work dir to
        their workspace and area (0711: passed through, never listed); each of those is its job user's own,
        mode 0700."""
        work = self.settings.work_dir
        work.mkdir(parents=True, exist_ok=True)
        isolated = self.isolation.users is not None
        work.chmod(0o711 if isolated else 0o700)
        for name, mode in (
            ("jobs", 0o700),
            ("sources", 0o700),
            ("artifacts", 0o700),  # zips on their way to a workspace
            ("workspaces", 0o711),
            ("job-areas", 0o711),
        ):
            (work / name).mkdir(exist_ok=True)
            (work / name).chmod(mode if isolated else 0o700)

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
            except (asyncio.CancelledError, TokenRefused):
                raise
            except Exception:
                log.exception("%s failed; going on", getattr(step, "__name__", "a step"))
                await asyncio.sleep(1.0)
            await asyncio.sleep(interval())

    async def stop(self) -> None:
        """Stop taking work; stop the jobs under way (their process groups get SIGTERM, SIGKILL after the
        grace period) and report them cancelled; empty the cgroups of any still not ended by then."""
        self._stopping = True
        for job_id in list(self.jobs):
            self._stop(job_id, "cancelled")
        for person in list(self._person_tasks):  # people's consoles and shells: a shell's cgroup is emptied
            person.cancel()
        pending = [task for task in [*self._tasks.values(), *self._person_tasks] if not task.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.settings.kill_grace_s * 2 + 20)
        for record in list(self.jobs.values()):  # a job still being followed: nothing of it outlives us
            if record.cgroup is not None and record.state != "waiting":
                await self._empty_cgroup(record)
        if self._revoking:  # the ended jobs' tokens, on their way to being revoked: a moment for them
            await asyncio.wait(set(self._revoking), timeout=REVOKE_AT_STOP_S)

    # -- heartbeats and polls ----------------------------------------------------------------------

    async def _heartbeat(self) -> None:
        self.devices.update(await self.presence.check(PRESENCE_WAIT_S))
        sent_at = self.clock()
        held = {
            job_id
            for job_id, record in self.jobs.items()
            if record.state != "ended" and record.accepted_at < sent_at - RECONCILE_AFTER_S
        }
        try:
            answer = await self.server.heartbeat(self.heartbeat_body())
        except TokenRefused:
            raise  # the token was revoked: the agent stops (run() raises it)
        except ServerRefused as err:
            log.warning("heartbeat refused: %s", err)
            if err.code == "not_registered":
                await self.server.register(self.resources(), self.devices)
            return
        except ServerUnavailable as err:
            log.warning("heartbeat failed: %s", err)
            return
        self.hear_holds(answer)
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
                    await self.server.job(job_id, "finish", lost_body(self.capabilities))

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
        report["isolation"] = self.isolation.report()
        return report

    async def _poll(self) -> None:
        if self._stopping:
            await asyncio.sleep(1.0)
            return
        try:
            answer = await self.server.poll(self.poll_timeout_s)
        except TokenRefused:
            raise
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
        for asked in answer.get("settings_for", []):
            new = True
            await self._report_holder_settings(str(asked.get("reservation")), str(asked.get("device")))
        for asked in answer.get("job_shells", []):
            new = True
            if isinstance(asked, dict):  # bridged beside the poll until it ends (job_shell)
                task = asyncio.create_task(self.job_shell(asked), name="kerrigan-job-shell")
                self._person_tasks.add(task)
                task.add_done_callback(self._person_tasks.discard)
        for asked in answer.get("device_requests", []):
            new = True
            if isinstance(asked, dict):  # done beside the poll: a cycle takes seconds
                task = asyncio.create_task(self._device_request(asked), name="kerrigan-device-request")
                self._person_tasks.add(task)
                task.add_done_callback(self._person_tasks.discard)
        if not new:
            # Only requests already under way (a cancel waiting out its grace period): do not spin.
            await asyncio.sleep(IDLE_POLL_S)

    async def _report_holder_settings(self, reservation_id: str, device_id: str) -> None:
        """Tell the server the settings the devices file shows the person holding ``device_id`` (``{}``
        when it shows none: the server asks until it has an answer)."""
        settings = self.presence.holder_settings(device_id)
        try:
            fields.settings(settings)
        except fields.FieldError as err:  # more than the server keeps: say so here, send none, stop asking
            log.warning("settings of %s not shown to its holder: %s", device_id, err.message)
            settings = {}
        try:
            await self.server.holder_settings(reservation_id, device_id, settings)
        except (ServerUnavailable, ServerRefused) as err:
            log.warning("settings of %s for reservation %s not reported: %s", device_id, reservation_id, err)
            await asyncio.sleep(1.0)  # the next poll asks again
            return
        log.info(
            "reservation %s holds %s: its holder is shown %s",
            reservation_id,
            device_id,
            ", ".join(sorted(settings)) or "no settings",
        )

    async def _device_request(self, asked: dict[str, Any]) -> None:
        """Do a person's power request (:mod:`kerrigan.runner.person_power`); tell the server how it went. A
        console request (:mod:`kerrigan.runner.person_console`) is bridged until it ends."""
        if asked.get("action") == CONSOLE_ACTION:
            await self._person_console.perform(asked)
            return
        answer = await self._person_power.perform(asked)
        try:
            await self.server.device_request(str(asked.get("id")), answer)
        except (ServerUnavailable, ServerRefused) as err:  # the person's call ends unanswered (504)
            log.warning("device request %s not reported: %s", asked.get("id"), err)

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
        """Expire job records and idle workspaces after 24 hours (not those of jobs holds keep), and unused
        cached tarballs."""
        now = self.clock()
        if self.may_remove_workspaces:  # a held job's record names its workspace: kept while it is
            self.records.expire(self.jobs, now, keep=self.held_jobs)
            busy = self.workspaces_in_use()
            self.workspaces.expire_idle(now, in_use=busy)
        self.sources.expire(now)
