"""``kerrigan db copy``: a lab's whole database, every table, from SQLite into PostgreSQL (when
``KERRIGAN_TEST_POSTGRES_URL`` names a server) and into another SQLite file; resumed after an interruption
without duplicates; a target that is not empty of others' data refused; the counts compared."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import func, select, text

from kerrigan.core.device_power import PowerAction, PowerState, RequestState
from kerrigan.core.inventory import Inventory
from kerrigan.core.lifecycle import SessionState
from kerrigan.store.audit import Change
from kerrigan.store.database import Database, create_engine, current_revision, head_revision, upgrade
from kerrigan.store.database_copy import CopyRefusedError, copy_database, count_rows, tables
from kerrigan.store.deliveries import NewDelivery, record_deliveries
from kerrigan.store.installations import add_repositories, find_repository, upsert_installation
from kerrigan.store.inventory_imports import record_import
from kerrigan.store.label_keys import put_label_key
from kerrigan.store.models import (
    ApprovalRow,
    DeviceLeaseRow,
    DeviceRequestRow,
    HostLeaseRow,
    JobArtifactChunkRow,
    JobArtifactRow,
    JobConsoleRow,
    JobResultRow,
    PoolRow,
    ReservationRow,
    SessionRow,
    SuspectNameRow,
)
from kerrigan.store.runners import create_runner_token
from kerrigan.store.secrets import Keyring, secrets_for, set_secret
from kerrigan.store.signins import create_signin
from kerrigan.store.tokens import create_token
from kerrigan.testing.clock import FakeClock
from tests.conftest import POSTGRES_ENV, _admin
from tests.integration.api.history_rows import Run, add_session
from tests.integration.github.conftest import lab, store_inventory

KEY = Fernet.generate_key().decode()
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


async def populate(db: Database, clock: FakeClock) -> None:
    """A lab that has run for a while: something in every table."""
    await store_inventory(db, Inventory(), lab())
    now = clock()
    async with db.sessions() as session, session.begin():
        await record_import(session, lab(), Change("olga", now))
        installation = await upsert_installation(session, 77, "octo", now)
        await add_repositories(session, installation, [(4242, "octo/firmware")])
        await set_secret(
            session,
            Keyring((KEY,)),
            await find_repository(session, "octo/firmware"),
            "LAB_VPN_KEY",
            "vpn-key-0123456789",
            change=Change("olga", now),
        )
        await create_token(session, "olga", now)
        await put_label_key(session, "sdk", "the SDK release the board runs", Change("olga", now))
        await create_signin(session, "olga", now, timedelta(hours=8))
        await create_runner_token(session, "lab-a-01", now, actor="olga")
        for day in range(3):
            await add_session(
                session,
                now - timedelta(days=day),
                runs=(
                    Run(state="retried", output=("boot\n", "flaky\n"), failure_class="infrastructure"),
                    Run(attempt=2, output=("boot\n", "pass: ünïcode ✓\n")),
                ),
            )
        session_id, [job_pk] = await add_session(
            session, now, state=SessionState.IN_PROGRESS, conclusion=None, runs=(Run(state="running"),)
        )
        session.add(
            JobResultRow(
                job_pk=job_pk, path="results/a.xml", report={"file": "results/a.xml"}, received_at=now
            )
        )
        artifact = JobArtifactRow(
            job_pk=job_pk, path="logs/boot.log", size=4, sha256="0" * 64, received_at=now
        )
        session.add(artifact)
        await session.flush()
        session.add(JobArtifactChunkRow(artifact_pk=artifact.pk, seq=0, data=b"\x00\xffok"))
        session.add(
            JobConsoleRow(job_pk=job_pk, seq=0, byte_offset=0, data="U-Boot 2024.01\r\n", received_at=now)
        )
        reservation = ReservationRow(
            id=str(uuid.uuid4()),
            login="olga",
            requirements={"labels": {}, "tags": []},
            device="modalix-redbox",
            duration_s=1800,
            state="active",
            created_at=now,
            granted_at=now,
            ends_at=now + timedelta(minutes=30),
            device_id="modalix-redbox",
            host="lab-a-01",
            holder_settings={"BAUD": "115200"},
        )
        session.add(reservation)
        session.add(  # the holder switched the board on
            DeviceRequestRow(
                id=str(uuid.uuid4()),
                device_id="modalix-redbox",
                host="lab-a-01",
                login="olga",
                action=PowerAction.ON,
                state=RequestState.DONE,
                created_at=now,
                sent_at=now,
                answered_at=now,
                power=PowerState.ON,
            )
        )
        build_session, [build_job] = await add_session(  # a job with board: none, on a host's room
            session, now, state=SessionState.IN_PROGRESS, conclusion=None, runs=(Run(state="running"),)
        )
        session.add(
            HostLeaseRow(
                job_pk=build_job,
                session_id=build_session,
                host="lab-a-02",
                granted_at=now,
                expires_at=now + timedelta(minutes=1),
            )
        )
        session.add(
            ApprovalRow(
                comment_id=9_000_000_001,
                repository="octo/firmware",
                pull_request=8,
                head_sha="f" * 40,
                login="olga",
                secrets=False,
                approved_at=now,
            )
        )
        session.add(
            SuspectNameRow(task="octo/firmware:smoke.yml:boot", device_id="modalix-bluebox", named_at=now)
        )
        await session.flush()
        session.add_all(
            [
                DeviceLeaseRow(
                    device_id="modalix-bluebox",
                    job_pk=job_pk,
                    session_id=session_id,
                    host="lab-a-01",
                    granted_at=now,
                    expires_at=now + timedelta(minutes=1),
                ),
                DeviceLeaseRow(
                    device_id="modalix-redbox",
                    reservation_pk=reservation.pk,
                    session_id=reservation.id,
                    host="lab-a-01",
                    granted_at=now,
                    expires_at=now + timedelta(minutes=30),
                ),
            ]
        )
    async with db.engine.begin() as connection:
        await record_deliveries(
            connection,
            [NewDelivery(f"d-{n}", "push", None, '{"ref": "refs/heads/main"}', now) for n in range(3)],
        )
    async with db.engine.connect() as connection:
        empty = [t.name for t in tables() if not await connection.scalar(select(func.count()).select_from(t))]
    assert empty == []  # the copy below is of every table


@pytest.fixture
async def target_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database of the kind asked: its own PostgreSQL database, or a new SQLite file."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'target.db'}"
        return
    server = os.environ.get(POSTGRES_ENV)
    if not server:
        pytest.skip(f"{POSTGRES_ENV} is not set: the copy into PostgreSQL is skipped")
    from sqlalchemy.engine import make_url

    name = f"kerrigan_copy_{uuid.uuid4().hex[:12]}"
    await _admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        await _admin(server, f'DROP DATABASE "{name}" WITH (FORCE)')


async def _rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            return {
                t.name: [
                    tuple(row) for row in await connection.execute(select(t).order_by(*t.primary_key.columns))
                ]
                for t in tables()
            }
    finally:
        await engine.dispose()


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite", "postgresql"], indirect=True)
async def test_every_table_is_copied_as_it_is_and_new_rows_get_new_keys(
    db: Database, database_url: str, target_url: str, clock: FakeClock
) -> None:
    await populate(db, clock)
    target = create_engine(target_url)
    try:
        counts = await copy_database(db.engine, target, batch=2)  # small batches: many per table
        assert await current_revision(target) == head_revision()
    finally:
        await target.dispose()
    assert all(count.matches and count.source > 0 for count in counts)
    assert await _rows(target_url) == await _rows(database_url)
    copied = Database.connect(target_url)
    try:
        async with copied.sessions() as session:
            # Secrets are still encrypted under the same key, and open with it.
            assert await secrets_for(session, "octo/firmware", ["LAB_VPN_KEY"], keys=Keyring((KEY,))) == {
                "LAB_VPN_KEY": "vpn-key-0123456789"
            }
        async with copied.sessions() as session, session.begin():
            # A row inserted after the copy does not collide with a copied one (PostgreSQL's sequences
            # were moved past the copied keys).
            pool = PoolRow(id="after-copy", name="After", created_at=clock(), updated_at=clock())
            session.add(pool)
            await add_session(session, clock())
        async with copied.sessions() as session:
            assert pool.pk > int(
                await session.scalar(select(func.max(PoolRow.pk)).where(PoolRow.id != "after-copy")) or 0
            )
            assert await session.scalar(select(func.count()).select_from(SessionRow)) == 6
    finally:
        await copied.close()


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite"], indirect=True)
async def test_an_interrupted_copy_run_again_completes_without_duplicates(
    db: Database, database_url: str, target_url: str, clock: FakeClock
) -> None:
    await populate(db, clock)
    target = create_engine(target_url)
    written: list[str] = []

    def stop_midway(table: str, rows: int) -> None:
        written.append(table)
        if table == "job_log_chunks":  # a few batches in: jobs copied, output partly
            raise KeyboardInterrupt

    try:
        with pytest.raises(KeyboardInterrupt):
            await copy_database(db.engine, target, batch=3, after_batch=stop_midway)
        partial = {count.table: count for count in await count_rows(db.engine, target)}
        assert partial["jobs"].matches  # copied before it stopped
        assert 0 < partial["job_log_chunks"].target < partial["job_log_chunks"].source  # stopped midway
        assert partial["job_results"].target == 0  # not reached
        counts = await copy_database(db.engine, target, batch=3)
    finally:
        await target.dispose()
    assert all(count.matches for count in counts)
    assert await _rows(target_url) == await _rows(database_url)


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite"], indirect=True)
async def test_a_target_holding_other_data_is_refused_and_left_as_it_was(
    db: Database, target_url: str, clock: FakeClock
) -> None:
    await populate(db, clock)
    target = create_engine(target_url)
    try:
        await copy_database(db.engine, target)
        async with target.begin() as connection:
            await connection.execute(text("UPDATE pools SET name = 'Another lab' WHERE id = 'sdk-2-2-som'"))
        before = await _rows(target_url)
        with pytest.raises(CopyRefusedError, match=r"target database's pools row pk=\d+ is not the source's"):
            await copy_database(db.engine, target)
        assert await _rows(target_url) == before
    finally:
        await target.dispose()


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite"], indirect=True)
async def test_a_target_of_another_revision_or_schema_is_refused(
    db: Database, target_url: str, tmp_path: Path
) -> None:
    target = create_engine(target_url)
    try:
        async with target.begin() as connection:
            await connection.execute(
                text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
            )
            await connection.execute(text("INSERT INTO alembic_version VALUES ('0007')"))
        with pytest.raises(CopyRefusedError, match="the target database is at revision 0007, the source at"):
            await copy_database(db.engine, target)
        async with target.begin() as connection:
            await connection.execute(text("DROP TABLE alembic_version"))
            await connection.execute(text("CREATE TABLE notes (id INTEGER PRIMARY KEY)"))
        with pytest.raises(CopyRefusedError, match="holds tables but no Kerrigan schema"):
            await copy_database(db.engine, target)
    finally:
        await target.dispose()


# -- The command -----------------------------------------------------------------------------------------


def _kerrigan(database_url: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    environ["KERRIGAN_DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", "db", "copy", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=environ,
        timeout=120,
    )


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite"], indirect=True)
async def test_the_command_copies_prints_each_tables_counts_and_says_they_match(
    db: Database, database_url: str, target_url: str, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(db, clock)
    done = _kerrigan(database_url, tmp_path, "--to", target_url)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "jobs: 8 rows copied, 0 already there" in lines
    assert lines[-1].startswith("copied to sqlite+aiosqlite:///")
    assert lines[-1].endswith("every count matches")
    header = next(line for line in lines if line.startswith("TABLE"))
    assert header.split() == ["TABLE", "SOURCE", "TARGET"]
    assert any(line.split() == ["jobs", "8", "8"] for line in lines)
    again = _kerrigan(database_url, tmp_path, "--to", target_url)  # run again: nothing more to do
    assert again.returncode == 0, again.stderr
    assert "jobs: 0 rows copied, 8 already there" in again.stdout.splitlines()


@sqlite_only
@pytest.mark.parametrize("target_url", ["sqlite"], indirect=True)
async def test_the_command_exits_1_naming_a_table_whose_counts_differ(
    db: Database, database_url: str, target_url: str, clock: FakeClock, tmp_path: Path
) -> None:
    await populate(db, clock)
    # Something else writes into the target while the copy runs: each job copied there adds an API token
    # after the tokens were copied (as a server pointed at the target too early would).
    target = create_engine(target_url)
    try:
        await upgrade(target)
        async with target.begin() as connection:
            await connection.execute(
                text(
                    "CREATE TRIGGER meanwhile AFTER INSERT ON jobs BEGIN INSERT OR IGNORE INTO api_tokens "
                    "(pk, login, token_hash, created_at) "
                    "VALUES (1000, 'mallory', 'h', '2026-11-29 12:00:00'); END"
                )
            )
    finally:
        await target.dispose()
    done = _kerrigan(database_url, tmp_path, "--to", target_url)
    assert done.returncode == 1, done.stderr
    assert any(line.split() == ["api_tokens", "1", "2", "differs"] for line in done.stdout.splitlines())
    assert done.stderr == (
        "the counts differ in api_tokens: was Kerrigan still running? Stop it and run the copy again\n"
    )


@sqlite_only
@pytest.mark.parametrize(
    ("to", "message"),
    [
        ("mysql://db/kerrigan", "--to must start with sqlite+aiosqlite:// or postgresql+asyncpg://"),
        ("SAME", "--to names the database KERRIGAN_DATABASE_URL names"),
    ],
)
async def test_the_command_refuses_a_wrong_target_in_one_line(
    db: Database, database_url: str, tmp_path: Path, to: str, message: str
) -> None:
    done = _kerrigan(database_url, tmp_path, "--to", database_url if to == "SAME" else to)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stderr.count("\n") == 1
