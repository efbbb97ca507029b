"""A job's raw log with each line's arrival time in front of it (the raw log's ``?timestamps=true``).

The runner sends output in chunks, and the server keeps when each chunk arrived; a chunk may end in the
middle of a line. A line is given the arrival time of the chunk it began in, written as
``2026-12-01T17:30:00.123Z`` and a space, as GitHub Actions' raw logs put theirs. A chunk stored before
arrival times were kept has none: its lines go unmarked.
"""

from __future__ import annotations

from datetime import UTC, datetime


def stamp(at: datetime) -> str:
    """The prefix of a line that began in a chunk arrived ``at``."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z "


class LineStamper:
    """Feed it the chunks in order; it gives back their text with each new line's time in front."""

    def __init__(self) -> None:
        self._at_line_start = True

    def feed(self, data: str, at: datetime | None) -> str:
        """``data``, arrived ``at`` (None: unknown), with a time before each line that begins in it."""
        if not data:
            return ""
        prefix = stamp(at) if at is not None else ""
        lines = data.split("\n")
        stamped = [(prefix if self._at_line_start else "") + lines[0]]
        # Each piece after a newline begins a line (an empty one too), but for the empty piece after a
        # final newline: its line has not begun yet.
        stamped += [prefix + line for line in lines[1:-1]]
        if len(lines) > 1:
            stamped.append(prefix + lines[-1] if lines[-1] else "")
        self._at_line_start = data.endswith("\n")
        return "\n".join(stamped)
