"""The engine, sessions and schema version of Kerrigan's database (SQLite or PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.orm import Session

from kerrigan.core.lifecycle import Conclusion
from kerrigan.store.consoles import Consoles
from kerrigan.store.signals import Signals

LAB_CONCLUSION: Final = "kerrigan.lab_conclusion"  # in each session's ``info``: KERRIGAN_LAB_CONCLUSION
SIGNALS: Final = "kerrigan.database_signals"  # in each session's ``info``: its database's signals
MIGRATIONS = Path(__file__).resolve().parent / "migrations"

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, in UTC."""
    return datetime.now(UTC)


def _json_loads(text: str) -> Any:
    # Most devices carry no labels or tags of their own: skipping the decoder for the empty forms
    # takes a third off loading a 10,000-device snapshot.
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return json.loads(text)


def create_engine(url: str, **options: Any) -> AsyncEngine:
    """An async engine; SQLite gets foreign keys enforced and a busy timeout for concurrent writers."""
    options.setdefault("json_deserializer", _json_loads)
    engine = create_async_engine(url, **options)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=5000")
            # With the write-ahead log that `upgrade` turns on, NORMAL is durable across crashes of Kerrigan
            # and costs no fsync per commit.
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

    return engine


@dataclass(frozen=True)
class Database:
    """An engine with its session factory, the clock the store stamps changes with, and the signals its
    commits fire (:mod:`kerrigan.store.signals`)."""

    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock = utc_now
    signals: Signals = field(default_factory=Signals)
    _write_lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)
    # The consoles people watch now, in this process (kerrigan.store.consoles): the API's WebSockets and
    # the runner protocol's meet there.
    consoles: Consoles = field(default_factory=Consoles, repr=False)
    # The shells people have open in held jobs' sandboxes (kerrigan shell), bridged the same way, by job id.
    shells: Consoles = field(default_factory=Consoles, repr=False)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[None]:
        """Hold while writing on a hot path: SQLite takes one writer at a time, and a writer that finds the
        file locked sleeps in SQLite's busy handler for milliseconds; queueing here costs microseconds.
        PostgreSQL needs no such thing."""
        if self.engine.dialect.name != "sqlite":
            yield
            return
        async with self._write_lock:
            yield

    @classmethod
    def connect(
        cls, url: str, clock: Clock = utc_now, *, lab_conclusion: Conclusion = Conclusion.ACTION_REQUIRED
    ) -> Database:
        """Open (lazily) the database at ``url``; a session that failed only for the lab's reasons ends
        ``lab_conclusion`` (``KERRIGAN_LAB_CONCLUSION``: each session carries it, see
        :func:`lab_conclusion_of`)."""
        engine = create_engine(url)
        # A session class of this database's own, so that its commits fire this database's signals only.
        session_class = type("KerriganSession", (Session,), {})
        signals = Signals()
        signals.attach(session_class)
        sessions = async_sessionmaker(
            engine,
            expire_on_commit=False,
            sync_session_class=session_class,
            info={LAB_CONCLUSION: lab_conclusion, SIGNALS: signals},
        )
        return cls(engine, sessions, clock, signals)

    async def close(self) -> None:
        """Close every pooled connection."""
        await self.engine.dispose()


def lab_conclusion_of(session: AsyncSession) -> Conclusion:
    """The conclusion of a session that failed only for the lab's reasons, as its database was opened
    with (:meth:`Database.connect`); ``action_required`` for a session made otherwise."""
    found = session.sync_session.info.get(LAB_CONCLUSION)
    return found if isinstance(found, Conclusion) else Conclusion.ACTION_REQUIRED


def signals_of(session: AsyncSession) -> Signals | None:
    """The signals of the database ``session`` belongs to (what keys its per-process state, such as
    :func:`kerrigan.store.suspects.tracker_of`); ``None`` for a session made otherwise."""
    found = session.sync_session.info.get(SIGNALS)
    return found if isinstance(found, Signals) else None


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration, pointing at the migrations shipped inside the package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The revision the code expects."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None  # the package ships at least one migration
    return head


def schema_ahead(current: str | None, head: str) -> bool:
    """Whether ``current`` is a later revision of Kerrigan's own history than ``head`` (a newer release
    migrated the database). Kerrigan's revisions are numbered in order (``0015``); a revision this code does
    not know and that is not such a number is another application's: not ahead, refused."""
    if current is None or current == head or current in known_revisions():
        return False
    return current.isascii() and current.isdigit() and head.isdigit() and int(current) > int(head)


def known_revisions() -> frozenset[str]:
    """Every revision of the code's migration history."""
    return frozenset(
        script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()
    )


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Apply migrations up to ``revision`` (and put a SQLite database in write-ahead-log mode)."""
    if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
        # Persistent in the file: the webhook receiver's writes and the worker's reads stop blocking each
        # other, and a commit appends to the log rather than rewriting a journal.
        async with engine.connect() as connection:
            await connection.exec_driver_sql("PRAGMA journal_mode=WAL")
    if engine.dialect.name != "sqlite":
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade, revision)
        return
    # SQLite changes a table's constraints by building a new table and dropping the old one: with foreign
    # keys enforced, that drop would delete every row that refers to it (ON DELETE CASCADE). They are off
    # while migrating (the pragma only takes outside a transaction) and checked once it is done.
    async with engine.connect() as connection:
        await connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        await connection.commit()
        try:
            async with connection.begin():
                await connection.run_sync(_upgrade, revision)
                broken = (await connection.exec_driver_sql("PRAGMA foreign_key_check")).all()
                if broken:
                    raise RuntimeError(f"the migration broke {len(broken)} references, first {broken[0]}")
        finally:
            await connection.exec_driver_sql("PRAGMA foreign_keys=ON")
            await connection.commit()


async def current_revision(engine: AsyncEngine) -> str | None:
    """The revision the database is at (``None`` for an empty database)."""
    async with engine.connect() as connection:
        return await connection.run_sync(_current)


class SchemaBehindError(RuntimeError):
    """The database is older than the code; the message says what to run."""


async def check_schema(engine: AsyncEngine) -> None:
    """Raise :class:`SchemaBehindError` unless the database is at the code's head revision, or at a newer
    one this code does not know (a newer release migrated it: its migrations only add, so this release runs
    on it during a rolling upgrade or a rollback; docs/operations.md)."""
    current, head = await current_revision(engine), head_revision()
    if schema_ahead(current, head):
        return
    if current != head:
        at = f"at revision {current}" if current else "empty"
        raise SchemaBehindError(
            f"the database is {at} but this Kerrigan needs revision {head}: run `kerrigan db upgrade`"
        )
