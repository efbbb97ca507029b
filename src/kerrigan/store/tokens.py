"""API tokens: handed out once in plain text, stored as SHA-256, looked up by hash."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.models import ApiTokenRow

TOKEN_PREFIX = "kgn_"  # noqa: S105 -- a visible prefix, not a secret


def token_hash(token: str) -> str:
    """The stored form of a token. Tokens are 256 random bits, so a plain hash is enough (no salt)."""
    return hashlib.sha256(token.encode()).hexdigest()


async def create_token(session: AsyncSession, login: str, at: datetime) -> str:
    """A new token for ``login``; the only time its plain text exists."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiTokenRow(login=login, token_hash=token_hash(token), created_at=at))
    await session.flush()
    return token


async def login_for_token(session: AsyncSession, token: str) -> str | None:
    """The login a live token belongs to, or ``None``."""
    row = await session.scalar(
        select(ApiTokenRow).where(
            ApiTokenRow.token_hash == token_hash(token), ApiTokenRow.revoked_at.is_(None)
        )
    )
    return row.login if row is not None else None


async def revoke_tokens(session: AsyncSession, login: str, at: datetime) -> int:
    """Revoke every live token of ``login``; how many there were."""
    rows = (
        await session.scalars(
            select(ApiTokenRow).where(ApiTokenRow.login == login, ApiTokenRow.revoked_at.is_(None))
        )
    ).all()
    for row in rows:
        row.revoked_at = at
    await session.flush()
    return len(rows)
