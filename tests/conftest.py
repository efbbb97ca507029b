"""Shared fixtures: a fresh, migrated database per test, on SQLite always and on PostgreSQL when asked.

PostgreSQL tests run when ``KERRIGAN_TEST_POSTGRES_URL`` names a server (``.ci/run`` sets it). Each test run
creates its own database there, migrates it once, empties its tables before every test and drops it at the
end. SQLite tests copy a file migrated once per run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from kerrigan.store import inventory_imports  # noqa: F401 -- its table is emptied with the others
from kerrigan.store.database import Database, create_engine, upgrade
from kerrigan.store.models import Base
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github.schema import ENVIRONMENT_VARIABLE, RELATIVE_PATH, find_description

# Modules the tests share that are not test files: pytest rewrites their asserts too, so that one failing
# there says what it compared, as it did in the test module it came from.
pytest.register_assert_rewrite(
    "tests.integration.github.direct_repository",
    "tests.integration.github.reconciler.rig",
    "tests.integration.runner.agents",
    "tests.unit.runner.metrics_scrape",
)

POSTGRES_ENV = "KERRIGAN_TEST_POSTGRES_URL"
E2E = Path(__file__).resolve().parent / "e2e"
BROWSER_FIXTURES = frozenset({"chromium", "tab"})
DESCRIPTION_ABSENT = (
    f"{RELATIVE_PATH} is not beside this clone (a fresh clone has no ../shared; set {ENVIRONMENT_VARIABLE}): "
    "not checked against GitHub's description"
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow kinds carry a marker, so a quick local run can leave them out
    (``python -m pytest -m "not e2e and not browser"``). Tests marked ``github_description`` are skipped,
    saying why, where GitHub's description is not beside the clone (a fresh clone has no ``../shared``);
    under CI, which always has it, they run and fail instead of passing unchecked."""
    absent = find_description() is None and not os.environ.get("CI")
    for item in items:
        if item.path.is_relative_to(E2E):
            item.add_marker(pytest.mark.e2e)
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.browser)
        if absent and item.get_closest_marker("github_description"):
            item.add_marker(pytest.mark.skip(reason=DESCRIPTION_ABSENT))


async def _migrate(url: str) -> None:
    engine = create_engine(url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def _admin(url: str, statement: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as connection:
            await connection.execute(text(statement))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite") / "template.db"
    asyncio.run(_migrate(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set: PostgreSQL store tests skipped")
    name = f"kerrigan_test_{uuid.uuid4().hex[:12]}"
    url = make_url(server)
    asyncio.run(_admin(server, f'CREATE DATABASE "{name}"'))
    test_url = url.set(database=name).render_as_string(hide_password=False)
    try:
        asyncio.run(_migrate(test_url))
        yield test_url
    finally:
        asyncio.run(_admin(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("sqlite_template")
        path = tmp_path / "kerrigan.db"
        shutil.copy(template, path)
        return f"sqlite+aiosqlite:///{path}"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def db(database_url: str, clock: FakeClock) -> AsyncIterator[Database]:
    """A migrated database with no rows. On PostgreSQL the shared test database is emptied with ``DELETE``:
    a test leaves a few rows, and deleting them takes a hundredth of a second where ``TRUNCATE`` of every
    table takes a fifth."""
    database = Database.connect(database_url, clock)
    if database.engine.dialect.name == "postgresql":
        async with database.engine.begin() as connection:
            for table in reversed(Base.metadata.sorted_tables):
                await connection.execute(table.delete())
    try:
        yield database
    finally:
        await database.close()
