"""An agent's hold on its range of job users, for as long as it runs: two agents on one host never hand out
the same uid (one's clean-up would delete what the other's job keeps in ``/run/lock``, and each one's job
could read the other's workspace, given to the same uid).

An agent whose jobs run as their own users holds an exclusive ``flock`` on a file named for its range,
``<folder>/job-users-FIRST-LAST.lock`` (``/run/kerrigan-runner`` unless set), with its pid and work dir
written in it. It takes that lock first, then looks at every other such file of the folder whose range
overlaps its own: one that another process holds is refused too. Taking before looking means two agents
starting at once with overlapping ranges cannot both miss each other (at worst both refuse). A file left by
an agent that ended holds nothing (the kernel drops a lock with its last descriptor) and is not refused;
files are never deleted, since deleting a lock file lets two processes hold "the same" lock. The folder is
root's, mode 0700, its files 0600: a job cannot open one, let alone hold it against its agent's restart.
The descriptor is not inherited by the jobs the agent starts (``O_CLOEXEC``), so the lock ends with the
agent.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from kerrigan.runner.isolation.users import UserRange

DEFAULT_LOCK_FOLDER: Final = Path("/run/kerrigan-runner")
_NAME: Final = re.compile(r"job-users-([0-9]{1,10})-([0-9]{1,10})\.lock")
_FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SHOWN: Final = 300  # characters of a lock file's text a message shows


class RangeLockError(Exception):
    """This agent cannot hold its range of job users: another agent on the host holds some of them, or the
    folder of the locks is not safe to keep them in; the message says which."""


def lock_name(users: UserRange) -> str:
    """The lock file of ``users``."""
    return f"job-users-{users.first}-{users.last}.lock"


def overlaps(one: UserRange, other: UserRange) -> bool:
    """Whether two ranges share an id."""
    return one.first <= other.last and other.first <= one.last


@dataclass
class RangeLock:
    """The lock an agent holds on its range, until :meth:`release`."""

    users: UserRange
    path: Path
    _fd: int | None = field(default=None, repr=False)

    def release(self) -> None:
        """Let the range go (closing the descriptor ends the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def hold_range(users: UserRange, work_dir: Path, folder: Path = DEFAULT_LOCK_FOLDER) -> RangeLock:
    """Take this agent's lock on ``users``, or raise :class:`RangeLockError` naming the range another agent
    holds, its pid and work dir, and its lock file."""
    folder_fd = _open_folder(folder)
    try:
        name = lock_name(users)
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=folder_fd)
        lock = RangeLock(users, folder / name, fd)
        try:
            if not _try_lock(fd, fcntl.LOCK_EX):
                raise _held(users, users, folder / name, _text(fd))
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, work dir {work_dir}\n".encode(errors="replace"), 0)
            for other, other_name in _ranges(folder_fd):
                if other_name == name or not overlaps(users, other):
                    continue
                holder = _holder(folder_fd, other_name)
                if holder is not None:
                    raise _held(users, other, folder / other_name, holder)
        except BaseException:
            lock.release()
            raise
        return lock
    finally:
        os.close(folder_fd)


def _open_folder(folder: Path) -> int:
    """The lock folder, made root's own (0700) if it is not there; one that is a link, or that someone
    other than this agent's user could change, is refused."""
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700, parents=True)
    try:
        fd = os.open(folder, _FOLDER)
    except OSError as err:
        raise RangeLockError(f"cannot open the folder of job user locks {folder}: {err.strerror}") from err
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise RangeLockError(
            f"the folder of job user locks {folder} is not this agent's user's alone (owner uid "
            f"{info.st_uid}, mode {stat.S_IMODE(info.st_mode):04o}): make it root's, mode 0700"
        )
    os.fchmod(fd, 0o700)  # made by hand, or by an older agent: jobs do not even list it
    return fd


def _ranges(folder_fd: int) -> list[tuple[UserRange, str]]:
    """The ranges the folder has lock files of."""
    found = []
    for entry in os.listdir(folder_fd):
        match = _NAME.fullmatch(entry)
        if match is not None:
            with contextlib.suppress(ValueError):
                found.append((UserRange.parse(f"{match[1]}-{match[2]}"), entry))
    return sorted(found, key=lambda item: (item[0].first, item[0].last))


def _holder(folder_fd: int, name: str) -> str | None:
    """What the lock file ``name`` says of the agent holding it, or None when no one holds it."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except FileNotFoundError:
        return None
    except OSError as err:  # a link or a folder in its place: not ours to judge free
        return f"unreadable: {err.strerror}"
    try:
        if _try_lock(fd, fcntl.LOCK_SH):
            return None  # an agent that ended left it: the lock went with it
        return _text(fd)
    finally:
        os.close(fd)  # any shared lock taken to look goes with it


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return False
        raise
    return True


def _text(fd: int) -> str:
    data = os.pread(fd, _SHOWN, 0).decode("utf-8", errors="replace")
    return " ".join(data.split()) or "no pid written yet"


def _held(users: UserRange, other: UserRange, path: Path, holder: str) -> RangeLockError:
    which = f"job users {users} are held" if other == users else f"job users {users} overlap {other}, held"
    return RangeLockError(
        f"{which} by another agent on this host ({holder}; lock file {path}): give each agent on a host "
        "a --job-users range of its own"
    )
