"""What the host allows for running jobs apart, found once at start, and the isolation chosen from it.

:func:`read_host_facts` reads the host (its uid, ``/proc/self/mounts``, ``/proc/self/cgroup``, PID 1, a
test folder made in each cgroup, ``fs.protected_hardlinks``, ``fs.protected_symlinks``, user namespaces);
:func:`choose` is a function of those facts and the settings, so a test passes the facts of a host it is not
running on. ``isolation: auto`` takes what the host allows, ``require`` refuses to start when jobs cannot run
apart, ``off`` runs jobs as the agent's user (``systemd_scope`` still pins them where systemd can).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kerrigan.runner.isolation.cgroups import V1_CONTROLLERS, CgroupBackend, CgroupV1, CgroupV2, SystemdScope
from kerrigan.runner.isolation.users import UserRange

log = logging.getLogger(__name__)

ISOLATION_MODES: Final = ("auto", "require", "off")
PROTECTIONS: Final = ("protected_hardlinks", "protected_symlinks")  # under /proc/sys/fs
# Run as a process of its own (the agent may have threads, which unshare refuses): exits 0 when it could.
TRY_USER_NAMESPACE: Final = "import ctypes, sys; sys.exit(ctypes.CDLL(None).unshare(0x10000000) != 0)"


class IsolationUnavailableError(Exception):
    """``isolation: require`` on a host that cannot run jobs apart; the message says what is missing."""


@dataclass(frozen=True, slots=True)
class HostFacts:
    """What the host offers for isolating jobs."""

    root: bool
    systemd: bool = False  # systemd is PID 1 and systemd-run is there
    cgroup_v2: Path | None = None  # the agent's own v2 cgroup, when v2 has memory and cpuset controllers
    cgroup_v1: Mapping[str, Path] = field(default_factory=dict)  # v1 controller -> the agent's own cgroup
    memory_total: int | None = None  # MemTotal, bytes
    # fs.protected_hardlinks and fs.protected_symlinks (None: unreadable). Off, a job may hard-link a file it
    # cannot read into its workspace, or plant a link in a shared sticky folder that root then follows.
    protected_hardlinks: bool | None = None
    protected_symlinks: bool | None = None
    user_namespaces: bool | None = None  # a job can have a user namespace (its own keyrings) of its own


@dataclass(frozen=True, slots=True)
class Isolation:
    """How this agent runs jobs apart, and what it cannot do on this host."""

    users: UserRange | None  # None: jobs run as the agent's user
    private_tmp: bool
    cgroups: CgroupBackend
    memory_total: int | None
    missing: tuple[str, ...] = ()
    protected_hardlinks: bool | None = None
    protected_symlinks: bool | None = None
    own_keyrings: bool = False  # each job's command runs in a user namespace of its own

    @property
    def isolated(self) -> bool:
        """Whether jobs run apart: their own users, /tmp and cgroup."""
        return self.users is not None and self.private_tmp and self.cgroups.name is not None

    def report(self) -> dict[str, Any]:
        """The health report's ``isolation`` object."""
        return {
            "users": self.users is not None,
            "tmp": self.private_tmp,
            "cgroup": self.cgroups.name,
            "memory_cap": self.cgroups.memory_cap and self.memory_total is not None,
            "cpu_set": self.cgroups.cpu_set,
            "keyrings": self.own_keyrings,
            "protected_hardlinks": self.protected_hardlinks,
            "protected_symlinks": self.protected_symlinks,
            "missing": list(self.missing),
        }

    def summary(self) -> str:
        """One line: what jobs get, and what is missing."""
        return summary(self.report())


def summary(report: Mapping[str, Any]) -> str:
    """``jobs isolated: users, private /tmp, cgroup-v1`` or ``jobs NOT isolated: not root``."""
    missing = [str(item) for item in report.get("missing") or []]
    got = [
        name
        for name, present in (
            ("users", report.get("users") is True),
            ("private /tmp", report.get("tmp") is True),
            (str(report.get("cgroup")), bool(report.get("cgroup"))),
            ("memory cap", report.get("memory_cap") is True),
        )
        if present
    ]
    if report.get("users") is True and report.get("tmp") is True and report.get("cgroup"):
        line = f"jobs isolated: {', '.join(got)}"
        return f"{line} (missing: {', '.join(missing)})" if missing else line
    return f"jobs NOT isolated: {', '.join(missing) or 'isolation is off'}"


def agent_key(work_dir: Path) -> str:
    """A short name for this agent among others on the host: its work dir's."""
    return hashlib.sha256(str(work_dir.resolve()).encode()).hexdigest()[:8]


def choose(facts: HostFacts, mode: str, users: UserRange, systemd_scope: str, key: str) -> Isolation:
    """The isolation ``mode`` asks for, as far as ``facts`` allow it."""
    if mode not in ISOLATION_MODES:
        raise ValueError(f"isolation: expected one of {', '.join(ISOLATION_MODES)}, got {mode!r}")
    systemd = systemd_scope == "always" or (systemd_scope == "auto" and facts.systemd and facts.root)
    if mode == "off":
        backend = SystemdScope(key) if systemd else CgroupBackend(key)
        return Isolation(None, False, backend, facts.memory_total, ("isolation is off",))
    missing: list[str] = []
    if not facts.root:
        missing.append("not root")
    backend = CgroupBackend(key)
    if systemd:
        backend = SystemdScope(key)
    elif facts.cgroup_v2 is not None and facts.root:
        backend = CgroupV2(key, facts.cgroup_v2)
    elif "freezer" in facts.cgroup_v1 and facts.root:
        backend = CgroupV1(key, facts.cgroup_v1)
        missing += [
            f"no cgroup v1 {name} controller" for name in ("memory", "cpuset") if name not in facts.cgroup_v1
        ]
    elif facts.root:
        missing.append("no usable cgroup (v2 without memory and cpuset controllers, no v1 freezer)")
    if facts.memory_total is None and backend.memory_cap:
        missing.append("no MemTotal in /proc/meminfo")
    if facts.root:  # jobs run as other users than the agent's: what the kernel keeps per uid matters
        if facts.user_namespaces is False:
            missing.append("no user namespaces: a job's keyrings outlive it")
        missing += [f"fs.{name} is 0" for name in PROTECTIONS if getattr(facts, name) is False]
    found = Isolation(
        users if facts.root else None,
        facts.root,
        backend,
        facts.memory_total,
        tuple(missing),
        facts.protected_hardlinks,
        facts.protected_symlinks,
        facts.root and facts.user_namespaces is True,
    )
    if mode == "require" and not found.isolated:
        raise IsolationUnavailableError(
            f"isolation: require, but jobs cannot run apart on this host: {', '.join(missing)}"
        )
    return found


def read_host_facts(key: str) -> HostFacts:
    """The facts of the host this agent runs on."""
    root = os.geteuid() == 0
    mounts = _read("/proc/self/mounts")
    own = own_cgroups(_read("/proc/self/cgroup"))
    v1: dict[str, Path] = {}
    v2: Path | None = None
    for point, kind, options in cgroup_mounts(mounts):
        if kind == "cgroup2":
            folder = _inside(point, own.get("", "/"))
            controllers = set(_read(str(folder / "cgroup.controllers")).split())
            if {"memory", "cpuset"} <= controllers and root and _can_make(folder, key):
                v2 = folder
            continue
        for name in V1_CONTROLLERS:
            if name in options and root:
                folder = _inside(point, own.get(name, "/"))
                if _can_make(folder, key):
                    v1[name] = folder
    systemd = _read("/proc/1/comm").strip() == "systemd" and shutil.which("systemd-run") is not None
    hardlinks, symlinks = (sysctl_flag(_read(f"/proc/sys/fs/{name}")) for name in PROTECTIONS)
    namespaces = _can_make_user_namespaces() if root else None
    return HostFacts(
        root, systemd, v2, v1, memory_total(_read("/proc/meminfo")), hardlinks, symlinks, namespaces
    )


def sysctl_flag(text: str) -> bool | None:
    """A ``/proc/sys`` number as on (not 0) or off; None when it is not a number (or was not read)."""
    value = text.strip()
    return value != "0" if value.isascii() and value.isdigit() else None


def cgroup_mounts(mounts: str) -> list[tuple[Path, str, frozenset[str]]]:
    """The cgroup hierarchies in a mount table: each one's mount point, type and options."""
    found = []
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
            # The mount table escapes spaces in paths as \040.
            point = Path(fields[1].replace("\\040", " "))
            found.append((point, fields[2], frozenset(fields[3].split(","))))
    return found


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup``: each v1 controller's cgroup path, and the v2 one under ``""``."""
    found = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            names = parts[1].split(",") if parts[1] else [""]
            for name in names:
                found[name] = parts[2]
    return found


def memory_total(meminfo: str) -> int | None:
    """``MemTotal`` of ``/proc/meminfo``, in bytes."""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            fields = line.split()
            if len(fields) >= 2 and fields[1].isascii() and fields[1].isdigit():
                return int(fields[1]) * 1024
    return None


def _inside(point: Path, path: str) -> Path:
    """The agent's own cgroup folder under a hierarchy's mount; the mount itself where a cgroup namespace
    hides the path."""
    folder = point / path.lstrip("/")
    return folder if folder.is_dir() else point


def _can_make_user_namespaces() -> bool:
    """Whether this agent may give a job a user namespace (the kernel has them, none caps them at 0, no
    seccomp profile refuses them): a process of its own tries."""
    try:
        tried = subprocess.run(  # noqa: S603 -- this Python, a fixed program
            [sys.executable, "-I", "-c", TRY_USER_NAMESPACE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
            cwd="/",
            env={},
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return tried.returncode == 0


def _can_make(folder: Path, key: str) -> bool:
    """Whether this agent may make cgroups in ``folder``: it tries."""
    trial = folder / f"kerrigan-{key}-probe"
    try:
        trial.mkdir(exist_ok=True)
        trial.rmdir()
    except OSError:
        return False
    return True


def _read(path: str) -> str:
    with contextlib.suppress(OSError):
        return Path(path).read_text(encoding="utf-8", errors="replace")
    return ""
