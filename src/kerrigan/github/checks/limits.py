"""GitHub's limits on a check run, and the measures that keep a body within them: a summary of at most
65,535 bytes, at most 50 annotations a request (the rest follow in updates), at most 3 actions."""

from __future__ import annotations

from typing import Any, Final

SUMMARY_LIMIT: Final = 65_535
ANNOTATIONS_PER_REQUEST: Final = 50
MAX_ACTIONS: Final = 3


def byte_size(text: str) -> int:
    """The size GitHub counts: UTF-8 bytes."""
    return len(text.encode())


def cut_lines(text: str, limit: int) -> str:
    """``text`` up to its last whole line within ``limit`` bytes."""
    kept: list[str] = []
    used = 0
    for line in text.splitlines(keepends=True):
        if used + byte_size(line) > limit:
            break
        kept.append(line)
        used += byte_size(line)
    return "".join(kept)


def batched(
    annotations: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], tuple[tuple[dict[str, Any], ...], ...]]:
    """The first 50 annotations, and the rest in batches of 50 for the updates after."""
    first = annotations[:ANNOTATIONS_PER_REQUEST]
    rest = annotations[ANNOTATIONS_PER_REQUEST:]
    more = tuple(
        tuple(rest[start : start + ANNOTATIONS_PER_REQUEST])
        for start in range(0, len(rest), ANNOTATIONS_PER_REQUEST)
    )
    return first, more
