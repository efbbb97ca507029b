"""The unprivileged users jobs run as: numeric ids from a configured range, one per live job.

A job's uid (and a gid of the same number) is taken from ``job_users`` (default 61000-61183: below
systemd's DynamicUser range, 61184-65519, and above its home-directory range) when the job is accepted,
recorded in its job record, and free again once the job ended and its cgroup is empty: a restarted agent
reads the records, so two live jobs never share an id. An id that ``/etc/passwd`` or ``/etc/group`` gives
to someone is never used.

No passwd entries are made: jobs run with numeric ids, ``HOME`` a folder of their own in their area and
``USER``/``LOGNAME`` ``kerrigan-job``. A tool that insists on looking its user up (``ssh``, ``whoami``) says
the user is unknown; creating entries would change the host's user database at every start and leave it
behind after a crash.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DEFAULT_JOB_USERS: Final = "61000-61183"
_RANGE = re.compile(r"([0-9]{1,10})-([0-9]{1,10})")


class NoJobUserError(Exception):
    """Every id of the range is held by a live job."""


@dataclass(frozen=True, slots=True)
class UserRange:
    """The ids jobs may run as, ``first`` to ``last`` inclusive."""

    first: int
    last: int

    @classmethod
    def parse(cls, text: str) -> UserRange:
        """``FIRST-LAST``; a ValueError naming ``job_users`` otherwise."""
        match = _RANGE.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"job_users: expected FIRST-LAST (e.g. {DEFAULT_JOB_USERS}), got {text!r}")
        first, last = int(match[1]), int(match[2])
        if not 1000 <= first <= last < 2**31 - 1:
            raise ValueError(f"job_users: {text!r} must be ids from 1000 up, the first not above the last")
        return cls(first, last)

    def __str__(self) -> str:
        return f"{self.first}-{self.last}"


def ids_in_use(*files: Path) -> frozenset[int]:
    """The numeric ids the host's user and group databases give out (the third field of each line)."""
    found: set[int] = set()
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            fields = line.split(":")
            if len(fields) > 2 and fields[2].isascii() and fields[2].isdigit():
                found.add(int(fields[2]))
    return frozenset(found)


def allocate(users: UserRange, live: Collection[int], taken: Collection[int] = frozenset()) -> int:
    """The lowest id of the range no live job holds and the host does not give out."""
    for uid in range(users.first, users.last + 1):
        if uid not in live and uid not in taken:
            return uid
    raise NoJobUserError(f"every job user of {users} is held by a running job")


def give_to(path: Path, uid: int, mode: int = 0o700) -> None:
    """Make ``path`` and everything in it the job user's (links themselves, never their targets), and
    ``path`` itself ``mode``."""
    os.lchown(path, uid, uid)
    # Through open folders, not path strings: a legal tree may be deeper than PATH_MAX. fwalk does not
    # follow links to folders: a link in the workspace is changed, never entered.
    for _folder, folders, files, folder_fd in os.fwalk(path):
        for name in folders + files:
            os.chown(name, uid, uid, dir_fd=folder_fd, follow_symlinks=False)
    path.chmod(mode)


def give_back(path: Path, uid: int, mode: int = 0o700) -> None:
    """Make the folder ``path`` (as :func:`take_back` left it: root's) ``uid``'s again, ``mode``, and what in
    it ``uid`` owns stays so: nothing else in it is changed. Not :func:`give_to`, which chowns every name in
    it: a folder a job wrote in may hold a hard link to a file that is not its own (one it could read and
    write, any at all where ``fs.protected_hardlinks`` is off), which would become its user's. A link in
    ``path``'s place is refused (``O_NOFOLLOW``)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, uid, uid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def hand_over(path: Path, old: int, new: int) -> None:
    """What ``old`` owns in the folder ``path`` (links themselves, never their targets) becomes ``new``'s:
    a job's files for the other uid it is given; a name someone else owns (a hard link the job made to
    another's file) is left as it is."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        # fwalk enters a folder only when it is the one it looked at: a link swapped in is not followed.
        for _folder, folders, files, folder_fd in os.fwalk(".", dir_fd=fd):
            for name in folders + files:
                with contextlib.suppress(FileNotFoundError):
                    if os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_uid == old:
                        os.chown(name, new, new, dir_fd=folder_fd, follow_symlinks=False)
    finally:
        os.close(fd)


def take_back(path: Path) -> None:
    """Make the folder ``path`` root's own (mode 0700) again, its contents unreachable: at the job's end,
    before its uid is free for a later job, which must not read or plant files in what this one left.
    Nothing happens to a folder that is gone; a link in its place is refused (``O_NOFOLLOW``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        os.fchown(fd, 0, 0)
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


SHARED_WRITABLE: Final = ("/run/lock",)  # the host's sticky folders a private /tmp does not cover


def remove_owned(folder: Path, uid: int) -> list[str]:
    """Delete what ``uid`` made directly in the shared folder ``folder`` (links themselves, never their
    targets); the names removed. At the job's end: a later job with the same uid finds nothing of it."""
    removed: list[str] = []
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return removed
    try:
        for entry in os.scandir(fd):
            info = entry.stat(follow_symlinks=False)
            if info.st_uid != uid:
                continue
            if stat.S_ISDIR(info.st_mode):
                shutil.rmtree(entry.name, dir_fd=fd)  # fd-based on Linux: links inside are not followed
            else:
                os.unlink(entry.name, dir_fd=fd)
            removed.append(entry.name)
    finally:
        os.close(fd)
    return removed
