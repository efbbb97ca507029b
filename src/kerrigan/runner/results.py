"""The files a job wrote that its manifest names (``results``, ``artifacts.upload``): found in its workspace
by their globs once the command ended.

Only regular files inside the workspace count: a symlink is passed over and never followed, nor a link to a
folder (a job may leave anything behind). Files come in a stable order (by path), each once, at most
:data:`MAX_FILES` results files or :data:`MAX_UPLOADS` uploads; a results file is read up to the server's
:data:`MAX_FILE_BYTES` with its whole size.
"""

from __future__ import annotations

import fnmatch
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from kerrigan.core.job_files import RESULTS_MAX_BYTES, RESULTS_MAX_FILES, UPLOAD_MAX_BYTES, UPLOAD_MAX_FILES
from kerrigan.core.masking import Masker
from kerrigan.core.results import UPLOAD_LIMITS, Locator, parse_junit

log = logging.getLogger(__name__)

MAX_FILES: Final = RESULTS_MAX_FILES
MAX_UPLOADS: Final = UPLOAD_MAX_FILES
MAX_UPLOAD_BYTES: Final = UPLOAD_MAX_BYTES
MAX_WALKED: Final = 500_000  # files and folders looked at in one workspace
MAX_FILE_BYTES: Final = RESULTS_MAX_BYTES


def results_files(workspace: Path, globs: Sequence[str], limit: int = MAX_FILES) -> list[tuple[str, Path]]:
    """``(path relative to the workspace, file)`` of every regular file the globs match, the first
    ``limit`` by path. The workspace is walked without following links (a link to ``/`` must not make the
    agent walk the host), at most :data:`MAX_WALKED` entries."""
    patterns = [tuple(part for part in glob.split("/") if part not in ("", ".")) for glob in globs]
    found: list[tuple[str, Path]] = []
    walked = 0
    for folder, folders, files in os.walk(workspace, followlinks=False):
        folders.sort()
        walked += len(folders) + len(files)
        if walked > MAX_WALKED:
            log.warning("%s: more than %d entries; the rest are not looked at", workspace, MAX_WALKED)
            break
        here = Path(folder)
        relative = here.relative_to(workspace).parts
        for name in files:
            path = here / name
            if path.is_symlink() or not path.is_file():
                continue
            parts = (*relative, name)
            if any(_matches(pattern, parts) for pattern in patterns):
                found.append(("/".join(parts), path))
    return sorted(found)[:limit]


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


def read_head(file: Path, limit: int = MAX_FILE_BYTES) -> tuple[bytes, int]:
    """The file's first ``limit`` bytes and its whole size."""
    with file.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        return handle.read(limit), size


def shows_secret(data: bytes, path: str, masker: Masker, workspace: str) -> bool:
    """Whether a results file's text, parsed as the server parses it, would show one of ``masker``'s
    secrets that its bytes do not: a value spelled with character references, or split by a CDATA section
    or a comment. (The server hides the repository's secrets itself; the devices file's it never sees.)"""
    locator = Locator(workspace)
    plain = parse_junit(data, path, limits=UPLOAD_LIMITS, locator=locator)
    return plain != parse_junit(data, path, limits=UPLOAD_LIMITS, locator=locator, masker=masker)
