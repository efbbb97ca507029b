"""Durations as people write them: ``90s``, ``30m``, ``2h``, ``7d``, ``1h30m``, or a number of seconds.

Used by health checks' ``every`` and by reservations (``--for 2h``, ``--wait 30m``); each caller checks its
own range.
"""

from __future__ import annotations

import re
from typing import Final

UNITS: Final = {"d": 86_400, "h": 3600, "m": 60, "s": 1}
MAX_TEXT: Final = 32  # a duration is short; longer text is refused before any pattern looks at it
_PART: Final = re.compile(r"([0-9]{1,9})([smhd]?)")
# Each unit closes a part, and only the last part may have none: a text can be split one way only, so the
# match is linear (a bare run of digits would otherwise split in exponentially many ways before failing).
_WHOLE: Final = re.compile(r"(?:[0-9]{1,9}[smhd])*[0-9]{0,9}")


class DurationError(ValueError):
    """Not a duration; the message says what one looks like."""


def parse_duration(value: object) -> int:
    """``value`` in seconds: a whole number of seconds, or parts with units from the largest down
    (``1h30m``); :class:`DurationError` for anything else (a fraction, a sign, an unknown unit)."""
    text = str(value).strip() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
    if text is None or not text or len(text) > MAX_TEXT or _WHOLE.fullmatch(text) is None:
        raise DurationError(
            f"{value!r} is not a duration: a number of seconds, or one with a unit s, m, h or d "
            "(90s, 30m, 2h, 1h30m, 7d)"
        )
    parts = _PART.findall(text)
    units = [unit or "s" for _, unit in parts]
    order = list(UNITS)
    if len(set(units)) != len(units) or [order.index(u) for u in units] != sorted(
        order.index(u) for u in units
    ):
        raise DurationError(f"{value!r} is not a duration: give each unit once, the largest first (1h30m)")
    return sum(int(number) * UNITS[unit or "s"] for number, unit in parts)


def duration_text(seconds: int) -> str:
    """The shortest exact way to write ``seconds`` with one unit: ``24h``, ``30m``, ``90s``."""
    for unit in ("d", "h", "m"):
        if seconds % UNITS[unit] == 0 and seconds:
            return f"{seconds // UNITS[unit]}{unit}"
    return f"{seconds}s"
