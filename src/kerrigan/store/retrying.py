"""A unit of work in one transaction, run again when PostgreSQL aborted it to break a deadlock (SQLSTATE
``40P01``) or a serialisation conflict (``40001``).

Writers take row locks in one order (:mod:`kerrigan.store.row_locks`), so a deadlock should not happen; where
one still can (a lock the order does not cover), the transaction PostgreSQL chose as the victim was rolled
back whole, and the work is simply done again in a fresh one, at once, after a short random pause. The work
must be safe to run again: it reads what it needs inside the transaction and keeps nothing of a failed try.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.database import Database

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE: Final = frozenset({"40001", "40P01"})  # serialization_failure, deadlock_detected
ATTEMPTS: Final = 5
PAUSE_S: Final = 0.02  # the first pause at most; it doubles each try


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a database error (whichever driver raised it, under SQLAlchemy's wrapper), if any."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for name in ("sqlstate", "pgcode"):
            code = getattr(current, name, None)
            if isinstance(code, str) and code:
                return code
        current = getattr(current, "orig", None) or current.__cause__
    return None


def retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is a transaction PostgreSQL aborted that may succeed when done again."""
    return isinstance(exc, DBAPIError) and sqlstate(exc) in RETRYABLE


async def in_transaction(
    database: Database,
    work: Callable[[AsyncSession], Awaitable[T]],
    *,
    what: str,
    attempts: int = ATTEMPTS,
) -> T:
    """``work`` in a transaction of its own (held under :meth:`Database.writing`), committed; run again in
    a fresh transaction, up to ``attempts`` times in all, when it was aborted for a deadlock or a
    serialisation conflict. ``what`` names the work in the log."""
    for attempt in range(1, attempts + 1):
        try:
            async with database.writing(), database.sessions() as session, session.begin():
                return await work(session)
        except DBAPIError as exc:
            if attempt >= attempts or not retryable(exc):
                raise
            log.warning(
                "%s: transaction aborted by the database (SQLSTATE %s), trying again (%d of %d)",
                what,
                sqlstate(exc),
                attempt + 1,
                attempts,
            )
            await asyncio.sleep(random.uniform(0, PAUSE_S * 2 ** (attempt - 1)))  # noqa: S311 -- jitter
    raise AssertionError("unreachable: the last attempt returns or raises")
