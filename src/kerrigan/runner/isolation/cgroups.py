"""Each job in a cgroup of its own, killed whole at the job's end even when its launcher died.

One small interface, :class:`CgroupBackend`, with the implementation the host allows chosen at start
(:mod:`.probe`):

- ``systemd``: a transient scope unit (``systemd-run --scope`` with ``AllowedCPUs=``, ``MemoryMax=`` and
  ``TasksMax=``)
  where systemd is PID 1 and runs the agent; ended with ``systemctl kill --signal=SIGKILL``.
- ``cgroup-v2``: a folder in the agent's own (delegated) cgroup v2 subtree with ``cpuset.cpus`` and
  ``memory.max`` (and ``pids.max``); ended by writing ``cgroup.kill``.
- ``cgroup-v1``: a folder in the agent's own cgroup of each v1 controller there is (freezer, memory, cpuset,
  pids) with ``memory.limit_in_bytes``, ``cpuset.cpus`` and ``pids.max``; ended by freezing it, SIGKILLing
  every process in it and thawing it, so nothing forks its way out meanwhile.

Every backend caps the job's processes and threads at :data:`JOB_PIDS_MAX` where the host has a pids
controller: a fork bomb fills its own cgroup, not the host's process table.

The launcher writes its own pid into the cgroup (its ``cgroup.procs`` files, which the agent passes it)
before it starts the command, so the command and everything it starts are in it from the first instruction.
The cgroup is named ``kerrigan-<agent key>-job-<id>`` (the key tells apart agents sharing a host) and
recorded in the job record, so a restarted agent empties the cgroups of jobs that ended while it was away.

The memory cap follows the vCPU claim (seed 003): host memory (``MemTotal``, read once at start) times
the job's claim / the host's allocatable vCPUs, rounded down to whole pages (:func:`memory_cap`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from kerrigan.core.cpus import format_cpu_list

log = logging.getLogger(__name__)

EMPTY_TIMEOUT_S: Final = 60.0  # a process stuck in the kernel (a hung USB device) may take this long
V1_CONTROLLERS: Final = ("freezer", "memory", "cpuset", "pids")
JOB_PIDS_MAX: Final = 4096  # processes and threads of one job: a parallel build's, far below the host's


class CgroupError(OSError):
    """A job's cgroup could not be made or emptied; the message names the folder or unit."""


def memory_cap(memory_total: int, claim: int, vcpus: int, page_bytes: int) -> int:
    """The job's memory cap: its share of the host's memory by its share of the allocatable vCPUs, in
    whole pages."""
    share = memory_total * claim // max(vcpus, 1)
    return share // page_bytes * page_bytes


class CgroupBackend:
    """No cgroup of the job's own (the base of the others): the launcher's subreaper is all there is."""

    name: str | None = None
    memory_cap = False
    cpu_set = False

    def __init__(self, key: str) -> None:
        self.key = key

    def unit_name(self, job_id: str) -> str:
        """The job's cgroup (or unit) name."""
        return f"kerrigan-{self.key}-job-{job_id}"

    def create(
        self, job_id: str, cpus: Sequence[int], memory_bytes: int | None, pids_max: int = JOB_PIDS_MAX
    ) -> dict[str, Any] | None:
        """Make the job's cgroup; what the job record keeps of it (None: there is none)."""
        return None

    def prefix(
        self,
        entry: Mapping[str, Any] | None,
        cpus: Sequence[int],
        memory_bytes: int | None,
        pids_max: int = JOB_PIDS_MAX,
    ) -> list[str]:
        """What goes before the launcher's command line (``systemd-run`` for a scope)."""
        return []

    def join_files(self, entry: Mapping[str, Any] | None) -> list[str]:
        """The files the launcher writes its pid into before it starts the command."""
        return []


class FolderBackend(CgroupBackend):
    """A cgroup made of folders the agent writes itself (cgroup v1 and v2): the job joins each one's
    ``cgroup.procs``."""

    def join_files(self, entry: Mapping[str, Any] | None) -> list[str]:
        """Every folder's ``cgroup.procs``."""
        return [str(Path(path) / "cgroup.procs") for path in ((entry or {}).get("paths") or {}).values()]


@contextlib.contextmanager
def _undone_on_error(entry: Mapping[str, Any]) -> Iterator[None]:
    """What was made of ``entry`` goes again if writing it fails half way; the failure as a CgroupError."""
    try:
        yield
    except OSError as err:
        with contextlib.suppress(OSError):
            empty(entry)
        raise CgroupError(err.errno, f"cannot make the job's cgroup: {err}") from err


class CgroupV1(FolderBackend):
    """A folder per controller under the agent's own cgroups of cgroup v1."""

    name = "cgroup-v1"

    def __init__(self, key: str, parents: Mapping[str, Path]) -> None:
        super().__init__(key)
        self.parents = dict(parents)
        self.memory_cap = "memory" in parents
        self.cpu_set = "cpuset" in parents

    def create(
        self, job_id: str, cpus: Sequence[int], memory_bytes: int | None, pids_max: int = JOB_PIDS_MAX
    ) -> dict[str, Any]:
        """One folder per controller, its CPU set, memory cap and process cap written before anything joins
        it."""
        folders = {name: parent / self.unit_name(job_id) for name, parent in self.parents.items()}
        entry = {"backend": self.name, "paths": {name: str(path) for name, path in folders.items()}}
        empty(entry)  # a leftover of a crashed agent with the same job id: it is ours, and it goes
        with _undone_on_error(entry):
            for folder in folders.values():
                folder.mkdir()
            if "cpuset" in folders:
                # A v1 cpuset starts with no CPUs and no memory nodes: nothing could join it.
                mems = (self.parents["cpuset"] / "cpuset.mems").read_text().strip()
                _write(folders["cpuset"] / "cpuset.mems", mems)
                _write(folders["cpuset"] / "cpuset.cpus", format_cpu_list(cpus))
            if "memory" in folders and memory_bytes is not None:
                _write(folders["memory"] / "memory.limit_in_bytes", str(memory_bytes))
            if "pids" in folders:
                _write(folders["pids"] / "pids.max", str(pids_max))
        return entry


class CgroupV2(FolderBackend):
    """A folder in the agent's delegated cgroup v2 subtree."""

    name = "cgroup-v2"
    memory_cap = True
    cpu_set = True

    def __init__(self, key: str, parent: Path) -> None:
        super().__init__(key)
        self.parent = parent

    def delegate(self) -> None:
        """Enable the memory, cpuset and pids controllers for the subtree. A cgroup with processes in it
        cannot give controllers to its children, so the agent moves itself into a leaf first."""
        wanted = {"memory", "cpuset", "pids"} & set((self.parent / "cgroup.controllers").read_text().split())
        enabled = set((self.parent / "cgroup.subtree_control").read_text().split())
        if wanted <= enabled:
            return
        leaf = self.parent / f"kerrigan-{self.key}-agent"
        leaf.mkdir(exist_ok=True)
        for pid in _pids(self.parent):
            with contextlib.suppress(ProcessLookupError, OSError):
                _write(leaf / "cgroup.procs", str(pid))
        _write(self.parent / "cgroup.subtree_control", " ".join(f"+{name}" for name in sorted(wanted)))

    def create(
        self, job_id: str, cpus: Sequence[int], memory_bytes: int | None, pids_max: int = JOB_PIDS_MAX
    ) -> dict[str, Any]:
        """The job's folder with ``cpuset.cpus``, ``memory.max`` and ``pids.max``."""
        folder = self.parent / self.unit_name(job_id)
        entry = {"backend": self.name, "paths": {"unified": str(folder)}}
        empty(entry)
        with _undone_on_error(entry):
            folder.mkdir()
            _write(folder / "cpuset.cpus", format_cpu_list(cpus))
            if memory_bytes is not None:
                _write(folder / "memory.max", str(memory_bytes))
            if (folder / "pids.max").exists():
                _write(folder / "pids.max", str(pids_max))
        return entry


class SystemdScope(CgroupBackend):
    """A transient scope unit made by ``systemd-run --scope``, which then runs the launcher in it."""

    name = "systemd"
    memory_cap = True
    cpu_set = True

    def create(
        self, job_id: str, cpus: Sequence[int], memory_bytes: int | None, pids_max: int = JOB_PIDS_MAX
    ) -> dict[str, Any]:
        """Nothing is made yet: ``systemd-run`` makes the scope as it starts the launcher."""
        return {"backend": self.name, "unit": f"{self.unit_name(job_id)}.scope"}

    def prefix(
        self,
        entry: Mapping[str, Any] | None,
        cpus: Sequence[int],
        memory_bytes: int | None,
        pids_max: int = JOB_PIDS_MAX,
    ) -> list[str]:
        """``systemd-run --scope`` with the job's CPUs, memory cap and process cap."""
        unit = str((entry or {}).get("unit", ""))
        argv = [
            "systemd-run",
            "--scope",
            "--quiet",
            "--collect",
            f"--unit={unit}",
            "-p",
            f"TasksMax={pids_max}",
        ]
        if cpus:
            argv += ["-p", f"AllowedCPUs={format_cpu_list(cpus)}"]
        if memory_bytes is not None:
            argv += ["-p", f"MemoryMax={memory_bytes}"]
        return [*argv, "--"]


def empty(entry: Mapping[str, Any] | None, timeout_s: float = EMPTY_TIMEOUT_S) -> None:
    """Kill everything in a recorded cgroup, wait until it is empty and remove it. Blocking; a cgroup
    that is already gone is done. Raises :class:`CgroupError` when it will not empty in ``timeout_s``."""
    if not entry:
        return
    if entry.get("backend") == SystemdScope.name:
        _stop_unit(str(entry.get("unit", "")), timeout_s)
        return
    folders = [Path(path) for path in (entry.get("paths") or {}).values()]
    freezer = Path(entry["paths"]["freezer"]) if (entry.get("paths") or {}).get("freezer") else None
    deadline = time.monotonic() + timeout_s
    while True:
        if freezer is not None:  # frozen before it is read: nothing forks a process the kill would miss
            _freeze(freezer, "FROZEN")
        pids = {pid for folder in folders for pid in _pids(folder)}
        if pids:
            _kill(folders, pids)
        if freezer is not None:
            _freeze(freezer, "THAWED")  # the SIGKILLs are acted on as the processes thaw
        if not pids:
            break
        if time.monotonic() > deadline:
            raise CgroupError(errno.EBUSY, f"{folders[0]} still holds processes {sorted(pids)}")
        time.sleep(0.02)
    for folder in folders:
        _rmdir(folder, deadline)


def _kill(folders: Sequence[Path], pids: set[int]) -> None:
    kill_file = folders[0] / "cgroup.kill"
    if kill_file.exists():  # cgroup v2 since Linux 5.14: the kernel kills the whole cgroup at once
        _write(kill_file, "1")
        return
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _freeze(freezer: Path, state: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        _write(freezer / "freezer.state", state)
        deadline = time.monotonic() + 1.0  # FREEZING may last while a process sleeps in the kernel
        while (freezer / "freezer.state").read_text().strip() != state and time.monotonic() < deadline:
            time.sleep(0.005)


def _rmdir(folder: Path, deadline: float) -> None:
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as err:  # EBUSY while the last exits finish
            if err.errno != errno.EBUSY or time.monotonic() > deadline:
                raise CgroupError(err.errno, f"cannot remove {folder}: {err.strerror}") from err
            time.sleep(0.02)


def _stop_unit(unit: str, timeout_s: float) -> None:
    if not unit:
        return
    subprocess.run(  # noqa: S603 -- fixed arguments; a unit already gone is fine
        ["systemctl", "kill", "--signal=SIGKILL", "--kill-whom=all", unit],  # noqa: S607
        capture_output=True,
        check=False,
    )
    deadline = time.monotonic() + timeout_s
    while True:
        shown = subprocess.run(  # noqa: S603
            ["systemctl", "show", "--property=ActiveState", "--value", unit],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
        )
        if shown.stdout.strip() in ("", "inactive", "failed"):
            return
        if time.monotonic() > deadline:
            raise CgroupError(errno.EBUSY, f"{unit} is still {shown.stdout.strip()}")
        time.sleep(0.05)


def _pids(folder: Path) -> list[int]:
    try:
        return [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def _write(path: Path, value: str) -> None:
    # One write() per value: cgroup files act on each write, and buffered text might split it. (O_CREAT
    # does nothing on cgroupfs, which makes its files itself; it lets a test stand plain folders in for it.)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
