"""A job's source: the repository at the job's commit, fetched as a tarball through the GitHub API.

Tarballs are cached per repository and commit under ``<work dir>/sources``, so a second job on the same
commit downloads nothing; jobs that need the same one at once share a single download. GitHub's passing
failures (no answer, 5xx, rate limits) are waited out within a budget; a final answer (404, 401) fails at
once. A cached tarball not
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
# A stalled connection counts as a lost answer (and is tried again); a whole download may take long.
DOWNLOAD_TIMEOUT: Final = aiohttp.ClientTimeout(total=600, sock_connect=30, sock_read=60)
_CHUNK: Final = 1 << 16


class SourceError(Exception):
    """The repository could not be fetched or unpacked; the message says what GitHub or tar said."""


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
            raise SourceError(f"GET {url}: {err}") from err
        except aiohttp.ClientError as err:  # not an answer GitHub may change (a redirect loop, a bad URL)
            raise SourceError(f"GET {url}: {describe(err)}") from err
        except OSError as err:  # the work dir's disk, not GitHub
            raise SourceError(f"cannot store the tarball of {repository} at {sha}: {err}") from err
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
