"""The registry of approved label keys, each with a description (kept by System Admins)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.store.audit import Change, record
from kerrigan.store.inventory import NotFoundError
from kerrigan.store.models import LabelKeyRow


async def label_keys(session: AsyncSession) -> dict[str, str]:
    """Every approved key with its description, in key order (empty: any valid key may be used)."""
    rows = await session.execute(select(LabelKeyRow.key, LabelKeyRow.description).order_by(LabelKeyRow.key))
    return dict(rows.all())


async def put_label_key(session: AsyncSession, key: str, description: str, change: Change) -> bool:
    """Approve ``key`` or change its description; whether it was new."""
    row = await session.get(LabelKeyRow, key)
    if row is None:
        session.add(
            LabelKeyRow(key=key, description=description, created_by=change.actor, created_at=change.at)
        )
        await record(
            session, change, FieldChange(ChangeKind.ADD, "label_key", key, "description", None, description)
        )
        await session.flush()
        return True
    if row.description != description:
        await record(
            session,
            change,
            FieldChange(ChangeKind.CHANGE, "label_key", key, "description", row.description, description),
        )
        row.description = description
        await session.flush()
    return False


async def delete_label_key(session: AsyncSession, key: str, change: Change) -> None:
    """Withdraw ``key`` from the registry (labels already using it stay)."""
    row = await session.get(LabelKeyRow, key)
    if row is None:
        raise NotFoundError(f"no approved label key {key!r}")
    await record(
        session,
        change,
        FieldChange(ChangeKind.REMOVE, "label_key", key, "description", row.description, None),
    )
    await session.delete(row)
    await session.flush()
