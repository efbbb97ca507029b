"""The lab's database for the commands that act on it directly (``db``, ``tokens``, ``inventory``...)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from kerrigan.cli.usage import UsageError, first_line
from kerrigan.config import Settings

if TYPE_CHECKING:
    from kerrigan.store.database import Database

# The store and its libraries are imported when a command uses them, so that `kerrigan explain` and
# `kerrigan --help` start in a fraction of the time.


async def with_database(settings: Settings, work: Callable[[Database], Awaitable[int]]) -> int:
    """Run ``work`` on the database once its schema is known to be current; errors are one line."""
    from sqlalchemy.exc import SQLAlchemyError

    from kerrigan.store.database import Database, SchemaBehindError, check_schema

    database = Database.connect(settings.database_url, lab_conclusion=settings.lab_conclusion)
    try:
        await check_schema(database.engine)
        return await work(database)
    except SchemaBehindError as exc:
        raise UsageError(str(exc)) from None
    except BrokenPipeError:
        raise  # the reader of our output went away (``| head``), not the database: the command ends quietly
    except (OSError, SQLAlchemyError) as exc:
        raise UsageError(f"cannot use the database: {first_line(exc)}") from None
    finally:
        await database.close()


def require_current_schema(settings: Settings) -> None:
    """Stop with one line (what to run) unless the database is reachable and at the code's revision."""

    async def nothing(database: Database) -> int:
        return 0

    asyncio.run(with_database(settings, nothing))
