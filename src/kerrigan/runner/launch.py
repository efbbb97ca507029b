"""The launcher that runs one job's command: ``python -m kerrigan.runner.launch --result FILE -- CMD...``.

The agent starts it as the leader of a new process group (and session), pinned to the job's CPUs, its
stdout and stderr the job's log file. The launcher:

- joins the job's cgroup (writes its pid into each ``--cgroup-procs`` file) before anything else, so the
  command and all it starts are in it;
- pins itself to ``--cpus`` (its children inherit it) when given;
- with ``--private-tmp AREA``, moves into a mount namespace of its own where ``AREA``'s folders cover
  ``/tmp``, ``/var/tmp`` and ``/dev/shm`` (:mod:`kerrigan.runner.isolation.mounts`; the ``--keep`` folders
  keep their paths), a ``/proc`` where the job sees its own user's processes only, and message queues of
  its own;
- with ``--user UID``, empties what that uid holds in the host's keyrings, and runs the command as that
  user and group, with only the ``--groups`` given, and with *no new privileges* (a setuid or
  file-capability program runs with the job's rights, not root's); the launcher itself stays root, so the
  command can neither signal it nor touch the result file; with ``--user-namespace``, in a user namespace
  of its own, so its keyrings go with it (:mod:`kerrigan.runner.isolation.keyrings`);
- gives the command a pipe as its stdout and stderr and copies what comes through it to its own stdout,
  up to ``--output-max-bytes``: the command cannot seek, truncate or stretch the log (:class:`Output`);
  with ``--terminal`` (``kerrigan shell``: the launcher's stdin, stdout and stderr are a pty's terminal) the
  command keeps them instead, in a session of its own whose controlling terminal that is;
- becomes a *child subreaper*, so processes the command leaves behind are re-parented to it, not to init;
- runs the command, waits for it, then ends everything the command left running (SIGTERM, then SIGKILL
  after ``--grace-s``), so nothing outlives the job and holds its device;
- sums the rusage of every process it reaped (the whole tree's CPU time) and writes the exit status,
  CPU time and wall time to ``--result`` (written beside it and renamed, so it is whole or absent);
- exits with the command's status.

It is started as root with nothing of the job's: ``python -I`` in ``/``, with a fixed environment. The
command's environment (the manifest's ``env``, the job's secrets, Kerrigan's variables) comes through
``--env-fd``, a memory file read whole and closed, and is applied only at the command's ``exec``, after root
was dropped; ``--cwd`` is the folder the command runs in. So no variable a repository sets (``PATH``,
``LD_PRELOAD``, ``PYTHONPATH``) and no file in its workspace reaches a root process.

SIGTERM sent to the group reaches the command; the launcher itself keeps going so it can still reap and
account. If it is killed (SIGKILL) the result file is absent and the job's accounting is missing, never zero.
Only the standard library is used: it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import fcntl
import json
import os
import select
import signal
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Final, NoReturn

from kerrigan.runner.isolation.keyrings import (
    NamespaceError,
    empty_host_keyrings,
    enter_own_user_namespace,
    map_user_namespace,
)
from kerrigan.runner.isolation.mounts import MountError, private_proc, private_tmp

PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PIPE_BYTES: Final = 1 << 20  # the output pipe's buffer


def _become_subreaper() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """Every live process's parent, by pid."""
    found = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        # The command name may hold spaces and parentheses: the fields after the last ')' are fixed.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and fields[0] != "Z":
            found[int(entry.name)] = int(fields[1])
    return found


def _children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (orphans re-parented to this subreaper included)."""
    return [child for child, parent in _parents().items() if parent == pid]


def _descendants(pid: int) -> list[int]:
    """Every live process below ``pid``, also those that left its process group or session."""
    parents = _parents()
    below: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, of in parents.items() if of == parent]
        below += children
        frontier += children
    return below


def _unreaped() -> bool:
    """Whether this process has a child not reaped yet (a zombie, or one still on its way out)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


class Reaper:
    """Reaps this process's children, summing their CPU time and keeping each one's wait status."""

    def __init__(self) -> None:
        self.cpu_s = 0.0
        self.statuses: dict[int, int] = {}

    def reap(self, block: bool) -> int | None:
        """Reap one child: its pid, or None when there is none (or, not blocking, none has ended)."""
        try:
            pid, status, usage = os.wait4(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        self.cpu_s += usage.ru_utime + usage.ru_stime
        self.statuses[pid] = status
        return pid

    def end_leftovers(self, grace_s: float, wait: Callable[[float], None] = time.sleep) -> None:
        """SIGTERM what the command left running, SIGKILL it after the grace period, and reap it all;
        ``wait`` passes the time between looks (copying the output meanwhile)."""
        me = os.getpid()
        deadline = time.monotonic() + grace_s
        while True:
            while self.reap(block=False) is not None:
                pass
            left = _children(me)
            if not left and not _unreaped():  # a child that is dying is reaped (and accounted) first
                return
            sent = signal.SIGKILL if time.monotonic() >= deadline else signal.SIGTERM
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sent)
            wait(0.05)


class LaunchError(Exception):
    """The job cannot be given what it must run in (its cgroup, its /tmp); nothing of it ran."""


def _enter(args: argparse.Namespace) -> int:
    """Join the job's cgroup, pin to its CPUs and cover /tmp; a descriptor of the result's folder, opened
    before a private /tmp may cover the work dir (as in tests)."""
    for procs in args.cgroup_procs:
        try:
            Path(procs).write_text(str(os.getpid()), encoding="ascii")
        except OSError as err:  # never run a job outside the cgroup that is to end it
            raise LaunchError(f"cannot join the job's cgroup {procs}: {err.strerror}") from err
    if args.cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.cpus.split(",")})
    result_dir = os.open(args.result.parent, os.O_RDONLY | os.O_DIRECTORY)
    if args.private_tmp is not None:
        try:
            here = str(Path.cwd())
            private_tmp(args.private_tmp, [here, *args.keep])
            os.chdir(here)  # the folder kept at its path, not the one the mount covers
        except (MountError, OSError) as err:
            os.close(result_dir)
            raise LaunchError(f"cannot give the job a private /tmp: {err}") from err
        try:
            private_proc()
        except MountError as err:
            if err.errno != errno.EINVAL:
                os.close(result_dir)
                raise LaunchError(f"cannot hide other users' processes from the job: {err}") from err
            # A kernel before 5.8: said in the job's output, where whoever reads it finds out.
            sys.stderr.write(f"kerrigan: other users' processes stay visible to this job: {err}\n")
    return result_dir


def _become(uid: int | None, groups: str) -> None:
    """Drop root for the job's own user, its gid the same number, with only ``groups`` beside it, for good:
    no setuid-root or file-capability program the host has (``su``, ``mount``, a privilege-escalation bug in
    one) can give the job more than its user has."""
    if uid is not None:
        os.setgroups([int(gid) for gid in groups.split(",") if gid])
        os.setgid(uid)
        os.setuid(uid)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            code = ctypes.get_errno()
            raise OSError(code, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(code)}")


def _command_environment(fd: int | None) -> dict[str, str]:
    """The command's environment, read whole from ``fd`` (then closed); without one, the launcher's own."""
    if fd is None:
        return dict(os.environ)
    with os.fdopen(fd, "rb") as source:
        found = json.loads(source.read())
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise ValueError("the command's environment is not a JSON object of strings")
    return {str(name): str(value) for name, value in found.items()}


def _write_result(result_dir: int, name: str, result: dict[str, float]) -> None:
    """Written beside the result and renamed, so it is whole or absent."""
    staged = name + ".tmp"
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600, dir_fd=result_dir)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(result))
    os.replace(staged, name, src_dir_fd=result_dir, dst_dir_fd=result_dir)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kerrigan.runner.launch")
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--cpus", default="", help="CPU ids to pin to, comma-separated")
    parser.add_argument("--grace-s", type=float, default=10.0)
    parser.add_argument("--cgroup-procs", action="append", default=[], help="a cgroup.procs file to join")
    parser.add_argument("--user", type=int, help="the uid (and gid) the command runs as")
    parser.add_argument("--groups", default="", help="its supplementary gids, comma-separated")
    parser.add_argument(
        "--user-namespace", action="store_true", help="run the command in a user namespace of its own"
    )
    parser.add_argument("--private-tmp", type=Path, help="the job's area whose folders cover /tmp")
    parser.add_argument("--keep", action="append", default=[], help="a folder that keeps its path")
    parser.add_argument("--env-fd", type=int, help="a descriptor holding the command's environment (JSON)")
    parser.add_argument("--cwd", type=Path, help="the folder the command runs in")
    parser.add_argument("--output-max-bytes", type=int, help="the most of the command's output kept")
    parser.add_argument(
        "--terminal", action="store_true", help="the command keeps stdin, stdout and stderr: a terminal"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


class Output:
    """The command's output: a pipe it writes to (stdout and stderr), copied by the launcher to its own
    stdout, the job's log, up to ``cap`` bytes (then one notice, and the rest is read and dropped, so the
    command never blocks on it). A pipe, not the log itself: the command can neither seek, truncate nor
    stretch the log, whose size is only what it wrote."""

    def __init__(self, cap: int | None) -> None:
        self.read_end, self.write_end = os.pipe()  # neither inherited past exec but where dup2'd
        os.set_blocking(self.read_end, False)
        with contextlib.suppress(OSError):  # fewer wake-ups for a chatty command where the kernel allows
            fcntl.fcntl(self.read_end, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        self.cap = cap
        self.kept = 0
        self.ended = False

    def give(self) -> None:
        """In the command's process: the pipe as its stdout and stderr."""
        os.dup2(self.write_end, 1)
        os.dup2(self.write_end, 2)
        os.close(self.write_end)
        os.close(self.read_end)

    def drop(self) -> None:
        """In the command's process of ``--terminal``: the pipe is not its, it keeps the terminal."""
        os.close(self.write_end)
        os.close(self.read_end)

    def started(self) -> None:
        """In the launcher, once the command's process has its end of the pipe."""
        os.close(self.write_end)

    def pump(self, wait_s: float) -> None:
        """Copy what the command wrote, waiting up to ``wait_s`` for it."""
        if self.ended:
            time.sleep(wait_s)
            return
        readable, _, _ = select.select([self.read_end], [], [], wait_s)
        if readable:
            self.drain()

    def drain(self, reads: int = 16) -> None:
        """Copy what is in the pipe now (at most ``reads`` times 64 KiB), without waiting for more: a command
        that floods it must not keep the launcher from looking after it."""
        for _ in range(reads):
            if self.ended:
                return
            try:
                chunk = os.read(self.read_end, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:  # every writer is gone
                self.ended = True
                return
            self._keep(chunk)

    def _keep(self, chunk: bytes) -> None:
        room = len(chunk) if self.cap is None else max(self.cap - self.kept, 0)
        if room:
            self._write(chunk[:room])
        if self.cap is not None and self.kept <= self.cap < self.kept + len(chunk):
            self._write(
                f"\n[kerrigan: output cut at {self.cap} bytes on the runner host (--output-max-bytes); "
                "the rest was not kept]\n".encode()
            )
        self.kept += len(chunk)

    @staticmethod
    def _write(data: bytes) -> bool:
        """Written whole to the log, or not at all where it cannot take it (a full disk): never stop."""
        try:
            while data:
                data = data[os.write(1, data) :]
        except OSError:
            return False
        return True


def _own_terminal() -> None:
    """A session of the command's own, the terminal on its stdin its controlling one: the shell has job
    control, and a hangup of the terminal reaches it."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _command(
    args: argparse.Namespace,
    command: list[str],
    env: dict[str, str],
    output: Output,
    handshake: tuple[tuple[int, int], tuple[int, int]] | None,
) -> NoReturn:
    """The command's process: its output to the pipe, its own user namespace, the job's user; then exec."""
    for name in ("SIGTERM", "SIGPIPE", "SIGXFSZ"):  # as a shell would start it, not as Python runs
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    try:
        if args.terminal:
            output.drop()  # the launcher then finds the pipe ended at once, and copies nothing
            _own_terminal()
        else:
            output.give()
        if handshake is not None:
            (ready_read, ready_write), (go_read, go_write) = handshake
            os.close(ready_read)
            os.close(go_write)
            enter_own_user_namespace(ready_write, go_read)
        _become(args.user, args.groups)
        # The job's environment only now, as its own user: nothing of it reached the root steps.
        os.execvpe(command[0], command, env)  # noqa: S606 -- the agent passes ``sh -c`` for a shell
    except NamespaceError as err:
        sys.stderr.write(f"kerrigan: cannot give the job a user namespace of its own: {err}\n")
    except OSError as err:
        sys.stderr.write(f"kerrigan: cannot run {command[0]!r}: {err.strerror}\n")
    sys.stderr.flush()
    os._exit(127)


def main(argv: list[str] | None = None) -> int:
    """Run the command as described above; its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    if args.user_namespace and args.user is None:  # root in it would keep its power over the host's files
        parser.error("--user-namespace runs the command as a --user only")
    try:
        env = _command_environment(args.env_fd)
        if args.cwd is not None:
            os.chdir(args.cwd)
        result_dir = _enter(args)
    except (LaunchError, OSError, ValueError) as err:
        sys.stderr.write(f"kerrigan: {err}\n")
        return 127
    # A handler (not SIG_IGN, which exec would pass on to the command) keeps the launcher alive to account;
    # the SIGTERM the group got starts the grace period, after which the launcher SIGKILLs what is left.
    terminated: list[float] = []
    signal.signal(signal.SIGTERM, lambda *_: terminated.append(time.monotonic()))
    _become_subreaper()
    if args.user is not None:
        empty_host_keyrings(args.user)  # what an earlier job of the uid left where this one could reach it
    output = Output(args.output_max_bytes)
    # The user namespace's handshake: made by the command's process, mapped by the launcher.
    handshake = (os.pipe(), os.pipe()) if args.user_namespace else None
    started = time.monotonic()
    reaper = Reaper()
    try:
        child = os.fork()
    except OSError as err:
        sys.stderr.write(f"kerrigan: cannot start the command: {err}\n")
        return 127
    if child == 0:
        os.close(result_dir)
        _command(args, command, env, output, handshake)
    output.started()
    if handshake is not None:
        (ready_read, ready_write), (go_read, go_write) = handshake
        os.close(ready_write)
        os.close(go_read)
        with contextlib.suppress(NamespaceError):  # the command's process says so, and ends
            map_user_namespace(child, ready_read, go_write)
    while child not in reaper.statuses:
        if reaper.reap(block=False) is None:
            if terminated and time.monotonic() - terminated[0] >= args.grace_s:
                for pid in _descendants(os.getpid()):  # the command ignored SIGTERM: end it all
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
            output.pump(0.02)
    exit_status = os.waitstatus_to_exitcode(reaper.statuses.get(child, 0))
    wall_s = time.monotonic() - started
    reaper.end_leftovers(args.grace_s, output.pump)
    output.drain(reads=PIPE_BYTES >> 16)  # what its last writers left in the pipe
    result = {"exit_status": exit_status, "cpu_s": reaper.cpu_s, "wall_s": wall_s}
    _write_result(result_dir, args.result.name, result)
    return exit_status if exit_status >= 0 else 128 - exit_status


if __name__ == "__main__":
    sys.exit(main())
