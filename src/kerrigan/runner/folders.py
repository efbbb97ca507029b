"""A folder the agent fills as root (a job's workspace), reached through open folders, one name at a time.

Whatever the names come from (a repository's tarball, an artifact's zip, the folder an offer names), every
folder below the top is opened relative to the open folder above it with ``O_NOFOLLOW | O_DIRECTORY``, so
no link is followed on the way, wherever it came from and whenever it appeared; and a name is one
folder's name, never ``..``, ``.``, empty, or holding ``/`` or NUL, so nothing climbs out, whatever a check
before this one let through. The top itself is opened with ``O_NOFOLLOW``: a link in its place is refused.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from kerrigan.core.unpacking import FOLDER_MODE

NOFOLLOW_DIR: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class NotAFolderNameError(OSError):
    """A name that is not one folder's (``..``, ``.``, empty, with ``/`` or NUL): nothing was opened."""


def check_name(name: str, path: Sequence[str]) -> None:
    """Refuse ``name`` (a part of ``path``) unless it names one entry of a folder."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        shown = "/".join(path)
        raise NotAFolderNameError(errno.EINVAL, f"{shown!r}: {name!r} is not the name of a folder's entry")


class OpenFolders:
    """The folder ``top`` and the folders below it, opened without following a link.

    The folder the last file went into is kept open for the next one, which is usually in the same folder.
    """

    def __init__(self, top: Path) -> None:
        self._top = os.open(top, NOFOLLOW_DIR)
        self._cached: tuple[tuple[str, ...], int] | None = None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._forget()
        os.close(self._top)

    def folder(self, path: tuple[str, ...]) -> None:
        """Make the folder ``path`` (and those on the way to it) where missing; an existing one is kept."""
        os.close(self.open(path, create=True))

    def parent(self, path: tuple[str, ...], *, create: bool) -> int:
        """The open folder the entry ``path`` is in (kept open, and closed, by this object); the entry's
        own name is checked too."""
        check_name(path[-1] if path else "", path)
        folder = path[:-1]
        if self._cached is not None and self._cached[0] == folder:
            return self._cached[1]
        fd = self.open(folder, create=create)
        self._forget()
        self._cached = (folder, fd)
        return fd

    def open(self, path: Sequence[str], *, create: bool) -> int:
        """``path`` opened as a folder, name by name, never through a link (a descriptor the caller
        closes); missing folders are made when ``create``, mode 0755."""
        for name in path:
            check_name(name, path)
        fd = os.dup(self._top)
        try:
            for name in path:
                try:
                    below = os.open(name, NOFOLLOW_DIR, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(name, 0o700, dir_fd=fd)  # 0700 until it is open: never briefly more open
                    below = os.open(name, NOFOLLOW_DIR, dir_fd=fd)
                    os.fchmod(below, FOLDER_MODE)
                except OSError as err:
                    if err.errno in (errno.ELOOP, errno.ENOTDIR):
                        kind = os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode
                        what = "a link" if stat.S_ISLNK(kind) else "not a folder"
                        raise OSError(err.errno, f"{'/'.join(path)}: {name!r} is {what}") from err
                    raise
                os.close(fd)
                fd = below
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _forget(self) -> None:
        if self._cached is not None:
            os.close(self._cached[1])
            self._cached = None
