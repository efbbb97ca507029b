"""A job's private ``/tmp``: a mount namespace of its own, made by the launcher while it is still root.

The launcher unshares its mount namespace (``unshare(CLONE_NEWNS)``; Python 3.11 has no ``os.unshare``),
makes every mount in it private (so nothing it mounts leaks back to the host, nor the host's later mounts
in), and binds the job's own folders over ``/tmp``, ``/var/tmp`` and ``/dev/shm``. A path the job needs that
those mounts hide (its workspace, its home: in tests the work dir is under ``/tmp``) is bound again at the
same path inside the new ``/tmp``, so it keeps its name. The job gets an IPC namespace of its own too
(``CLONE_NEWIPC``): System V shared memory, semaphores and message queues are ``/dev/shm``'s older kin, and
without it a segment one job leaves outlives it, readable by a later job with the same uid; a job's own go
with its last process, and so do its POSIX message queues (``mq_open``). Every ``mqueue`` mount it sees
(``/dev/mqueue``, where systemd mounts the host's, open to all) is covered by one of its own namespace's
(:func:`private_mqueue`): a queue made there would otherwise be the host's, kept after the job.
:func:`private_proc` mounts a ``/proc`` of its own that shows the job its own user's processes only
(``hidepid=invisible``, Linux 5.8): other jobs' command lines, which anyone may read in the host's
``/proc``, often carry a token (``curl -H "Authorization: ..."``, ``git clone
https://x-access-token:...@``). Only the standard library is used.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

CLONE_NEWNS: Final = 0x00020000
CLONE_NEWIPC: Final = 0x08000000
MS_BIND: Final = 4096
MS_REC: Final = 16384
MS_PRIVATE: Final = 1 << 18
MS_NOSUID: Final = 2
MS_NODEV: Final = 4
MS_NOEXEC: Final = 8
HIDDEN_BY_PRIVATE_TMP: Final = ("/tmp", "/var/tmp", "/dev/shm")  # noqa: S108 -- the folders being replaced
AREA_FOLDERS: Final = ("tmp", "var-tmp", "shm")  # the job's own, in its area, in the same order


class MountError(OSError):
    """A namespace or mount call the kernel refused; the message names the call and the paths."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise MountError(errno, f"{what}: {os.strerror(errno)}")


def unshare_mounts() -> None:
    """Give this process a mount namespace of its own in which no mount propagates either way, and an IPC
    namespace of its own."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")


def private_mqueue() -> list[str]:
    """Cover every ``mqueue`` mount in this (new) mount namespace with one of this process's IPC namespace,
    so a queue made through a path is the job's own too; the mount points covered."""
    points: list[str] = []
    for line in Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace").splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "mqueue":
            point = _unescape(fields[1])
            if point not in points:
                points.append(point)
    for point in points:
        _check(
            _libc().mount(b"mqueue", os.fsencode(point), b"mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC, None),
            f"mount -t mqueue mqueue {point}",
        )
    return points


def _unescape(field: str) -> str:
    """A path as the mount table writes it (space, tab, newline and backslash as octal escapes)."""
    for code in ("040", "011", "012", "134"):
        field = field.replace("\\" + code, chr(int(code, 8)))
    return field


def bind(source: str, target: str) -> None:
    """Bind ``source`` over ``target`` (a folder over a folder) in this mount namespace."""
    _check(
        _libc().mount(os.fsencode(source), os.fsencode(target), None, MS_BIND | MS_REC, None),
        f"mount --bind {source} {target}",
    )


def hidden(path: str) -> bool:
    """Whether a private ``/tmp`` would hide ``path``."""
    return any(path == top or path.startswith(top + "/") for top in HIDDEN_BY_PRIVATE_TMP)


def private_tmp(area: Path, keep: Sequence[str]) -> None:
    """Bind ``area``'s ``tmp``, ``var-tmp`` and ``shm`` over ``/tmp``, ``/var/tmp`` and ``/dev/shm``, in a
    new mount namespace; each folder of ``keep`` those hide is bound again at its own path."""
    unshare_mounts()
    private_mqueue()
    # Opened in the new namespace (a bind's source must be one of its mounts) before anything is covered:
    # a folder under /tmp (the area itself, in tests) is still reachable through its descriptor after.
    flags = os.O_RDONLY | os.O_DIRECTORY
    own = {
        top: os.open(area / name, flags)
        for top, name in zip(HIDDEN_BY_PRIVATE_TMP, AREA_FOLDERS, strict=True)
    }
    kept = {path: os.open(path, flags) for path in keep if hidden(path)}
    try:
        for top, fd in own.items():
            if Path(top).is_dir():
                bind(f"/proc/self/fd/{fd}", top)
        for path, fd in kept.items():
            _mkdirs(path)
            bind(f"/proc/self/fd/{fd}", path)
    finally:
        for fd in [*own.values(), *kept.values()]:
            os.close(fd)


def private_proc() -> None:
    """Mount a ``/proc`` over the host's in this (private) mount namespace where a process sees only its own
    user's processes; root, the launcher, still sees all. A kernel older than 5.8 refuses the option
    (``EINVAL``): there ``hidepid`` would change the host's one ``/proc``, so it is not tried another way."""
    _check(
        _libc().mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, b"hidepid=invisible"),
        "mount -t proc -o hidepid=invisible proc /proc",
    )


def _mkdirs(path: str) -> None:
    """Make ``path`` in the job's new ``/tmp``: root's folders that the job may pass through, not list."""
    current = Path("/")
    for part in Path(path).parts[1:]:
        current /= part
        if not current.exists():
            current.mkdir(mode=0o711)
