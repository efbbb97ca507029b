"""The results files a job wrote: found in its workspace by the manifest's globs once the command ended.

Only regular files inside the workspace count: a symlink, or a path that resolves outside the workspace,
is passed over (a job may leave anything behind). Files come in a stable order (by path), each once, at
most :data:`MAX_FILES`; each is read up to the server's :data:`MAX_FILE_BYTES` with its whole size.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

MAX_FILES: Final = 20  # as the server keeps (kerrigan.dispatch.results)
MAX_FILE_BYTES: Final = 16 << 20


def results_files(workspace: Path, globs: Sequence[str]) -> list[tuple[str, Path]]:
    """``(path relative to the workspace, file)`` of every regular file the globs match."""
    top = workspace.resolve()
    found: dict[str, Path] = {}
    for glob in globs:
        try:
            matches = sorted(workspace.glob(glob))
        except (ValueError, OSError):  # a pattern Path.glob refuses, or a folder that went away
            continue
        for match in matches:
            if match.is_symlink() or not match.is_file():
                continue
            resolved = match.resolve()
            if not resolved.is_relative_to(top):
                continue
            found.setdefault(resolved.relative_to(top).as_posix(), resolved)
    return sorted(found.items())[:MAX_FILES]


def read_head(file: Path, limit: int = MAX_FILE_BYTES) -> tuple[bytes, int]:
    """The file's first ``limit`` bytes and its whole size."""
    with file.open("rb") as handle:
        size = handle.seek(0, 2)
        handle.seek(0)
        return handle.read(limit), size
