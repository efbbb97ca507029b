"""Browser sign-ins kept on the server: the cookie carries a random id, the database its SHA-256, the
login and when the sign-in ends. Sign out ends the row, so a cookie copied before it is worth nothing after,
on every replica."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.models import SignInRow

# Expired rows are kept this long, so that a look at yesterday's sign-ins can still find them.
KEPT_AFTER_END: Final = timedelta(days=1)


def signin_hash(signin_id: str) -> str:
    """The stored form of a sign-in id. Ids are 256 random bits, so a plain hash is enough (no salt)."""
    return hashlib.sha256(signin_id.encode()).hexdigest()


async def create_signin(session: AsyncSession, login: str, at: datetime, lasts: timedelta) -> str:
    """A new sign-in of ``login`` until ``at + lasts``; the only time its id exists in plain text."""
    signin_id = secrets.token_urlsafe(32)
    session.add(SignInRow(id_hash=signin_hash(signin_id), login=login, created_at=at, expires_at=at + lasts))
    await session.flush()
    return signin_id


async def signed_in_login(session: AsyncSession, signin_id: str, at: datetime) -> str | None:
    """The login of a sign-in that exists, has not ended and has not expired at ``at``; else None."""
    login: str | None = await session.scalar(
        select(SignInRow.login).where(
            SignInRow.id_hash == signin_hash(signin_id),
            SignInRow.ended_at.is_(None),
            SignInRow.expires_at > at,
        )
    )
    return login


async def end_signin(session: AsyncSession, signin_id: str, at: datetime) -> bool:
    """End a sign-in (Sign out); whether it was still going."""
    result = await session.execute(
        update(SignInRow)
        .where(SignInRow.id_hash == signin_hash(signin_id), SignInRow.ended_at.is_(None))
        .values(ended_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def purge_signins(session: AsyncSession, at: datetime) -> int:
    """Delete sign-ins that expired more than :data:`KEPT_AFTER_END` before ``at`` (one that was ended
    goes a day after it would have expired: the index is on ``expires_at``); how many."""
    result = await session.execute(
        delete(SignInRow)
        .where(SignInRow.expires_at < at - KEPT_AFTER_END)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]
