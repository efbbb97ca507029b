"""What a repository's workflow folder may hold: how many manifests, and how large each may be.

The limits bound what one commit costs to read and parse, whoever pushed it (a fork's pull request too,
before anyone approved it); both lie far beyond what a lab writes.
"""

from __future__ import annotations

from typing import Final

from kerrigan.core.runner_fields import size_text

# The most tasks a manifest may have (256), each written out at length (about 1 KiB with its requirements,
# env, artifacts and matrix), fit with room to spare; real manifests are a few KiB.
MAX_MANIFEST_BYTES: Final = 256 * 1024
# Each manifest is a check run on every commit it runs for: a repository with more than a few dozen would
# bury its pull requests' checks (and a task's matrix runs one workflow on many boards).
MAX_MANIFESTS: Final = 32


def utf8_size(text: str) -> int:
    """The bytes ``text`` takes as UTF-8 (a lone surrogate, which no file holds, counted as three)."""
    return len(text.encode("utf-8", "surrogatepass"))


def too_large(size: int) -> str | None:
    """Why a manifest of ``size`` bytes is not read, or None when it is within the limit."""
    if size <= MAX_MANIFEST_BYTES:
        return None
    return (
        f"the file is {size_text(size)} ({size:,} bytes); a manifest is at most "
        f"{size_text(MAX_MANIFEST_BYTES)}, so it was not read"
    )


def too_many(count: int, folder: str) -> str | None:
    """Why a folder of ``count`` manifests is not read, or None when it is within the limit."""
    if count <= MAX_MANIFESTS:
        return None
    return (
        f"{folder} holds {count} manifests (.yml and .yaml files); Kerrigan reads at most {MAX_MANIFESTS} "
        "a commit, so it read none of them: merge workflows (a task's matrix runs one on many boards) or "
        "move some out"
    )
