"""A job's source: the repository at the job's commit, fetched as a tarball through the GitHub API.

Tarballs are cached per repository and commit under ``<work dir>/sources``, so a second job on the same
commit downloads nothing; jobs that need the same one at once share a single download. A cached tarball not
used for 24 hours is deleted. Extraction uses the tar ``data`` filter: no absolute paths, no ``..``, no
links out of the workspace, no device files, no set-id bits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tarfile
import time
import zlib
from pathlib import Path, PurePosixPath
from typing import Final

import aiohttp

log = logging.getLogger(__name__)

SOURCE_RETENTION_S: Final = 24 * 60 * 60
_CHUNK: Final = 1 << 16


class SourceError(Exception):
    """The repository could not be fetched or unpacked; the message says what GitHub or tar said."""


class SourceCache:
    """Repository tarballs by repository and commit."""

    def __init__(self, work_dir: Path, http: aiohttp.ClientSession) -> None:
        self.root = work_dir / "sources"
        self.http = http
        self._locks: dict[Path, asyncio.Lock] = {}
        self.downloads = 0  # how many tarballs were fetched (not served from the cache)

    def path(self, repository: str, sha: str) -> Path:
        """Where the tarball of ``repository`` at ``sha`` is cached."""
        owner, _, name = repository.partition("/")
        for part in (owner, name, sha):
            if not part or part in (".", "..") or "/" in part or "\0" in part:
                raise SourceError(f"not a repository and commit: {repository!r} at {sha!r}")
        return self.root / owner / name / f"{sha}.tar.gz"

    async def fetch(self, repository: str, sha: str, api_url: str, token: str) -> Path:
        """The cached tarball, downloading it first if it is not there yet."""
        target = self.path(repository, sha)
        lock = self._locks.setdefault(target, asyncio.Lock())
        async with lock:
            if target.exists():
                os.utime(target)  # used now: kept another 24 hours
                return target
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = target.with_name(f".{target.name}.{os.getpid()}.part")
            url = f"{api_url.rstrip('/')}/repos/{repository}/tarball/{sha}"
            headers = {"Authorization": f"token {token}", "Accept": "application/vnd.github+json"}
            try:
                async with self.http.get(
                    url, headers=headers, timeout=aiohttp.ClientTimeout(total=600)
                ) as response:
                    if response.status != 200:
                        text = (await response.text())[:200]
                        raise SourceError(f"GET {url}: {response.status} {text}")
                    with staged.open("wb") as out:
                        async for chunk in response.content.iter_chunked(_CHUNK):
                            out.write(chunk)
                staged.replace(target)
            except (aiohttp.ClientError, TimeoutError) as err:
                raise SourceError(f"GET {url}: {err or type(err).__name__}") from err
            except OSError as err:  # the work dir's disk, not GitHub
                raise SourceError(f"cannot store the tarball of {repository} at {sha}: {err}") from err
            finally:
                with contextlib.suppress(FileNotFoundError):
                    staged.unlink()
            self.downloads += 1
            return target

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


def unpack(tarball: Path, into: Path) -> None:
    """Empty ``into`` and unpack the tarball there, without its single top-level folder."""
    empty_folder(into)
    try:
        with tarfile.open(tarball, "r:*") as archive:
            members = []
            for member in archive.getmembers():
                parts = PurePosixPath(member.name).parts
                if len(parts) <= 1:
                    continue  # the top-level folder GitHub wraps the tree in (owner-repo-sha/)
                member.name = str(PurePosixPath(*parts[1:]))
                if member.islnk():  # a hard link names its target by its path in the archive
                    target = PurePosixPath(member.linkname).parts
                    member.linkname = str(PurePosixPath(*target[1:])) if len(target) > 1 else ""
                members.append(member)
            archive.extractall(into, members=members, filter="data")
    except (tarfile.TarError, OSError, EOFError, KeyError, ValueError, zlib.error) as err:
        # A truncated or corrupt download: drop it from the cache so the next job fetches it again.
        with contextlib.suppress(OSError):
            tarball.unlink()
        raise SourceError(f"cannot unpack {tarball.name}: {err or type(err).__name__}") from err
