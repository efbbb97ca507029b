"""Alembic's environment: migrations run on a connection Kerrigan hands in (see kerrigan.store.database).

From the ``alembic`` command line, ``-x url=...`` names the database instead.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import Connection

from kerrigan.store import inventory_imports  # noqa: F401 -- its table joins Base.metadata
from kerrigan.store.database import create_engine
from kerrigan.store.models import Base

config = context.config
target_metadata = Base.metadata


def run_on(connection: Connection) -> None:
    """Run the migrations on an open connection."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def run_with_url(url: str) -> None:
    """Open the database at ``url`` and migrate it."""
    engine = create_engine(url)
    async with engine.begin() as connection:
        await connection.run_sync(run_on)
    await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    run_on(connection)
else:
    url = context.get_x_argument(as_dictionary=True).get("url")
    if not url:
        raise SystemExit(
            "pass the database with -x url=sqlite+aiosqlite:///path or run `kerrigan db upgrade`"
        )
    asyncio.run(run_with_url(url))
