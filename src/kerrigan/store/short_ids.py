"""Ids as Kerrigan prints them short (``eba46059``, a session's or a reservation's first 8 characters) taken
back: a unique prefix names the one id it begins."""

from __future__ import annotations

import re
from typing import Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

FULL_LENGTH: Final = 36  # a UUID as text
MIN_PREFIX: Final = 4
SHOWN_MATCHES: Final = 10
_PREFIX: Final = re.compile(r"[0-9a-f][0-9a-f-]*")  # a UUID's own characters: no LIKE wildcard among them


class AmbiguousIdError(Exception):
    """A prefix that begins more than one id; ``matches`` holds the first few."""

    def __init__(self, prefix: str, matches: list[str]) -> None:
        shown = ", ".join(matches[:SHOWN_MATCHES]) + (" and more" if len(matches) > SHOWN_MATCHES else "")
        super().__init__(f"{prefix!r} begins more than one id: {shown}; give more of it")
        self.prefix, self.matches = prefix, matches[:SHOWN_MATCHES]


async def full_id(session: AsyncSession, column: InstrumentedAttribute[str], text: str) -> str | None:
    """The id ``text`` names: itself when it is whole, else the one id it begins (at least
    :data:`MIN_PREFIX` characters, any case); None when there is none, :class:`AmbiguousIdError` when there
    are several."""
    if len(text) == FULL_LENGTH:
        return text
    prefix = text.lower()
    if not MIN_PREFIX <= len(prefix) < FULL_LENGTH or _PREFIX.fullmatch(prefix) is None:
        return None
    found = list(
        await session.scalars(
            select(column).where(column.startswith(prefix)).order_by(column).limit(SHOWN_MATCHES + 1)
        )
    )
    if len(found) > 1:
        raise AmbiguousIdError(text, found)
    return found[0] if found else None
