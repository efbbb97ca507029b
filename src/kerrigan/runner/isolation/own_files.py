"""Whether a job could change what runs as root: the agent's Python and Kerrigan's code, and its work dir.

The agent, and the launcher it starts for every job (``python -I -m kerrigan.runner.launch``), run as root
from the files of the Python that runs the agent: its executable and the folders of its import path (the
standard library; site-packages, whose ``.pth`` files run at every start; Kerrigan's own package). A job
that could change one of those files, add one, or replace a folder on the way to one would have its code
run as root by the next job's launcher; one that could change the work dir would steer where the agent
writes as root. So where jobs run as users of their own, the agent looks at them once at start and refuses
to start when a job could write one:

- a file or folder whose owner is a job's user: one of ``job_users``, or a uid the host's user database
  does not name (the users of *any* agent's jobs on the host have no entry there);
- one that a job's group may write: its gid is a job's (the same numbers as the users), one of
  ``job_groups``, or a gid the group database does not name;
- one that everyone may write. A folder *on the way* to what is looked at that everyone may write is fine
  when it is sticky, as ``/tmp`` is: only an entry's owner may rename it, and that entry is looked at too.

What is looked at: the executable and every folder above it; what the Python's installation (and its
virtual environment's) keeps in ``bin`` and ``lib`` (the interpreter, ``libpython``); each folder of the
import path, every entry in it, and below it every folder Python could import from (its name is an
identifier: a package), with their entries; where each link among them leads; the work dir and what the
agent keeps directly in it (the workspaces there are the jobs', and hold no code of the agent's). ACLs are
not read: a host that gives jobs write access through one is not caught here.
"""

from __future__ import annotations

import functools
import os
import stat
import sys
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kerrigan.runner.isolation.users import UserRange, ids_in_use

SHOWN: Final = 3  # reasons a refusal names; it says how many more there are


class OwnFilesWritableError(Exception):
    """A job could change the agent's code, its Python or its work dir; the message names what."""


@dataclass(frozen=True, slots=True)
class JobIds:
    """The uids and gids a job may run as, or that some agent's job may: whose write access counts."""

    users: UserRange
    groups: frozenset[int]
    named_users: frozenset[int]  # the uids /etc/passwd names
    named_groups: frozenset[int]  # the gids /etc/group names

    def user(self, uid: int) -> bool:
        """Whether ``uid`` is, or may be, a job's."""
        return self.users.first <= uid <= self.users.last or (uid != 0 and uid not in self.named_users)

    def group(self, gid: int) -> bool:
        """Whether ``gid`` is, or may be, a job's group."""
        in_range = self.users.first <= gid <= self.users.last
        return in_range or gid in self.groups or (gid != 0 and gid not in self.named_groups)


def problem(path: Path, info: os.stat_result, ids: JobIds, *, on_the_way: bool) -> str | None:
    """Why a job could change ``path`` (``info`` is its ``lstat``), or None. ``on_the_way``: a folder above
    what is looked at, whose entries matter only if they can be renamed."""
    if ids.user(info.st_uid):
        return f"{path} is owned by uid {info.st_uid}, which a job may run as"
    mode = info.st_mode
    if stat.S_ISLNK(mode) or (on_the_way and stat.S_ISDIR(mode) and mode & stat.S_ISVTX):
        return None  # a link's own mode means nothing; a sticky folder's entries are their owners'
    if mode & stat.S_IWOTH:
        return f"{path} is writable by everyone (mode {stat.S_IMODE(mode):04o})"
    if mode & stat.S_IWGRP and ids.group(info.st_gid):
        return f"{path} is writable by group {info.st_gid}, which a job may have"
    return None


class _Look:
    """One look at the host's files, collecting every reason found, each once."""

    def __init__(self, ids: JobIds) -> None:
        self.ids = ids
        self.walked: set[Path] = set()
        self.found: list[str] = []

    def on_the_way(self, path: Path) -> None:
        """``path``, the folders above it, and where a link among them leads."""
        path = path.absolute()
        for above in reversed(path.parents):
            self.one(above, on_the_way=True)
        self.one(path, on_the_way=False)
        if path.resolve() != path:
            self.on_the_way(path.resolve())

    def tree(self, top: Path) -> None:
        """``top`` (and the folders on the way to it), its entries, and the packages below it."""
        self.on_the_way(top)
        pending = [top.resolve()]
        while pending:
            folder = pending.pop()
            if folder in self.walked:
                continue
            self.walked.add(folder)
            try:
                with os.scandir(folder) as entries:
                    children = sorted(Path(entry.path) for entry in entries)
            except OSError:
                continue
            for path in children:
                info = self.one(path, on_the_way=False)
                if info is None:
                    continue
                if stat.S_ISLNK(info.st_mode):
                    self.on_the_way(path.resolve())
                if path.name.isidentifier() and path.is_dir():  # a package Python may import from
                    pending.append(path.resolve())

    def entries(self, folder: Path) -> None:
        """``folder`` (and the folders on the way to it) and each entry in it, not below."""
        self.on_the_way(folder)
        try:
            with os.scandir(folder) as found:
                children = sorted(Path(entry.path) for entry in found)
        except OSError:
            return
        for path in children:
            info = self.one(path, on_the_way=False)
            if info is not None and stat.S_ISLNK(info.st_mode):
                self.on_the_way(path.resolve())

    def one(self, path: Path, *, on_the_way: bool) -> os.stat_result | None:
        """Look at ``path`` itself; its ``lstat``, or None when it is not there."""
        try:
            info = path.lstat()
        except OSError:
            return None
        found = problem(path, info, self.ids, on_the_way=on_the_way)
        if found is not None and found not in self.found:
            self.found.append(found)
        return info


@dataclass(frozen=True, slots=True)
class Code:
    """What runs as root: the Python ``executable``, the ``installed`` folders whose entries it loads (its
    ``bin`` and ``lib``), and the folders of the import path (with Kerrigan's package), looked at below."""

    executable: Path
    installed: tuple[Path, ...] = ()
    imported: tuple[Path, ...] = ()


def code_paths() -> Code:
    """What runs as root in this process."""
    import kerrigan  # noqa: PLC0415 -- the package's own folder, wherever it is installed

    prefixes = dict.fromkeys(Path(prefix) for prefix in (sys.prefix, sys.base_prefix))
    installed = [prefix / name for prefix in prefixes for name in ("bin", "lib")]
    imported = [Path(entry or ".").absolute() for entry in sys.path]  # "": the working folder
    imported.append(Path(kerrigan.__file__).parent)
    return Code(
        Path(sys.executable),
        tuple(folder for folder in installed if folder.is_dir()),
        tuple(dict.fromkeys(folder for folder in imported if folder.exists())),
    )


def code_problems(code: Code, ids: JobIds) -> list[str]:
    """Every reason a job could change the code that runs as root."""
    look = _Look(ids)
    look.on_the_way(code.executable)
    for folder in code.installed:
        look.entries(folder)
    for folder in code.imported:
        look.tree(folder)
    return look.found


def work_dir_problems(work_dir: Path, ids: JobIds) -> list[str]:
    """Every reason a job could change ``work_dir``, a folder on the way to it, or what the agent keeps
    directly in it."""
    look = _Look(ids)
    look.on_the_way(work_dir)
    try:
        with os.scandir(work_dir) as entries:
            kept = sorted(Path(entry.path) for entry in entries)
    except OSError:
        kept = []
    for path in kept:
        look.one(path, on_the_way=False)
    return look.found


def job_ids(users: UserRange, groups: Collection[int]) -> JobIds:
    """Whose write access counts, on this host."""
    return JobIds(users, frozenset(groups), ids_in_use(Path("/etc/passwd")), ids_in_use(Path("/etc/group")))


@functools.cache
def _code_problems_once(code: Code, users: UserRange, groups: frozenset[int]) -> tuple[str, ...]:
    # The code does not change under a running process: agents a test starts in one process look once.
    return tuple(code_problems(code, job_ids(users, groups)))


def check_own_files(work_dir: Path, users: UserRange, groups: Collection[int]) -> None:
    """Raise :class:`OwnFilesWritableError` when a job could change the agent's code, its Python or its
    work dir."""
    found = list(_code_problems_once(code_paths(), users, frozenset(groups)))
    found += [item for item in work_dir_problems(work_dir, job_ids(users, groups)) if item not in found]
    if found:
        more = f" (and {len(found) - SHOWN} more)" if len(found) > SHOWN else ""
        raise OwnFilesWritableError(
            f"jobs could change what this agent runs as root: {'; '.join(found[:SHOWN])}{more}: make the "
            "agent's Python, Kerrigan and its work dir root's, and writable by root alone"
        )
