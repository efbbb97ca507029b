"""Times as clients write them: RFC 3339 (ISO 8601 with its offset), read into UTC.

What the REST API's document calls ``date-time`` is read here, so every time a client may send is taken:
``T`` and ``Z`` in either case (RFC 3339 allows both), fractions past the microsecond cut, and a time that
lies past the ends of the calendar once in UTC (``0001-01-01T00:00:00+01:00``) held at that end rather than
refused.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

MAX_TIME_TEXT: Final = 40
EXAMPLE: Final = "2026-12-01T18:00:00Z"
FIRST: Final = datetime.min.replace(tzinfo=UTC)
LAST: Final = datetime.max.replace(tzinfo=UTC)


class TimeError(ValueError):
    """A text that is not an RFC 3339 time with an offset; the message says which rule it breaks."""


def read_time(text: str) -> datetime:
    """``text`` as an aware time in UTC, or :class:`TimeError`."""
    if len(text) > MAX_TIME_TEXT:
        raise TimeError(f"must be an ISO 8601 time such as {EXAMPLE}")
    try:
        value = datetime.fromisoformat(text.strip().upper())
    except ValueError:
        raise TimeError(f"{text!r} is not an ISO 8601 time such as {EXAMPLE}") from None
    if value.tzinfo is None:
        raise TimeError(f"needs its offset (Z for UTC), like {EXAMPLE} or +02:00: {text!r}")
    try:
        return value.astimezone(UTC)
    except OverflowError:  # within a day of year 1 or year 9999, on the far side once in UTC
        return FIRST if value.year == 1 else LAST
