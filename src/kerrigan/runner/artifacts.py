"""Artifacts a job takes from the GitHub Actions run that triggered its session (``artifacts.download``).

Each is found by name in the run (``GET /repos/{repo}/actions/runs/{run}/artifacts?name=``, the newest one
not expired), downloaded with the job's token (its ``actions: read``) through GitHub's redirect to a file
under the agent's work dir, streamed and never held whole, and unpacked into its workspace folder with
:mod:`kerrigan.core.artifact_archive`'s checks (no link, no name out of the folder, the tarball's limits
on bytes and members, counted as they are inflated). GitHub's transient failures are retried as a source
fetch's are; what fails is a :class:`~kerrigan.runner.sources.SourceError` naming the artifact.

The folder each is unpacked into comes from the offer, which the agent does not trust either (a manifest
stored before the parser refused ``..`` there, a server that is wrong): every folder the offer names is
checked as the parser checks it (:func:`kerrigan.core.manifest.paths.folder_problem`) before anything is
fetched, and the workspace is then written through open folders
(:class:`~kerrigan.runner.folders.OpenFolders`), so no ``..`` and no link is ever followed. A file already
in the workspace under a member's name is replaced, never written through (it may be a hard link).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import lzma
import os
import stat
import zipfile
import zlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar
from urllib.parse import quote

import aiohttp

from kerrigan.core.artifact_archive import ArchiveRefusedError, ZipCheck, ZipEntry
from kerrigan.core.github_retry import retry_after
from kerrigan.core.manifest.paths import folder_parts, folder_problem
from kerrigan.core.unpacking import UnpackLimits, amount
from kerrigan.runner.folders import OpenFolders
from kerrigan.runner.github_requests import (
    GitHubRequestError,
    RetryBudget,
    describe,
    failure,
    github_request,
    with_retries,
)
from kerrigan.runner.sources import DOWNLOAD_TIMEOUT, SourceError

_CHUNK: Final = 1 << 16
_NEW_FILE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
LIST_TIMEOUT: Final = aiohttp.ClientTimeout(total=60)
DOWNLOAD_SLACK: Final = 64 << 20  # a zip's own headers and directory, beyond the bytes it unpacks to
T = TypeVar("T")


def downloads_of(offer: Mapping[str, Any]) -> list[tuple[str, object]]:
    """The offer's ``artifacts.download`` as ``(name, folder)`` pairs, the folder as the offer has it (see
    :func:`checked_folders`)."""
    artifacts = offer.get("artifacts")
    listed = artifacts.get("download") if isinstance(artifacts, dict) else None
    return [
        (str(item["name"]), item.get("path") or ".")
        for item in listed or ()
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    ]


def checked_folders(wanted: Sequence[tuple[str, object]]) -> list[tuple[str, str]]:
    """Each ``(name, folder)`` with its folder checked as the manifest's parser checks it: text, relative,
    no ``..`` part, no NUL or backslash, no glob. The first that is not raises :class:`SourceError` naming
    the artifact and the path."""
    checked = []
    for name, folder in wanted:
        if not isinstance(folder, str):
            raise SourceError(f"artifact {name!r}: path {folder!r} is not a folder of the workspace")
        problem = folder_problem(folder)
        if problem is not None:
            raise SourceError(f"artifact {name!r}: path {problem}")
        checked.append((name, folder))
    return checked


async def download_artifacts(
    http: aiohttp.ClientSession,
    offer: Mapping[str, Any],
    *,
    api_url: str,
    token: str,
    workspace: Path,
    scratch: Path,
    limits: UnpackLimits,
    retry: RetryBudget,
) -> None:
    """Put every artifact the offer names into the workspace, or raise :class:`SourceError`."""
    wanted = checked_folders(downloads_of(offer))  # all of them, before a byte is fetched
    if not wanted:
        return
    run_id = offer.get("workflow_run_id")
    if not isinstance(run_id, int):
        raise SourceError(
            "artifacts.download takes artifacts from the GitHub Actions run that triggered the session; "
            "this session was not triggered by a workflow_run event"
        )
    # A zip is at most what it unpacks to, and a little: more than that is refused as it streams.
    github = _Artifacts(http, api_url.rstrip("/"), token, retry, limits.max_bytes + DOWNLOAD_SLACK)
    repository = str(offer.get("repository", ""))
    # Root's alone: a job must not read another repository's artifact while it downloads.
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    scratch.chmod(0o700)
    for name, folder in wanted:
        url = await github.download_url(repository, run_id, name)
        staged = scratch / f"{offer.get('id', 'job')}-{os.getpid()}.zip"
        try:
            await github.fetch(url, staged, name)
            await asyncio.to_thread(unpack_artifact, staged, workspace, folder, ZipCheck(name, limits))
        finally:
            with contextlib.suppress(FileNotFoundError):
                staged.unlink()


@dataclass(frozen=True, slots=True)
class _Artifacts:
    """The artifacts API as one job's token sees it."""

    http: aiohttp.ClientSession
    api_url: str
    token: str
    retry: RetryBudget
    max_bytes: int

    async def download_url(self, repository: str, run_id: int, name: str) -> str:
        """The newest unexpired artifact ``name`` of the run: its download URL."""
        query = f"name={quote(name)}&per_page=100"
        url = f"{self.api_url}/repos/{repository}/actions/runs/{run_id}/artifacts?{query}"

        async def listed() -> list[dict[str, Any]]:
            async with github_request(self.http, "GET", url, self.token, LIST_TIMEOUT) as response:
                if response.status != 200:
                    raise await failure(response)
                body = await response.json(content_type=None)
            found = body.get("artifacts") if isinstance(body, dict) else None
            return [item for item in found or () if isinstance(item, dict)]

        artifacts = await self._sent(listed, url, f"artifact {name!r} of workflow run {run_id}")
        named = [item for item in artifacts if item.get("name") == name]
        if not named:
            raise SourceError(f"workflow run {run_id} has no artifact {name!r}")
        live = [item for item in named if not item.get("expired")]
        if not live:
            raise SourceError(f"artifact {name!r} of workflow run {run_id} has expired")
        return str(max(live, key=lambda item: int(item.get("id") or 0))["archive_download_url"])

    async def fetch(self, url: str, staged: Path, name: str) -> None:
        """Stream the artifact's zip to ``staged``."""

        async def once() -> None:
            async with github_request(self.http, "GET", url, self.token, DOWNLOAD_TIMEOUT) as response:
                if response.status != 200:
                    raise await failure(response)
                written = 0
                with staged.open("wb") as out:
                    async for chunk in response.content.iter_chunked(_CHUNK):
                        written += len(chunk)
                        if written > self.max_bytes:
                            too_big = f"artifact {name!r} is over {amount(self.max_bytes)} to download"
                            raise SourceError(too_big)
                        out.write(chunk)

        try:
            await self._sent(once, url, f"artifact {name!r}")
        except OSError as err:  # this host's disk could not hold it: another host may
            raise SourceError(f"artifact {name!r} could not be stored: {err}", transient=True) from err

    async def _sent(self, send: Callable[[], Awaitable[T]], url: str, what: str) -> T:
        try:
            return await with_retries(send, self.retry, f"GET {url}")
        except GitHubRequestError as err:
            passing = retry_after(err.status, err.headers, err.message, 1, 0.0) is not None
            raise SourceError(f"{what}: {err}", transient=passing) from err
        except aiohttp.ClientError as err:
            raise SourceError(f"{what}: {describe(err)}") from err


def unpack_artifact(archive: Path, workspace: Path, folder: str, check: ZipCheck) -> None:
    """Unpack the zip into ``folder`` of the workspace, every member checked first, the folder checked as
    the manifest's parser checks it, and no link or ``..`` followed on the way to any of it."""
    [(_, folder)] = checked_folders([(check.artifact, folder)])
    base = folder_parts(folder)
    try:
        with zipfile.ZipFile(archive) as zipped, OpenFolders(workspace) as folders:
            folders.folder(base)
            for info in zipped.infolist():
                parts, is_folder, mode = check.admit(ZipEntry(info.filename, info.external_attr >> 16))
                if info.flag_bits & 0x1:
                    encrypted = f"artifact {check.artifact!r}: member {info.filename!r} is encrypted"
                    raise ArchiveRefusedError(encrypted)
                if is_folder:
                    folders.folder(base + parts)
                    continue
                parent = folders.parent(base + parts, create=True)
                with zipped.open(info) as source:
                    descriptor = _new_file(parent, parts[-1], mode, base + parts)
                    os.fchmod(descriptor, mode)  # the mode asked for, whatever the umask
                    with os.fdopen(descriptor, "wb") as out:
                        while chunk := source.read(_CHUNK):
                            check.count_bytes(len(chunk))
                            out.write(chunk)
    except ArchiveRefusedError as err:
        raise SourceError(str(err)) from err
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError) as err:
        raise SourceError(f"artifact {check.artifact!r} is not a zip that can be read: {err}") from err
    except (zlib.error, lzma.LZMAError, RuntimeError) as err:  # a corrupt stream, an encrypted member
        raise SourceError(f"artifact {check.artifact!r} is not a zip that can be read: {err}") from err
    except OSError as err:
        raise SourceError(f"artifact {check.artifact!r} could not be unpacked: {err}") from err


def _new_file(folder: int, name: str, mode: int, path: Sequence[str]) -> int:
    """A new file ``name`` in the open ``folder``, written to: a file already there (the repository's) is
    replaced, never written through (it may be a hard link to a file outside the workspace); a link or a
    folder there is refused."""
    try:
        return os.open(name, _NEW_FILE, mode, dir_fd=folder)
    except FileExistsError:
        kind = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        if not stat.S_ISREG(kind):
            what = "a link" if stat.S_ISLNK(kind) else "a folder" if stat.S_ISDIR(kind) else "not a file"
            raise OSError(errno.EEXIST, f"{'/'.join(path)}: {name!r} is {what} in the workspace") from None
        os.unlink(name, dir_fd=folder)
    return os.open(name, _NEW_FILE, mode, dir_fd=folder)  # one made meanwhile is refused, not written
