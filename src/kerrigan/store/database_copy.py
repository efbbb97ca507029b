"""Copying a whole Kerrigan database into another (SQLite to PostgreSQL, say): every table, resumable.

The target is migrated to the source's revision first. Tables are copied in the order their foreign keys
need (a pool before its devices, a job before its output), each in batches by primary key, one transaction
a batch, skipping rows the target already holds: a copy that was interrupted is run again and completes,
without duplicates. A target whose rows are not the source's (another lab's database, or a source that
changed since a row was copied) is refused before anything is written. Rows are read and written through
the models' own column types, so what a row holds is the same on both databases (times in UTC, enums by
value, JSON). On PostgreSQL, the sequences that hand out integer keys are then moved past the copied ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import Column, Connection, Integer, Table, func, insert, inspect, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from kerrigan.store import inventory_imports  # noqa: F401 -- its table is one of those copied
from kerrigan.store.database import current_revision, head_revision, upgrade
from kerrigan.store.models import Base

BATCH: Final = 500  # rows a transaction: small enough for a chunk of output each, large enough to be quick
ALEMBIC_TABLE: Final = "alembic_version"


class CopyRefusedError(Exception):
    """The copy cannot be made as asked; the message says why and what to do, in one line."""


@dataclass(frozen=True, slots=True)
class TableCopied:
    """What one table's copy did: rows written, and rows the target already held."""

    table: str
    copied: int
    already: int


@dataclass(frozen=True, slots=True)
class TableCount:
    """A table's rows on each side once the copy is done."""

    table: str
    source: int
    target: int

    @property
    def matches(self) -> bool:
        """Whether both sides hold as many rows."""
        return self.source == self.target


def tables() -> list[Table]:
    """Every table of the schema, each after the tables its foreign keys point to."""
    return list(Base.metadata.sorted_tables)


def _key(table: Table) -> Column[Any]:
    [column] = table.primary_key.columns  # every table of Kerrigan's has a one-column key
    return column


def _names(connection: Connection) -> set[str]:
    return set(inspect(connection).get_table_names())


async def _table_names(engine: AsyncEngine) -> set[str]:
    async with engine.connect() as connection:
        return await connection.run_sync(_names)


async def prepare_target(source: AsyncEngine, target: AsyncEngine) -> None:
    """Check both databases can take part, and migrate an empty target to the source's revision; a
    :class:`CopyRefusedError` naming what is wrong otherwise (nothing is written then)."""
    head = head_revision()
    at = await current_revision(source)
    if at != head:
        raise CopyRefusedError(
            f"the source database is at revision {at or 'none'}, and this Kerrigan copies revision {head}: "
            + (
                "run `kerrigan db upgrade` on it first"
                if at is None or at < head
                else "use the Kerrigan that migrated it"
            )
        )
    known = {table.name for table in tables()}
    unknown = sorted(await _table_names(source) - known - {ALEMBIC_TABLE})
    if unknown:
        raise CopyRefusedError(
            f"the source database holds tables Kerrigan does not know ({', '.join(unknown)}): not copied"
        )
    there = await current_revision(target)
    if there is None:
        if await _table_names(target) - {ALEMBIC_TABLE}:
            raise CopyRefusedError(
                "the target database holds tables but no Kerrigan schema: copy into an empty database"
            )
        await upgrade(target, head)
    elif there != head:
        raise CopyRefusedError(
            f"the target database is at revision {there}, the source at {head}: copy into an empty database "
            "(or one a copy of this revision began)"
        )


async def check_target(source: AsyncEngine, target: AsyncEngine, *, batch: int = BATCH) -> None:
    """Refuse a target holding a row that is not the source's as it is now: one the source lacks, or one
    that differs (another lab's data, or a source changed since the copy began)."""
    for table in tables():
        key = _key(table)
        last: Any = None
        while True:
            query = select(table).order_by(key).limit(batch)
            if last is not None:
                query = query.where(key > last)
            async with target.connect() as connection:
                held = (await connection.execute(query)).all()
            if not held:
                break
            keys = [row._mapping[key.name] for row in held]
            async with source.connect() as connection:
                found = {
                    row._mapping[key.name]: row
                    for row in await connection.execute(select(table).where(key.in_(keys)))
                }
            for row in held:
                value = row._mapping[key.name]
                theirs = found.get(value)
                if theirs is None or tuple(theirs) != tuple(row):
                    what = "the source has no such row" if theirs is None else "it differs from the source's"
                    raise CopyRefusedError(
                        f"the target database's {table.name} row {key.name}={value!r} is not the source's "
                        f"({what}): the target holds other data, or the source changed since the copy began "
                        "(stop Kerrigan while copying); copy into an empty database"
                    )
            last = keys[-1]


async def copy_table(
    source: AsyncEngine,
    target: AsyncEngine,
    table: Table,
    *,
    batch: int = BATCH,
    after_batch: Callable[[str, int], None] | None = None,
) -> TableCopied:
    """Copy ``table``'s rows the target lacks, in batches by key, one transaction each; ``after_batch``
    is told the table and the rows written once each batch is committed."""
    key = _key(table)
    last: Any = None
    copied = already = 0
    while True:
        query = select(table).order_by(key).limit(batch)
        if last is not None:
            query = query.where(key > last)
        async with source.connect() as connection:
            rows = (await connection.execute(query)).all()
        if not rows:
            return TableCopied(table.name, copied, already)
        keys = [row._mapping[key.name] for row in rows]
        async with target.begin() as connection:
            present = set((await connection.execute(select(key).where(key.in_(keys)))).scalars())
            missing = [dict(row._mapping) for row in rows if row._mapping[key.name] not in present]
            if missing:
                await connection.execute(insert(table), missing)
        copied += len(missing)
        already += len(present)
        last = keys[-1]
        if after_batch is not None:
            after_batch(table.name, len(missing))


async def advance_sequences(target: AsyncEngine) -> None:
    """On PostgreSQL, move each integer key's sequence past the largest key copied, so that the next row
    inserted gets a new one (SQLite takes the largest key plus one by itself)."""
    if target.dialect.name != "postgresql":
        return
    async with target.begin() as connection:
        for table in tables():
            key = _key(table)
            if not isinstance(key.type, Integer):
                continue
            await connection.execute(
                text(
                    f"SELECT setval(pg_get_serial_sequence(:table, :column), "  # noqa: S608 -- our own names
                    f'(SELECT COALESCE(MAX("{key.name}"), 0) + 1 FROM "{table.name}"), false)'
                ),
                {"table": table.name, "column": key.name},
            )


async def count_rows(source: AsyncEngine, target: AsyncEngine) -> list[TableCount]:
    """Each table's rows on both sides."""
    counts = []
    async with source.connect() as theirs, target.connect() as ours:
        for table in tables():
            query = select(func.count()).select_from(table)
            counts.append(
                TableCount(
                    table.name, int(await theirs.scalar(query) or 0), int(await ours.scalar(query) or 0)
                )
            )
    return counts


async def copy_database(
    source: AsyncEngine,
    target: AsyncEngine,
    *,
    batch: int = BATCH,
    after_table: Callable[[TableCopied], None] | None = None,
    after_batch: Callable[[str, int], None] | None = None,
) -> Sequence[TableCount]:
    """Copy every table from ``source`` into ``target`` (see the module's docstring); the counts of
    both sides at the end, for the caller to compare."""
    await prepare_target(source, target)
    await check_target(source, target, batch=batch)
    for table in tables():
        done = await copy_table(source, target, table, batch=batch, after_batch=after_batch)
        if after_table is not None:
            after_table(done)
    await advance_sequences(target)
    return await count_rows(source, target)
