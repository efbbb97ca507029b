"""``kerrigan shell JOB`` on the runner host: a shell in a held job's sandbox, as the long poll hands it to
the agent (``job_shells``; capability ``job_shell``). The agent opens a WebSocket to the server
(``/api/runner/v1/job-shells/{id}``) and bridges it to the shell's terminal: what the shell prints goes up as
binary frames, the person's keystrokes come down.

The shell is started exactly as the job's command was (:meth:`Processes.sandbox`, the launcher): as the
job's own user with only the job groups, in its own user namespace and cgroup, with its private ``/tmp`` and
``/proc``, its workspace (the job's, kept by the hold) as its working folder, and the job's environment
without its secrets (no secret the accept handed out, no ``secret_env`` of the devices file, no GitHub
token). The launcher runs it on a pty (``--terminal``) in a session of its own.

Only for a job of this agent that ended and whose workspace a hold keeps (the server's word in each
heartbeat answer), one shell per job at a time, and only where the job ran as a user of its own: on a host
that does not isolate jobs a shell would run as the agent's user, and reach its token and records. The
job's uid was free between its end and the hold: when a job started meanwhile runs as it, the shell gets
a uid no job holds (:meth:`~kerrigan.runner.host_state.HostState.reallocate_user`), never a running one's.

It ends when the server closes the WebSocket (the person left, idle, the hold ended), when the shell exits,
or when the hold is no longer named: its terminal is hung up, the launcher told to stop, and the job's
cgroup emptied (everything the shell started is killed), the workspace taken back from the job's user and
its area removed, as at a job's end. The cgroup is on the job's record meanwhile: a restarted agent empties
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp

from kerrigan.core.device_console import Frame
from kerrigan.runner.isolation.users import give_back, hand_over
from kerrigan.runner.processes import (
    LAUNCHER_ENV,
    Processes,
    environment_file,
    gang_environment,
    job_environment,
)
from kerrigan.runner.records import JobRecord
from kerrigan.runner.workspaces import UnsafeWorkspaceError

log = logging.getLogger(__name__)

HOLD_CHECK_S: Final = 0.2  # how often an open shell looks whether its hold is still named
READ_BLOCK: Final = 1 << 16
UP_QUEUED: Final = 256  # blocks of the shell's output waiting for the WebSocket; past this it waits
STOP_WAIT_S: Final = 3.0  # how long the launcher has to end once told to, before it is killed
TERM: Final = "xterm-256color"


@dataclass
class OpenShell:
    """A shell running for a person: its launcher process and the pty's master end."""

    record: JobRecord
    process: asyncio.subprocess.Process
    master: int


class JobShells(Processes):
    """Shells in held jobs' sandboxes."""

    def shell_refusal(self, job_id: str) -> str | None:
        """Why no shell can be opened in ``job_id``'s sandbox on this host now (None: it can)."""
        record = self.jobs.get(job_id)
        if record is None or record.workspace is None:
            return f"job {job_id} has no workspace on this host"
        if record.state != "ended":
            return f"job {job_id} has not ended on this host"
        if job_id not in self.held_jobs:
            return f"no hold keeps job {job_id}'s workspace on this host"
        if record.user is None:  # a shell as the agent's user would reach its token and its records
            return (
                f"job {job_id} ran as the agent's own user on this host (it does not run jobs as users of "
                "their own): no shell is opened there"
            )
        if job_id in self._shells or record.cgroup is not None:
            return f"a shell is open in job {job_id}'s sandbox already"
        return None

    def shell_environment(self, record: JobRecord) -> dict[str, str]:
        """The job's environment without its secrets: the manifest's ``env``, Kerrigan's variables and
        the devices file's ``env`` (never its ``secret_env``), no GitHub token."""
        cpus = tuple(record.cpus)
        env = job_environment(record.offer | {"github": None}, cpus, os.environ, None)
        env.update(self._device_settings(record, secret=False))
        env.update(gang_environment(record.offer))
        env["TERM"] = TERM
        return env

    async def open_shell(self, record: JobRecord) -> OpenShell:
        """Start a shell in ``record``'s sandbox on a pty, as the job's command was started."""
        assert record.workspace is not None
        self._shells.add(record.id)
        try:
            return await self._start_shell(record)
        except BaseException:
            self._shells.discard(record.id)
            await self._empty_cgroup(record)
            raise

    async def _start_shell(self, record: JobRecord) -> OpenShell:
        assert record.workspace is not None
        workspace = self.workspaces.path(str(record.workspace))
        if not workspace.is_dir():
            raise UnsafeWorkspaceError(f"job {record.id}'s workspace is gone")
        before = self.reallocate_user(record)  # never the uid of a job that runs now
        if before is not None:
            self.records.save(record)  # the uid is on record before it owns anything
            log.info(
                "job %s: uid %s is another job's now: its shell runs as %s", record.id, before, record.user
            )
            assert record.user is not None
            await asyncio.to_thread(hand_over, workspace, before, record.user)
        if record.user is not None:  # taken back at the job's end: the job's user's again meanwhile
            # Only the folder: what the job left in it is its user's still, and a hard link it made to a
            # file not its own must not become its user's (give_back).
            await asyncio.to_thread(give_back, workspace, record.user)
        cpus = tuple(sorted(os.sched_getaffinity(0)))
        backend = self.isolation.cgroups
        memory = self.memory_cap(record.claim)
        record.cgroup = await asyncio.to_thread(backend.create, record.id, cpus, memory)
        self.records.save(record)  # on record before anything joins it: a restarted agent empties it
        env = self.shell_environment(record)
        launcher = [
            sys.executable,
            "-I",
            "-m",
            "kerrigan.runner.launch",
            "--terminal",
            "--cwd",
            str(workspace),
            "--result",
            str(self.records.folder(record.id) / "shell-result.json"),
            "--grace-s",
            "1",
        ]
        for procs in backend.join_files(record.cgroup):
            launcher += ["--cgroup-procs", procs]
        launcher += await self.sandbox(record, env)
        shell = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
        launcher += ["--", shell, "-i"]
        env_fd = environment_file(env)
        launcher[launcher.index("--cwd") : launcher.index("--cwd")] = ["--env-fd", str(env_fd)]
        master, terminal = os.openpty()
        try:
            process = await asyncio.create_subprocess_exec(
                *backend.prefix(record.cgroup, cpus, memory),
                *launcher,
                cwd="/",
                env=LAUNCHER_ENV,
                stdin=terminal,
                stdout=terminal,
                stderr=terminal,
                start_new_session=True,
                pass_fds=(env_fd,),
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(env_fd)
            os.close(terminal)
        os.set_blocking(master, False)
        log.info("job %s: a shell opened in its sandbox for a person (pid %s)", record.id, process.pid)
        return OpenShell(record, process, master)

    async def close_shell(self, shell: OpenShell) -> None:
        """Hang up its terminal, stop the launcher, empty the cgroup, take the workspace back."""
        with contextlib.suppress(OSError):
            os.close(shell.master)  # the shell's session is hung up (SIGHUP)
        if shell.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                shell.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(shell.process.wait(), STOP_WAIT_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    shell.process.kill()
                await shell.process.wait()
        await self._empty_cgroup(shell.record)  # all the shell started dies, as a job's leftovers
        self._shells.discard(shell.record.id)
        log.info("job %s: the shell in its sandbox closed", shell.record.id)

    async def job_shell(self, asked: Mapping[str, Any]) -> None:
        """Bridge one shell request until the server, the shell or the hold's end ends it."""
        request_id, job_id = str(asked.get("id")), str(asked.get("job"))
        try:
            socket = await self.server.shell_socket(request_id)
        except (aiohttp.ClientError, TimeoutError) as err:
            log.warning("shell in job %s: the server's WebSocket did not open: %s", job_id, err)
            return
        try:
            refused = self.shell_refusal(job_id)
            if refused is not None:
                await _end(socket, refused)
                return
            try:
                shell = await self.open_shell(self.jobs[job_id])
            except Exception as err:
                log.exception("job %s: the shell could not be started", job_id)
                await _end(socket, f"the shell could not be started in job {job_id}'s sandbox: {err}")
                return
            try:
                reason = await self._bridge_shell(socket, shell)
            finally:
                await self.close_shell(shell)
            if reason is not None:
                await _end(socket, reason, ok=True)
        finally:
            with contextlib.suppress(Exception):
                await socket.close()

    async def _bridge_shell(self, socket: aiohttp.ClientWebSocketResponse, shell: OpenShell) -> str | None:
        """What the shell prints to the server, keystrokes to the shell; why it ended when the agent ends it
        (None: the server closed)."""
        loop = asyncio.get_running_loop()
        up: asyncio.Queue[bytes] = asyncio.Queue(UP_QUEUED)
        paused = False

        def readable() -> None:
            nonlocal paused
            if up.full():  # the server lags: stop reading, the shell waits on its terminal
                loop.remove_reader(shell.master)
                paused = True
                return
            try:
                data = os.read(shell.master, READ_BLOCK)
            except BlockingIOError:
                return
            except OSError:  # EIO: every process of the terminal is gone
                data = b""
            up.put_nowait(data)
            if not data:
                loop.remove_reader(shell.master)

        async def sending() -> None:
            nonlocal paused
            while data := await up.get():
                if paused:
                    paused = False
                    loop.add_reader(shell.master, readable)
                await socket.send_bytes(data)

        async def typing() -> None:
            async for message in socket:
                if message.type is aiohttp.WSMsgType.BINARY:
                    await _write_all(shell.master, message.data)

        async def unheld() -> None:
            while shell.record.id in self.held_jobs:
                await asyncio.sleep(HOLD_CHECK_S)

        loop.add_reader(shell.master, readable)
        tasks = {
            "exited": asyncio.create_task(sending(), name="kerrigan-job-shell-up"),
            "server": asyncio.create_task(typing(), name="kerrigan-job-shell-down"),
            "unheld": asyncio.create_task(unheld(), name="kerrigan-job-shell-hold"),
        }
        try:
            await asyncio.wait(tasks.values(), return_when=asyncio.FIRST_COMPLETED)
        finally:
            loop.remove_reader(shell.master)
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        if tasks["exited"].done() and not tasks["exited"].cancelled() and tasks["exited"].exception() is None:
            return "the shell exited"
        if tasks["unheld"].done() and not tasks["unheld"].cancelled():
            return f"the hold of job {shell.record.id} ended"
        return None


async def _write_all(fd: int, data: bytes) -> None:
    """Keystrokes to the terminal, waiting while its input is full."""
    while data:
        try:
            data = data[os.write(fd, data) :]
        except BlockingIOError:
            await asyncio.sleep(0.01)


async def _end(socket: aiohttp.ClientWebSocketResponse, reason: str, *, ok: bool = False) -> None:
    """Tell the server why the agent ends the shell; ``ok``: as sessions end (it exited, the hold ended),
    not refused or failed."""
    (log.info if ok else log.warning)("shell for a person ended: %s", reason)
    with contextlib.suppress(Exception):
        await socket.send_str(json.dumps({"type": Frame.END.value, "reason": reason, "ok": ok}))
