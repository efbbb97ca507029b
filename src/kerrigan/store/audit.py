"""The audit log: who changed which label, tag, state, owner or field, when, from what to what."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory_diff import FieldChange
from kerrigan.store.models import AuditRow

KERRIGAN_ACTOR: Final = "kerrigan"  # the actor of what Kerrigan does by itself (a maintenance that ended)


@dataclass(frozen=True, slots=True)
class Change:
    """Who makes a change, and when."""

    actor: str
    at: datetime


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One row of the audit log."""

    at: datetime
    actor: str
    action: str
    subject_type: str
    subject_id: str
    pool_id: str | None
    field: str
    before: object
    after: object


def _plain(value: object) -> object:
    """A JSON-ready form of a field value or a whole pool, device or host."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (frozenset, set)):
        return sorted(_plain(item) for item in value)  # type: ignore[type-var]
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in sorted(value.items())}
    if isinstance(value, datetime):
        return value.isoformat()
    return value


async def record(
    session: AsyncSession, change: Change, field_change: FieldChange, pool_id: str | None = None
) -> None:
    """Add one audit row for ``field_change`` made by ``change.actor``."""
    session.add(
        AuditRow(
            at=change.at,
            actor=change.actor,
            action=field_change.kind.value,
            subject_type=field_change.subject_type,
            subject_id=field_change.subject_id,
            pool_id=pool_id,
            field=field_change.field,
            before=_plain(field_change.before),
            after=_plain(field_change.after),
        )
    )


async def list_audit(
    session: AsyncSession,
    *,
    pool_id: str | None = None,
    device_id: str | None = None,
    actor: str | None = None,
    limit: int = 200,
) -> list[AuditEntry]:
    """The newest audit rows first, optionally for one pool, device or actor."""
    query = select(AuditRow).order_by(AuditRow.at.desc(), AuditRow.pk.desc()).limit(limit)
    if pool_id is not None:
        query = query.where(AuditRow.pool_id == pool_id)
    if device_id is not None:
        query = query.where(AuditRow.subject_type == "device", AuditRow.subject_id == device_id)
    if actor is not None:
        query = query.where(AuditRow.actor == actor)
    rows = (await session.scalars(query)).all()
    return [
        AuditEntry(
            row.at,
            row.actor,
            row.action,
            row.subject_type,
            row.subject_id,
            row.pool_id,
            row.field,
            row.before,
            row.after,
        )
        for row in rows
    ]
