"""Browser sign-ins kept on the server: the cookie carries a random id, the database its SHA-256, the
login, when the sign-in ends and when GitHub last confirmed the login may sign in. Sign out ends the row,
so a cookie copied before it is worth nothing after, on every replica; so does a login that may no longer
sign in (:func:`end_signins_of`)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
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


@dataclass(frozen=True, slots=True)
class SignIn:
    """A sign-in that is going: whose, and when GitHub last confirmed it may be."""

    login: str
    checked_at: datetime


async def create_signin(session: AsyncSession, login: str, at: datetime, lasts: timedelta) -> str:
    """A new sign-in of ``login`` (just checked) until ``at + lasts``; the only time its id exists in plain
    text."""
    signin_id = secrets.token_urlsafe(32)
    session.add(
        SignInRow(
            id_hash=signin_hash(signin_id), login=login, created_at=at, expires_at=at + lasts, checked_at=at
        )
    )
    await session.flush()
    return signin_id


async def signed_in(session: AsyncSession, signin_id: str, at: datetime) -> SignIn | None:
    """A sign-in that exists, has not ended and has not expired at ``at``; else None."""
    row = (
        await session.execute(
            select(SignInRow.login, SignInRow.checked_at, SignInRow.created_at).where(
                SignInRow.id_hash == signin_hash(signin_id),
                SignInRow.ended_at.is_(None),
                SignInRow.expires_at > at,
            )
        )
    ).one_or_none()
    if row is None:
        return None
    login, checked_at, created_at = row
    return SignIn(login, checked_at or created_at)  # a row from before checks: checked when made


async def mark_checked(session: AsyncSession, signin_id: str, at: datetime) -> None:
    """GitHub confirmed at ``at`` that the sign-in's login may still sign in."""
    await session.execute(
        update(SignInRow)
        .where(SignInRow.id_hash == signin_hash(signin_id), SignInRow.ended_at.is_(None))
        .values(checked_at=at)
        .execution_options(synchronize_session=False)
    )


async def end_signins_of(session: AsyncSession, login: str, at: datetime) -> int:
    """End every sign-in of ``login`` that is still going (it may no longer sign in); how many."""
    result = await session.execute(
        update(SignInRow)
        .where(SignInRow.login == login, SignInRow.ended_at.is_(None), SignInRow.expires_at > at)
        .values(ended_at=at)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


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
