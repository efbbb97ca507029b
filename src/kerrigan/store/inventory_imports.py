"""The inventory file as last imported: the base the next import merges against.

Each import writes one row in the transaction that applies it; the latest row is the base. Its own module so
that the tables of the inventory-as-code import stay apart from the live inventory's (``models.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Integer, String, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_file import inventory_document, inventory_from_document
from kerrigan.store.audit import Change
from kerrigan.store.models import Base, Timestamp


class InventoryImportRow(Base):
    """One import of the inventory file: when, by whom, and the file's canonical document."""

    __tablename__ = "inventory_imports"

    pk: Mapped[int] = mapped_column(Integer, primary_key=True)
    imported_at: Mapped[datetime] = mapped_column(Timestamp, index=True)
    actor: Mapped[str] = mapped_column(String(100))
    document: Mapped[dict[str, Any]] = mapped_column(JSON)


@dataclass(frozen=True, slots=True)
class InventoryImport:
    """The base of the next import: when, by whom, and what the import left as the file's inventory."""

    imported_at: datetime
    actor: str
    inventory: Inventory
    document: Mapping[str, Any]


async def last_import(session: AsyncSession) -> InventoryImport | None:
    """The latest import, or ``None`` before the first (or in a database from before imports were stored).

    :class:`~kerrigan.core.inventory_file.DocumentError` when its document cannot be read.
    """
    row = await session.scalar(
        select(InventoryImportRow).order_by(
            InventoryImportRow.imported_at.desc(), InventoryImportRow.pk.desc()
        )
    )
    if row is None:
        return None
    return InventoryImport(row.imported_at, row.actor, inventory_from_document(row.document), row.document)


async def record_import(session: AsyncSession, base: Inventory, change: Change) -> None:
    """Store ``base`` as the base of the next import, in the caller's transaction (nothing when it is the
    base already: importing the same file again adds no row)."""
    document = inventory_document(base)
    latest = await last_import(session)
    if latest is not None and latest.document == document:
        return
    session.add(InventoryImportRow(imported_at=change.at, actor=change.actor, document=document))
    await session.flush()
