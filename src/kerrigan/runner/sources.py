"""A job's source: the repository at the job's commit, fetched as a tarball through the GitHub API.

Tarballs are cached per repository and commit under ``<work dir>/sources``, so a second job on the same
commit downloads nothing; jobs that need the same one at once share a single download. GitHub's passing
failures (no answer, 5xx, rate limits) are waited out within a budget; a final answer (404, 401) fails at
once. A cached tarball not used for 24 hours is deleted.

Unpacking is Kerrigan's own, whatever the Python version: the standard library's ``data`` filter is not
used, since CVE-2025-4517 gets past it on Pythons without the fixes of June 2025 (3.11.13, 3.12.11, 3.13.4).
Every member is checked by :mod:`kerrigan.core.unpacking` before it is written; the tarball is read as a
stream and its contents counted against the limits as they are written, not from headers alone. Files are
created relative to an open folder, one path part at a time, never following a link and never over an
existing file; symbolic links are made last, once every one of them is known to stay inside the workspace. A
refused tarball leaves the workspace empty and is dropped from the cache; the job fails with the refusal as
its error.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import io
import logging
import os
import shutil
import tarfile
import time
import zlib
from pathlib import Path
from typing import IO, Any, Final

import aiohttp

from kerrigan.core.github_retry import retry_after
from kerrigan.core.unpacking import (
    Kind,
    Member,
    Placement,
    TarballCheck,
    TarballRefusedError,
    UnpackLimits,
)
from kerrigan.runner.folders import OpenFolders, check_name
from kerrigan.runner.github_requests import (
    GitHubRequestError,
    RetryBudget,
    describe,
    failure,
    github_request,
    with_retries,
)

log = logging.getLogger(__name__)

SOURCE_RETENTION_S: Final = 24 * 60 * 60
DEFAULT_RETRY: Final = RetryBudget(300.0)
DEFAULT_LIMITS: Final = UnpackLimits()  # 4 GiB and 200,000 members: see kerrigan.core.unpacking
# A stalled connection counts as a lost answer (and is tried again); a whole download may take long.
DOWNLOAD_TIMEOUT: Final = aiohttp.ClientTimeout(total=600, sock_connect=30, sock_read=60)
_CHUNK: Final = 1 << 16
_COPY_CHUNK: Final = 1 << 20
# The latest time a file's mtime is taken from its header; past it (or before 1970) the file keeps the time
# it was written, so a hostile header cannot make os.utime overflow.
_LATEST_MTIME: Final = 1 << 33
_NEW_FILE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class SourceError(Exception):
    """The repository could not be fetched or unpacked; the message says what GitHub or tar said.
    ``transient``: another try, on another host, may well succeed (GitHub kept failing past the retries,
    no answer came, this host's disk could not hold it); not a refusal GitHub will repeat (a 404, a
    token it will not take) nor a tarball refused for what it holds."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


class SourceCache:
    """Repository tarballs by repository and commit.

    A download GitHub fails for a while (no answer, a server error, a rate limit) is sent again within
    ``retry``'s budget, as :mod:`kerrigan.runner.github_requests` says; jobs that want the same tarball
    meanwhile wait for that one download and share its outcome.
    """

    def __init__(
        self, work_dir: Path, http: aiohttp.ClientSession, retry: RetryBudget = DEFAULT_RETRY
    ) -> None:
        self.root = work_dir / "sources"
        self.http = http
        self.retry = retry
        self._downloading: dict[Path, asyncio.Task[Path]] = {}
        self.downloads = 0  # how many tarballs were fetched (not served from the cache)

    def path(self, repository: str, sha: str) -> Path:
        """Where the tarball of ``repository`` at ``sha`` is cached."""
        owner, _, name = repository.partition("/")
        for part in (owner, name, sha):
            if not part or part in (".", "..") or "/" in part or "\0" in part:
                raise SourceError(f"not a repository and commit: {repository!r} at {sha!r}")
        return self.root / owner / name / f"{sha}.tar.gz"

    async def fetch(self, repository: str, sha: str, api_url: str, token: str) -> Path:
        """The cached tarball, downloading it first if it is not there yet (or joining the download of
        it under way)."""
        target = self.path(repository, sha)
        download = self._downloading.get(target)
        if download is None:
            if target.exists():
                os.utime(target)  # used now: kept another 24 hours
                return target
            download = asyncio.create_task(self._download(repository, sha, api_url, token, target))
            self._downloading[target] = download
            download.add_done_callback(lambda done: self._finished(target, done))
        # A job stopped while it waits must not cancel the download the others wait for.
        return await asyncio.shield(download)

    def _finished(self, target: Path, download: asyncio.Task[Path]) -> None:
        if self._downloading.get(target) is download:
            del self._downloading[target]
        if not download.cancelled():
            download.exception()  # retrieved here too: every waiter may have gone

    async def _download(self, repository: str, sha: str, api_url: str, token: str, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        staged = target.with_name(f".{target.name}.{os.getpid()}.part")
        url = f"{api_url.rstrip('/')}/repos/{repository}/tarball/{sha}"
        try:
            # Each try starts at the API: the redirect it answers with is short-lived and single-use.
            await with_retries(lambda: self._download_once(url, token, staged), self.retry, f"GET {url}")
            staged.replace(target)
        except GitHubRequestError as err:
            passing = retry_after(err.status, err.headers, err.message, 1, time.time()) is not None
            raise SourceError(f"GET {url}: {err}", transient=passing) from err
        except aiohttp.ClientError as err:  # not an answer GitHub may change (a redirect loop, a bad URL)
            raise SourceError(f"GET {url}: {describe(err)}") from err
        except OSError as err:  # the work dir's disk, not GitHub: another host's may hold it
            raise SourceError(
                f"cannot store the tarball of {repository} at {sha}: {err}", transient=True
            ) from err
        finally:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()
        self.downloads += 1
        return target

    async def _download_once(self, url: str, token: str, staged: Path) -> None:
        async with github_request(self.http, "GET", url, token, DOWNLOAD_TIMEOUT) as response:
            if response.status != 200:
                raise await failure(response)
            with staged.open("wb") as out:
                async for chunk in response.content.iter_chunked(_CHUNK):
                    out.write(chunk)

    def expire(self, now_s: float | None = None) -> int:
        """Delete tarballs unused for 24 hours; how many went."""
        now_s = time.time() if now_s is None else now_s
        removed = 0
        for tarball in self.root.glob("*/*/*.tar.gz"):
            with contextlib.suppress(FileNotFoundError):
                if now_s - tarball.stat().st_mtime >= SOURCE_RETENTION_S:
                    tarball.unlink()
                    removed += 1
        return removed


def empty_folder(folder: Path) -> None:
    """Delete what ``folder`` holds (links themselves, never their targets), keeping the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for entry in list(folder.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def unpack(tarball: Path, into: Path, limits: UnpackLimits = DEFAULT_LIMITS) -> None:
    """Empty ``into`` and unpack the tarball there, without its single top-level folder, checking every
    member first; a refused or corrupt tarball leaves ``into`` empty and is dropped from the cache."""
    empty_folder(into)
    check = TarballCheck(limits)
    try:
        # A stream ("r|"), not random access: headers and contents are read once, in order, and counted
        # as they come, so a bomb is stopped where it passes a limit rather than read whole first.
        with (
            _Uncompressed(tarball, check) as stream,
            tarfile.open(fileobj=stream, mode="r|") as archive,
            _Workspace(into) as workspace,
        ):
            for info in archive:
                placement = check.admit(_member(info))
                if placement is None:
                    continue
                if placement.kind is Kind.FILE:
                    contents = archive.extractfile(info)
                    assert contents is not None  # a regular file always has contents, if empty
                    workspace.file(placement, contents, check, info.mtime)
                elif placement.kind is Kind.FOLDER:
                    workspace.folder(placement.path)
                elif placement.kind is Kind.HARD_LINK:
                    workspace.hard_link(placement)
            for link in check.links():
                workspace.symlink(link)
    except TarballRefusedError as err:
        _discard(tarball, into)
        raise SourceError(str(err)) from None
    except (tarfile.TarError, OSError, EOFError, ValueError, OverflowError, zlib.error) as err:
        # A truncated or corrupt download: drop it from the cache so the next job fetches it again.
        _discard(tarball, into)
        raise SourceError(f"cannot unpack {tarball.name}: {err or type(err).__name__}") from err


def _discard(tarball: Path, into: Path) -> None:
    """Nothing half-written is left for the job, and the tarball is fetched again next time."""
    with contextlib.suppress(OSError):
        tarball.unlink()
    with contextlib.suppress(OSError):
        empty_folder(into)


class _Uncompressed(io.RawIOBase):
    """The tarball's tar stream (gunzipped when it is gzipped, as GitHub's are), counted as it is read."""

    def __init__(self, tarball: Path, check: TarballCheck) -> None:
        self._raw = tarball.open("rb")
        self._check = check
        self._source: io.BufferedIOBase = self._raw
        if self._raw.read(2) == b"\x1f\x8b":
            self._source = gzip.GzipFile(fileobj=self._raw, mode="rb")
        self._raw.seek(0)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._source.read(len(buffer))
        self._check.count_stream(len(data))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if self._source is not self._raw:
            self._source.close()
        self._raw.close()
        super().close()


def _member(info: tarfile.TarInfo) -> Member:
    """A member's header as the core's rules read it."""
    if info.issparse():  # before isreg(), which a sparse file also is: its header size is not its size
        kind = Kind.SPARSE_FILE
    elif info.isreg():
        kind = Kind.FILE
    elif info.isdir():
        kind = Kind.FOLDER
    elif info.issym():
        kind = Kind.SYMLINK
    elif info.islnk():
        kind = Kind.HARD_LINK
    elif info.ischr():
        kind = Kind.CHARACTER_DEVICE
    elif info.isblk():
        kind = Kind.BLOCK_DEVICE
    elif info.isfifo():
        kind = Kind.FIFO
    else:
        kind = Kind.OTHER
    return Member(info.name, kind, size=info.size, mode=info.mode, linkname=info.linkname)


class _Workspace(OpenFolders):
    """The workspace being filled, reached through open folders one path part at a time
    (:class:`~kerrigan.runner.folders.OpenFolders`: no link, wherever it came from, is followed on the
    way); new files are created with ``O_EXCL``, so none is written over."""

    def file(self, placement: Placement, contents: IO[bytes], check: TarballCheck, mtime: float) -> None:
        """A new file with ``contents``, each chunk counted before it is written."""
        parent = self.parent(placement.path, create=True)
        fd = os.open(placement.path[-1], _NEW_FILE, 0o600, dir_fd=parent)
        try:
            while chunk := contents.read(_COPY_CHUNK):
                check.count_bytes(len(chunk))
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            os.fchmod(fd, placement.mode)  # the mode without the umask's say, as git has it
            if 0 <= mtime < _LATEST_MTIME:
                os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)

    def hard_link(self, placement: Placement) -> None:
        """A hard link to a file unpacked earlier."""
        check_name(placement.linked[-1] if placement.linked else "", placement.linked)
        source = self.open(placement.linked[:-1], create=False)
        try:
            parent = self.parent(placement.path, create=True)
            os.link(
                placement.linked[-1],
                placement.path[-1],
                src_dir_fd=source,
                dst_dir_fd=parent,
                follow_symlinks=False,
            )
        finally:
            os.close(source)

    def symlink(self, placement: Placement) -> None:
        """A symbolic link, made once every link is known to stay inside."""
        os.symlink(placement.target, placement.path[-1], dir_fd=self.parent(placement.path, create=True))
