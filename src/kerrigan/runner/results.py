"""The files a job wrote that its manifest names (``results``, ``artifacts.upload``): found in its workspace
by their globs once the command ended, and opened as the job's own files only.

The agent is root and the workspace is the job's: whatever the agent reads there, it reads on the job's
behalf, so it reads nothing the job could not. The workspace is walked through open folders, never by path
strings (``O_NOFOLLOW``: a folder the job swaps for a link between the walk and the open is not entered),
and a file is opened the same way, with ``O_PATH`` first so that nothing is opened that is not a regular file
(no FIFO to wait on, no device to wake). What is checked is the descriptor that is then read: a regular file
whose owner is the job's user. A hard link the job made to a file it may not read (the kernel allows one
where ``fs.protected_hardlinks`` is 0) keeps its owner, root or another job's user, and is refused; a file
the job owns is one it could read itself, however many names it has. Files come in a stable order (by
path), each once, at most :data:`MAX_FILES` results files or :data:`MAX_UPLOADS` uploads; a results file is
read up to the server's :data:`MAX_FILE_BYTES` with its whole size.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import logging
import os
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Final

from kerrigan.core.job_files import RESULTS_MAX_BYTES, RESULTS_MAX_FILES, UPLOAD_MAX_BYTES, UPLOAD_MAX_FILES
from kerrigan.core.masking import Masker
from kerrigan.core.results import UPLOAD_LIMITS, Locator, parse_junit

log = logging.getLogger(__name__)

MAX_FILES: Final = RESULTS_MAX_FILES
MAX_UPLOADS: Final = UPLOAD_MAX_FILES
MAX_UPLOAD_BYTES: Final = UPLOAD_MAX_BYTES
MAX_WALKED: Final = 500_000  # files and folders looked at in one workspace
MAX_DEPTH: Final = 256  # folders below the workspace walked into (each holds a descriptor open while walked)
MAX_FILE_BYTES: Final = RESULTS_MAX_BYTES
_FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH: Final = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


class JobFileRefusedError(OSError):
    """A file the agent will not read for the job: not a regular file, reached through a link, or not the
    job's own; the message names it and why."""


def results_files(workspace: Path, globs: Sequence[str], limit: int = MAX_FILES) -> list[str]:
    """The paths (relative to the workspace, ``/`` between folders) of every regular file the globs match,
    the first ``limit`` by path. Links are never followed (a link to ``/`` must not make the agent walk the
    host), at most :data:`MAX_WALKED` entries and :data:`MAX_DEPTH` folders deep; only the folders on the
    way down are held open."""
    patterns = [tuple(part for part in glob.split("/") if part not in ("", ".")) for glob in globs]
    found: list[str] = []
    walked = 0
    try:
        top = os.open(workspace, _FOLDER)
    except OSError as err:
        log.warning("%s: not walked: %s", workspace, err)
        return []
    # Each open folder with the subfolders of it still to walk.
    stack: list[tuple[int, tuple[str, ...], Iterator[str]]] = []

    def enter(fd: int, relative: tuple[str, ...]) -> None:
        nonlocal walked
        folders: list[str] = []
        try:
            with os.scandir(fd) as listed:
                entries = sorted(listed, key=lambda entry: entry.name)
        except OSError as err:
            log.warning("%s: %s not listed: %s", workspace, "/".join(relative) or ".", err)
            entries = []
        walked += len(entries)
        for entry in entries:
            parts = (*relative, entry.name)
            if not _nameable(entry.name):  # no URL of the runner protocol can carry it: not sent, not entered
                log.warning("%s: %r is not named in UTF-8; passed over", workspace, os.fsencode(entry.name))
                continue
            if entry.is_file(follow_symlinks=False):
                if any(_matches(pattern, parts) for pattern in patterns):
                    found.append("/".join(parts))
            elif entry.is_dir(follow_symlinks=False) and len(parts) <= MAX_DEPTH:
                folders.append(entry.name)
        stack.append((fd, relative, iter(folders)))

    try:
        enter(top, ())
        while stack and walked <= MAX_WALKED:
            fd, relative, folders = stack[-1]
            name = next(folders, None)
            if name is None:
                os.close(stack.pop()[0])
                continue
            try:
                below = os.open(name, _FOLDER, dir_fd=fd)
            except OSError:  # gone, or a link now: not entered
                continue
            enter(below, (*relative, name))
        if walked > MAX_WALKED:
            log.warning("%s: more than %d entries; the rest are not looked at", workspace, MAX_WALKED)
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    return sorted(found)[:limit]


def _nameable(name: str) -> bool:
    """Whether a file name is text (UTF-8 on disk): one that is not comes as lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _matches(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """Whether a path's ``parts`` match a glob's: ``*``, ``?`` and ``[...]`` within a part, ``**`` any
    number of folders (a trailing ``**`` every file below)."""
    if not pattern:
        return not parts
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        if not rest:
            return bool(parts)
        return any(_matches(rest, parts[skip:]) for skip in range(len(parts)))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], head) and _matches(rest, parts[1:])


@dataclass(frozen=True, slots=True)
class JobFile:
    """A job's file, open for reading: checked on this descriptor, so what is read is what was checked."""

    path: str
    fd: int
    size: int

    def head(self, limit: int = MAX_FILE_BYTES) -> bytes:
        """The file's first ``limit`` bytes."""
        chunks: list[bytes] = []
        offset = 0
        while offset < limit and (chunk := os.pread(self.fd, min(limit - offset, 1 << 20), offset)):
            chunks.append(chunk)
            offset += len(chunk)
        return b"".join(chunks)

    def reader(self) -> BinaryIO:
        """The file from its start, as a file object of its own (one for each try of an upload): the same
        file opened again through this descriptor, never through its path."""
        return os.fdopen(os.open(f"/proc/self/fd/{self.fd}", os.O_RDONLY | os.O_CLOEXEC), "rb")


@contextlib.contextmanager
def open_job_file(workspace: Path, path: str, owner: int | None) -> Iterator[JobFile]:
    """Open ``path`` (as :func:`results_files` gives it) in the workspace as the job's own regular file:
    every folder on the way opened without following a link, the file itself checked on its descriptor,
    and, when the job ran as user ``owner``, owned by that user. Raises :class:`JobFileRefusedError`, or
    the ``OSError`` of a file that is gone."""
    parts = path.split("/")
    if not path or any(part in ("", ".", "..") for part in parts):
        raise JobFileRefusedError(f"{path!r} is not a path in the workspace")
    opened: list[int] = []
    try:
        opened.append(_open_step(str(workspace), _FOLDER, None, path))
        for part in parts[:-1]:
            opened.append(_open_step(part, _FOLDER, opened[-1], path))
        located = _open_step(parts[-1], _PATH, opened[-1], path)
        opened.append(located)
        info = os.fstat(located)
        if stat.S_ISLNK(info.st_mode):
            raise JobFileRefusedError(f"{path} is a symbolic link")
        if not stat.S_ISREG(info.st_mode):
            raise JobFileRefusedError(f"{path} is not a regular file")
        if owner is not None and info.st_uid != owner:
            raise JobFileRefusedError(f"{path} belongs to uid {info.st_uid}, not the job's {owner}")
        # Opened for reading through the checked descriptor: the same file, whatever its name is now.
        fd = os.open(f"/proc/self/fd/{located}", os.O_RDONLY | os.O_NOCTTY | os.O_CLOEXEC)
        opened.append(fd)
        reopened = os.fstat(fd)
        if (reopened.st_dev, reopened.st_ino) != (info.st_dev, info.st_ino):  # pragma: no cover -- paranoia
            raise JobFileRefusedError(f"{path} changed while it was opened")
        yield JobFile(path, fd, reopened.st_size)
    finally:
        for fd in reversed(opened):
            os.close(fd)


def read_head(
    workspace: Path, path: str, owner: int | None, limit: int = MAX_FILE_BYTES
) -> tuple[bytes, int]:
    """The job's file's first ``limit`` bytes and its whole size (:func:`open_job_file`'s checks)."""
    with open_job_file(workspace, path, owner) as opened:
        return opened.head(limit), opened.size


def _open_step(name: str, flags: int, folder: int | None, path: str) -> int:
    """One step of the way to ``path``: a link there is refused, not followed."""
    try:
        return os.open(name, flags, dir_fd=folder)
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        try:  # refused already; which it was, for the message only
            link = stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        what = "a symbolic link" if link else "not a folder"
        raise JobFileRefusedError(f"{path}: {name} is {what}") from None


def shows_secret(data: bytes, path: str, masker: Masker, workspace: str) -> bool:
    """Whether a results file's text, parsed as the server parses it, would show one of ``masker``'s
    secrets that its bytes do not: a value spelled with character references, or split by a CDATA section
    or a comment. (The server hides the repository's secrets itself; the devices file's it never sees.)"""
    locator = Locator(workspace)
    plain = parse_junit(data, path, limits=UPLOAD_LIMITS, locator=locator)
    return plain != parse_junit(data, path, limits=UPLOAD_LIMITS, locator=locator, masker=masker)
