"""A job's process: started pinned to its CPUs under the launcher, followed to its end, stopped.

The command runs as ``/bin/sh -c`` under :mod:`kerrigan.runner.launch` in its own process group; its
environment is the agent's own without any ``KERRIGAN_*`` setting, plus the job's and its device's settings
from the devices file (:mod:`kerrigan.runner.devices_file`); a job that holds no device (``board: none``:
its offer's ``device`` is null) gets no device variable at all. Where the host allows it
(:mod:`kerrigan.runner.isolation`) it runs as the job's own user with a private ``/tmp`` in the job's own
cgroup, which is emptied (everything in it killed) and removed before the job's end is reported, so nothing
of a job holds its device when the next one gets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import shutil
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from kerrigan.core.accounting import reservation_use
from kerrigan.core.cpus import format_cpu_list
from kerrigan.core.lifecycle import DEVICE_FAULT_EXIT, RUNNER_LOST
from kerrigan.core.variable_names import name_problem
from kerrigan.runner.boards.access import DEVICE_SOCKET
from kerrigan.runner.host_state import may_have_secrets, offer_roles
from kerrigan.runner.isolation.cgroups import CgroupError, empty, memory_cap
from kerrigan.runner.isolation.mounts import AREA_FOLDERS
from kerrigan.runner.isolation.users import SHARED_WRITABLE, give_to, remove_owned, take_back
from kerrigan.runner.records import JobRecord
from kerrigan.runner.server import ServerRefused, ServerUnavailable
from kerrigan.runner.wired_jobs import WiredJobs
from kerrigan.runner.workspaces import UnsafeWorkspaceError

log = logging.getLogger(__name__)

OUTPUT_INTERVAL_S: Final = 0.5
OUTPUT_RETRY_S: Final = 10.0  # while a job runs, an output call gives up sooner so timeouts stay on time


JOB_USER_NAME: Final = "kerrigan-job"  # USER and LOGNAME of a job run as its own user (no passwd entry)


def job_environment(
    offer: Mapping[str, Any],
    cpus: tuple[int, ...],
    base: Mapping[str, str],
    secrets: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The command's environment: the agent's own, without its settings, plus the job's (DESIGN.md): the
    manifest's ``env``, the ``secrets`` its accept handed out, and Kerrigan's variables."""
    env = {key: value for key, value in base.items() if not key.startswith("KERRIGAN_")}
    # The manifest's env and the secrets first: what Kerrigan sets below is the job's contract and is not
    # overridden.
    env.update(manifest_env(offer.get("env")))
    env.update(manifest_env(secrets or {}))
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
            "KERRIGAN_CPUS": format_cpu_list(cpus),
        }
    )
    if offer.get("device") is not None:  # a job with board: none holds no device: none of these
        env.update(
            {
                "KERRIGAN_DEVICE_ID": str(offer["device"]),
                "KERRIGAN_DEVICE_BOARD": str(offer.get("board") or ""),
                "KERRIGAN_DEVICE_LABELS": json.dumps(offer.get("labels") or {}, sort_keys=True),
            }
        )
    env.update(gang_environment(offer))
    if github.get("token"):
        env["GITHUB_TOKEN"] = str(github["token"])
    if offer.get("workflow_run_id") is not None:
        env["KERRIGAN_WORKFLOW_RUN_ID"] = str(offer["workflow_run_id"])
    return env


def gang_environment(offer: Mapping[str, object]) -> dict[str, str]:
    """A gang job's devices by role: ``KERRIGAN_DEVICE_<ROLE>_ID``, ``_BOARD`` and ``_LABELS`` for each,
    and all of them as ``KERRIGAN_DEVICES_JSON``; nothing for a job of one device."""
    devices = offer_roles(offer)
    if not devices:
        return {}
    env: dict[str, str] = {}
    shown = []
    for device in devices:
        role = str(device["role"])
        labels = device.get("labels") or {}
        env[f"KERRIGAN_DEVICE_{role.upper()}_ID"] = str(device.get("id", ""))
        env[f"KERRIGAN_DEVICE_{role.upper()}_BOARD"] = str(device.get("board") or "")
        env[f"KERRIGAN_DEVICE_{role.upper()}_LABELS"] = json.dumps(labels, sort_keys=True)
        shown.append({"role": role, "id": device.get("id"), "board": device.get("board"), "labels": labels})
    env["KERRIGAN_DEVICES_JSON"] = json.dumps(shown, sort_keys=True)
    return env


# What the root processes before the command (``systemd-run``, the launcher) run with: nothing of the job's.
LAUNCHER_ENV: Final = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}


def environment_file(env: Mapping[str, str]) -> int:
    """A memory file (``memfd``) holding ``env`` as JSON, at its start: the launcher's ``--env-fd``."""
    fd = os.memfd_create("kerrigan-job-env", os.MFD_CLOEXEC)
    try:
        os.write(fd, json.dumps(dict(env)).encode())  # a memfd takes a whole write at once
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def manifest_env(written: object) -> dict[str, str]:
    """The offer's ``env`` (the manifest's), its names checked again: a name the manifest could never give
    (``KERRIGAN_…``, ``GITHUB_…``, not a shell name) or a value that is no string or holds NUL is left out."""
    if not isinstance(written, dict):
        return {}
    return {
        name: value
        for name, value in written.items()
        if isinstance(name, str)
        and isinstance(value, str)
        and "\0" not in value
        and name_problem(name, "environment name") is None
    }


class Processes(WiredJobs):
    """Starting, following and stopping jobs' processes."""

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
                self._revoke_tokens(record.id)
                return
            if answer.get("state") != "running":
                # Withdrawn or cancelled before the start reached the server: its answer decides.
                self.allocator.release(record.id)
                state = answer.get("state")
                record.state, record.ended_at, record.reported = "ended", self.clock(), True
                record.outcome = "withdrawn" if state == "refused_before_start" else str(state)
                self.records.save(record)
                self._revoke_tokens(record.id)
                return
            reason = self._stop_reasons.get(record.id)
            if reason is not None and reason != "withdrawn":  # stopped while starting: it never runs
                self.allocator.release(record.id)
                await self._end(record, None, self._stop_reasons.pop(record.id))
                return
            self._stop_reasons.pop(record.id, None)  # a withdrawal the start answered: it runs
            fault = await self._take_boards(record, lambda lost: self._stop(record.id, lost.reason))
            if fault is not None:  # its command never runs: the lab failed it
                self.allocator.release(record.id)
                await self._end(record, DEVICE_FAULT_EXIT, fault.reason, note=fault.note())
                return
            reason = self._stop_reasons.get(record.id)
            if reason is not None and reason != "withdrawn":  # stopped while its boards were taken
                self.allocator.release(record.id)
                await self._end(record, None, self._stop_reasons.pop(record.id))
                return
            await self._launch(record, cpus)
        except Exception as err:
            log.exception("job %s: could not start", record.id)
            await self._empty_cgroup(record)
            self.allocator.release(record.id)
            await self._end(record, None, None, note=f"kerrigan: the job could not be started: {err}\n")
            return
        await self._follow(record)

    async def _launch(self, record: JobRecord, cpus: tuple[int, ...]) -> None:
        assert record.workspace is not None
        workspace = self.workspaces.mark_used(record.workspace, self.clock())
        command = str(record.offer.get("command") or "")
        backend = self.isolation.cgroups
        memory = self.memory_cap(record.claim)
        record.cgroup = await asyncio.to_thread(backend.create, record.id, cpus, memory)
        self.records.save(record)  # on record before anything joins it: a restarted agent empties it
        # The launcher runs as root: isolated from the workspace (``-I``: no PYTHON* variables, no working
        # folder on sys.path; started in /) and from the job's environment, which only the command gets,
        # through a memory file the launcher reads (never on disk) and applies at the command's exec.
        launcher = [
            sys.executable,
            "-I",
            "-m",
            "kerrigan.runner.launch",
            "--cwd",
            str(workspace),
            "--result",
            str(self.records.result_path(record.id)),
            "--cpus",
            ",".join(map(str, cpus)),
            "--grace-s",
            str(self.settings.kill_grace_s),
            "--output-max-bytes",
            str(self.settings.output_max_bytes),
        ]
        for procs in backend.join_files(record.cgroup):
            launcher += ["--cgroup-procs", procs]
        offer = record.offer | {"github": self._credentials.get(record.id)}
        secrets = self._secrets.get(record.id, {})
        env = job_environment(offer, cpus, os.environ, secrets)
        withheld = [name for name in record.offer.get("secrets") or () if name not in secrets]
        if withheld:
            with self.records.output_path(record.id).open("a", encoding="utf-8") as output:
                output.write(
                    f"kerrigan: secrets {', '.join(map(str, withheld))} are not given to this job: a fork's "
                    "pull request gets them only when approved with `/kerrigan approve secrets`\n"
                )
        env.update(self._device_settings(record, secret=False))  # the devices file's, for every job
        if may_have_secrets(record.offer):
            env.update(self._device_settings(record, secret=True))  # masked in its output (_masker_of)
        elif kept := sorted(self._device_settings(record, secret=True)):
            with self.records.output_path(record.id).open("a", encoding="utf-8") as output:
                output.write(
                    f"kerrigan: the devices file's secret_env {', '.join(kept)} is not given to this job: a "
                    "fork's pull request gets it only when approved with `/kerrigan approve secrets`\n"
                )
        env.update(gang_environment(record.offer))  # a setting named like a role's own variable loses
        launcher += await self.sandbox(record, env)
        launcher += await self._board_access(record, env)  # and KERRIGAN_BOOT_SECONDS
        launcher += ["--", "/bin/sh", "-c", command or "echo 'kerrigan: the task has no command' >&2; exit 2"]
        env_fd = environment_file(env)
        launcher[launcher.index("--cwd") : launcher.index("--cwd")] = ["--env-fd", str(env_fd)]
        argv = backend.prefix(record.cgroup, cpus, memory) + launcher
        try:
            with self.records.output_path(record.id).open("ab") as output:
                process = await asyncio.create_subprocess_exec(
                    *argv,
                    cwd="/",
                    env=LAUNCHER_ENV,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=output,
                    stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                    pass_fds=(env_fd,),
                )
        finally:
            os.close(env_fd)
        self._processes[record.id] = process
        record.state, record.started_at, record.pid = "running", self.clock(), process.pid
        record.pid_started = process_start_time(process.pid)
        self.records.save(record)
        log.info("job %s: started on CPUs %s (pid %s)", record.id, format_cpu_list(cpus), process.pid)

    async def sandbox(self, record: JobRecord, env: dict[str, str]) -> list[str]:
        """The launcher's arguments that run the command in the job's sandbox, where the host allows it:
        as the job's own user with only the job groups, in its own user namespace, with its area's private
        /tmp and /proc; its user's variables in ``env``. The job's command and ``kerrigan shell``
        (:mod:`kerrigan.runner.job_shell`) both run in it."""
        if record.user is None:
            return []
        area = await asyncio.to_thread(self._make_area, record.id, record.user)
        home = area / "home"
        launcher = ["--user", str(record.user), "--keep", str(home)]
        launcher += ["--groups", ",".join(map(str, self.settings.job_groups))]
        env.update({"HOME": str(home), "USER": JOB_USER_NAME, "LOGNAME": JOB_USER_NAME})
        if self.isolation.own_keyrings:
            launcher += ["--user-namespace"]
        if self.isolation.private_tmp:
            launcher += ["--private-tmp", str(area)]
            env["TMPDIR"] = "/tmp"  # noqa: S108 -- the job's own, in its mount namespace
        return launcher

    def memory_cap(self, claim: int) -> int | None:
        """The memory cap of a job claiming ``claim`` vCPUs, where the host can enforce one."""
        total = self.isolation.memory_total
        if total is None or not self.isolation.cgroups.memory_cap:
            return None
        return memory_cap(total, claim, self.allocator.limit, os.sysconf("SC_PAGE_SIZE"))

    def area(self, job_id: str) -> Path:
        """The job's own folders: its home and what covers its /tmp, /var/tmp and /dev/shm."""
        return self.settings.work_dir / "job-areas" / job_id

    def _make_area(self, job_id: str, uid: int) -> Path:
        area = self.area(job_id)
        shutil.rmtree(area, ignore_errors=True)  # a crashed agent's, of an earlier attempt
        for name in ("home", *AREA_FOLDERS):
            (area / name).mkdir(parents=True, exist_ok=True)
        give_to(area, uid)
        return area

    async def _board_access(self, record: JobRecord, env: dict[str, str]) -> list[str]:
        """A wired job's terminals and power socket (the socket's folder in its area), and how long its
        boards took to boot, in ``env``; the launcher's arguments that keep the folder at its path under a
        private /tmp."""
        env.update(self._board_environment(record))  # KERRIGAN_BOOT_SECONDS, for a job whose board booted
        if record.id not in self._boards:
            return []
        area = self.area(record.id)
        devices = area / "devices"
        if record.user is None:
            await asyncio.to_thread(self._make_bare_area, area)
        access = await self._open_board_access(record, devices)
        env.update(access)
        return ["--keep", str(devices)] if DEVICE_SOCKET in access else []

    @staticmethod
    def _make_bare_area(area: Path) -> None:
        """The area of a job run as the agent's own user: only its board access's folder is made in it."""
        shutil.rmtree(area, ignore_errors=True)  # a crashed agent's, of an earlier attempt
        area.mkdir(mode=0o700, parents=True)

    async def _empty_cgroup(self, record: JobRecord) -> None:
        """Kill whatever of the job is left in its cgroup, wait until it is empty and remove it (and the
        job's area): before the end is reported, so the device is free when the next job gets it. Its
        workspace goes back to root and what it left in the host's shared folders goes, before its uid is
        free: a later job with that uid gets nothing of this one's."""
        if record.cgroup is not None:
            try:
                await asyncio.to_thread(empty, record.cgroup)
            except CgroupError as err:
                log.error("job %s: its cgroup would not empty: %s", record.id, err)
                return  # kept on record: the agent's stop, or its next start, tries again
        if record.user is not None:
            await asyncio.to_thread(self._take_back, record, record.user)
        if record.cgroup is not None:
            record.cgroup = None
            self.records.save(record)
        await asyncio.to_thread(shutil.rmtree, self.area(record.id), True)  # none for most bare jobs

    def _take_back(self, record: JobRecord, uid: int) -> None:
        try:
            if record.workspace is not None:
                take_back(self.workspaces.path(record.workspace))
            for folder in SHARED_WRITABLE:
                remove_owned(Path(folder), uid)
        except (OSError, UnsafeWorkspaceError) as err:
            log.error("job %s: what it left could not be taken back from uid %s: %s", record.id, uid, err)

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
        await self._empty_cgroup(record)
        self.allocator.release(record.id)
        result = self._result(record)
        outcome = self._stop_reasons.pop(record.id, None)
        status = result.get("exit_status") if result else None
        if status is None and outcome is None:
            # The launcher itself was killed (the agent's restart, the OOM killer): no result, and the
            # command's end is unknown. The lab's failure, not the test's.
            status, outcome = -int(signal.SIGKILL), RUNNER_LOST
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
