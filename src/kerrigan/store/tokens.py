"""API tokens: handed out once in plain text, stored as SHA-256, looked up by hash; each one made or
revoked is in the audit log (as ``api_token`` LOGIN, named by when it was made, never by its text)."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import when
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.models import ApiTokenRow

TOKEN_PREFIX = "kgn_"  # noqa: S105 -- a visible prefix, not a secret


def token_hash(token: str) -> str:
    """The stored form of a token. Tokens are 256 random bits, so a plain hash is enough (no salt)."""
    return hashlib.sha256(token.encode()).hexdigest()


def _made(at: datetime) -> str:
    return f"token made {when(at)}"


async def create_token(
    session: AsyncSession, login: str, at: datetime, *, actor: str = KERRIGAN_ACTOR
) -> str:
    """A new token for ``login``; the only time its plain text exists. Audited as ``actor``'s."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiTokenRow(login=login, token_hash=token_hash(token), created_at=at))
    await session.flush()
    await record(
        session, Change(actor, at), FieldChange(ChangeKind.ADD, "api_token", login, "token", None, _made(at))
    )
    return token


async def login_for_token(session: AsyncSession, token: str) -> str | None:
    """The login a live token belongs to, or ``None``."""
    row = await session.scalar(
        select(ApiTokenRow).where(
            ApiTokenRow.token_hash == token_hash(token), ApiTokenRow.revoked_at.is_(None)
        )
    )
    return row.login if row is not None else None


async def revoke_tokens(
    session: AsyncSession, login: str, at: datetime, *, actor: str = KERRIGAN_ACTOR
) -> int:
    """Revoke every live token of ``login``; how many there were. Each is audited as ``actor``'s."""
    rows = (
        await session.scalars(
            select(ApiTokenRow).where(ApiTokenRow.login == login, ApiTokenRow.revoked_at.is_(None))
        )
    ).all()
    for row in rows:
        row.revoked_at = at
        change = FieldChange(ChangeKind.REMOVE, "api_token", login, "token", _made(row.created_at), None)
        await record(session, Change(actor, at), change)
    await session.flush()
    return len(rows)
