"""The files a job wrote that its manifest names (``results``, ``artifacts.upload``): found in its workspace
by their globs once the command ended.

Only regular files inside the workspace count: a symlink, or a path that resolves outside the workspace,
is passed over (a job may leave anything behind). Files come in a stable order (by path), each once, at
most :data:`MAX_FILES`; each is read up to the server's :data:`MAX_FILE_BYTES` with its whole size.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

MAX_FILES: Final = 20  # results files, as the server keeps (kerrigan.dispatch.results)
MAX_UPLOADS: Final = 100  # uploaded files, as the server keeps (kerrigan.dispatch.artifacts)
MAX_UPLOAD_BYTES: Final = 100 << 20
MAX_FILE_BYTES: Final = 16 << 20


def results_files(workspace: Path, globs: Sequence[str], limit: int = MAX_FILES) -> list[tuple[str, Path]]:
    """``(path relative to the workspace, file)`` of every regular file the globs match, the first
    ``limit`` by path."""
    top = workspace.resolve()
    found: dict[str, Path] = {}
    for glob in globs:
        # ``logs/**`` means every file below logs, as GitHub's upload-artifact reads it (``Path.glob``
        # alone would match the folders only).
        pattern = f"{glob}/*" if glob == "**" or glob.endswith("/**") else glob
        try:
            matches = sorted(workspace.glob(pattern))
        except (ValueError, OSError):  # a pattern Path.glob refuses, or a folder that went away
            continue
        for match in matches:
            if match.is_symlink() or not match.is_file():
                continue
            resolved = match.resolve()
            if not resolved.is_relative_to(top):
                continue
            found.setdefault(resolved.relative_to(top).as_posix(), resolved)
    return sorted(found.items())[:limit]


def read_head(file: Path, limit: int = MAX_FILE_BYTES) -> tuple[bytes, int]:
    """The file's first ``limit`` bytes and its whole size."""
    with file.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        return handle.read(limit), size
