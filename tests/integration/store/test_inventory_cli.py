"""``kerrigan inventory``, ``tokens`` and ``db`` as an operator runs them: real processes on a real database
(a SQLite file always, PostgreSQL when asked), checked through the store."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from kerrigan.core.inventory import DeviceState, Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import inventory_document, inventory_from_document, parse_inventory
from kerrigan.store.audit import AuditEntry, Change, list_audit
from kerrigan.store.database import Database, check_schema
from kerrigan.store.inventory import apply_diff, get_device, load_inventory, set_state
from kerrigan.store.inventory_imports import record_import
from kerrigan.store.tokens import login_for_token

ROOT = Path(__file__).resolve().parents[3]
LAB = ROOT / "fixtures" / "inventory" / "lab.yml"

# Each process takes a second or two to start. So tests whose outcome the database cannot change (the file
# is rejected, or the diff only printed, before anything is written) or whose store calls the store tests
# run on both databases run on SQLite only; applying an import and the import/export round trip run on both.
sqlite_only = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def run_kerrigan(
    *args: str | Path, cwd: Path, env: dict[str, str], timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``kerrigan`` with only the ``KERRIGAN_`` settings given (none leak in from the test's shell)."""
    environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    return subprocess.run(
        [sys.executable, "-m", "kerrigan.cli", *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=environ | env,
        timeout=timeout,
    )


@dataclass(frozen=True)
class Kerrigan:
    """The command, pointed at one database."""

    database_url: str
    cwd: Path

    def __call__(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return run_kerrigan(*args, cwd=self.cwd, env={"KERRIGAN_DATABASE_URL": self.database_url})


@pytest.fixture
def kerrigan(db: Database, database_url: str, tmp_path: Path) -> Kerrigan:
    # `db` hands over a migrated database with nothing in it: a fresh SQLite file in tmp_path (a copy of
    # one `upgrade` migrated) or the test run's PostgreSQL database, emptied.
    return Kerrigan(database_url, tmp_path)


def parse_lab() -> Inventory:
    result = parse_inventory(LAB.read_text(encoding="utf-8"), str(LAB))
    assert result.inventory is not None, result.errors
    return result.inventory


def by_id(items: Iterable[Any]) -> dict[str, Any]:
    return {item.id: item for item in items}


def same_inventory(left: Inventory, right: Inventory) -> bool:
    """Whether the two hold the same inventory as the file says it (live data, such as who set a device's
    state and since when, is not in the file)."""
    left, right = (inventory_from_document(inventory_document(side)) for side in (left, right))
    return (by_id(left.pools), by_id(left.devices), by_id(left.hosts)) == (
        by_id(right.pools),
        by_id(right.devices),
        by_id(right.hosts),
    )


def write_inventory(path: Path, inventory: Inventory) -> Path:
    path.write_text(yaml.safe_dump(inventory_document(inventory), sort_keys=False), encoding="utf-8")
    return path


async def seed_lab(db: Database, *, base: bool = True) -> Inventory:
    """Store the fixture lab in-process, as a first import would (with ``base``, also as the last import;
    without, as a database from before imports were stored)."""
    lab = parse_lab()
    async with db.sessions() as session, session.begin():
        diff = diff_inventories(await load_inventory(session), lab)
        change = Change("setup", db.clock())
        await apply_diff(session, lab, diff, change)
        if base:
            await record_import(session, lab, change)
    return lab


async def snapshot(db: Database) -> tuple[dict[str, object], list[AuditEntry]]:
    """What `inventory export` would write, and the whole audit log."""
    async with db.sessions() as session:
        return inventory_document(await load_inventory(session)), await list_audit(session, limit=10_000)


async def test_import_applies_the_lab_and_prints_each_addition(kerrigan: Kerrigan, db: Database) -> None:
    done = kerrigan("inventory", "import", LAB)
    assert done.returncode == 0, done.stderr
    lab = parse_lab()
    *changes, summary = done.stdout.splitlines()
    assert set(changes) == (
        {f"+ host {host.id}" for host in lab.hosts}
        | {f"+ pool {pool.id}" for pool in lab.pools}
        | {f"+ device {device.id}" for device in lab.devices}
    )
    assert summary.startswith("applied:")
    assert "4 pools added" in summary
    assert "12 devices added" in summary
    async with db.sessions() as session:
        assert same_inventory(await load_inventory(session), lab)


@sqlite_only
async def test_importing_what_is_already_stored_reports_no_changes(kerrigan: Kerrigan, db: Database) -> None:
    await seed_lab(db)
    before = await snapshot(db)
    done = kerrigan("inventory", "import", LAB)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("no changes")
    assert len(done.stdout.splitlines()) == 1
    assert await snapshot(db) == before


@sqlite_only
async def test_dry_run_prints_the_diff_and_changes_nothing(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    lab = await seed_lab(db)
    pools, devices = by_id(lab.pools), by_id(lab.devices)
    pools["sdk-2-2-som"] = replace(
        pools["sdk-2-2-som"], labels={"sdk": "2.2.1", "form_factor": "som", "site": "a"}
    )
    devices["modalix-newbox"] = replace(devices["modalix-bluebox"], id="modalix-newbox")
    del devices["legacy-02"]
    edited = write_inventory(
        tmp_path / "edited.yml", Inventory(tuple(pools.values()), tuple(devices.values()), lab.hosts)
    )
    before = await snapshot(db)
    done = kerrigan("inventory", "import", "--dry-run", "--prune", edited)
    assert done.returncode == 0, done.stderr
    *changes, summary = done.stdout.splitlines()
    assert set(changes) == {
        "~ pool sdk-2-2-som labels.sdk: 2.2.0 -> 2.2.1",
        "+ pool sdk-2-2-som labels.site: a",
        "- pool sdk-2-2-som labels.purpose (was ga-validation)",
        "+ device modalix-newbox",
        "- device legacy-02",
    }
    assert summary.startswith("dry run:")
    assert "nothing was changed" in summary
    assert await snapshot(db) == before


@sqlite_only
async def test_prune_removes_the_pools_devices_and_hosts_the_file_no_longer_names(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    lab = await seed_lab(db)
    # Without the `default` pool (legacy-01, legacy-02) and host lab-b-02 with davinci-som-01 on it.
    smaller = Inventory(
        tuple(p for p in lab.pools if p.id != "default"),
        tuple(d for d in lab.devices if d.pool_id != "default" and d.host != "lab-b-02"),
        tuple(h for h in lab.hosts if h.id != "lab-b-02"),
    )
    done = kerrigan(
        "inventory",
        "import",
        "--prune",
        "--actor",
        "lab-admin",
        write_inventory(tmp_path / "small.yml", smaller),
    )
    assert done.returncode == 0, done.stderr
    assert set(done.stdout.splitlines()[:-1]) == {
        "- device davinci-som-01",
        "- device legacy-01",
        "- device legacy-02",
        "- pool default",
        "- host lab-b-02",
    }
    async with db.sessions() as session:
        assert same_inventory(await load_inventory(session), smaller)
        removed = await list_audit(session, actor="lab-admin")
    assert {(e.action, e.subject_type, e.subject_id) for e in removed} == {
        ("remove", "device", "davinci-som-01"),
        ("remove", "device", "legacy-01"),
        ("remove", "device", "legacy-02"),
        ("remove", "pool", "default"),
        ("remove", "host", "lab-b-02"),
    }


INVALID = """\
pools:
  - id: sdk-2-2-som
    name: SDK 2.2 SoM
    labels: {sdk: "2.2.0", kerrigan.pool_id: elsewhere}
    devices:
      - id: modalix-bluebox
        board: modalix
        host: lab-a-01
        state: broken
"""


@sqlite_only
async def test_invalid_file_exits_2_placing_each_error_by_file_and_line_and_changes_nothing(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db)
    before = await snapshot(db)
    path = tmp_path / "invalid.yml"
    path.write_text(INVALID, encoding="utf-8")
    done = kerrigan("inventory", "import", "--prune", path)
    assert done.returncode == 2
    assert done.stdout == ""
    *errors, summary = done.stderr.splitlines()
    placed = [re.match(rf"error: {re.escape(str(path))}:(\d+):\d+: (\S+)", line) for line in errors]
    assert [(int(m[1]), m[2]) for m in placed if m] == [
        (4, "pools[0].labels.kerrigan.pool_id:"),
        (9, "pools[0].devices[0].state:"),
    ]
    assert summary == "2 error(s); nothing was changed"
    assert await snapshot(db) == before


@sqlite_only
@pytest.mark.parametrize("export_format", ["yaml", "json"])
async def test_export_parses_back_into_the_stored_inventory(
    kerrigan: Kerrigan, db: Database, export_format: str
) -> None:
    lab = await seed_lab(db)
    done = kerrigan("inventory", "export", "--format", export_format)
    assert done.returncode == 0, done.stderr
    if export_format == "json":
        json.loads(done.stdout)  # strict JSON, not only YAML
    result = parse_inventory(done.stdout, f"export.{export_format}")
    assert result.errors == ()
    assert result.inventory is not None
    assert same_inventory(result.inventory, lab)


async def test_import_export_import_is_a_fixed_point(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db)  # the first import (test_import_applies_the_lab... runs the command itself)
    first = kerrigan("inventory", "export")
    exported = tmp_path / "exported.yml"
    exported.write_text(first.stdout, encoding="utf-8")
    again = kerrigan("inventory", "import", exported)
    second = kerrigan("inventory", "export")
    assert (again.returncode, again.stdout.startswith("no changes")) == (0, True), again.stdout + again.stderr
    assert second.stdout == first.stdout


@sqlite_only
async def test_tokens_create_prints_a_token_the_store_accepts_for_that_login(
    kerrigan: Kerrigan, db: Database
) -> None:
    done = kerrigan("tokens", "create", "--login", "octocat")
    assert done.returncode == 0, done.stderr
    (token,) = done.stdout.splitlines()
    async with db.sessions() as session:
        assert await login_for_token(session, token) == "octocat"


# -- without a usable database (SQLite only: these never reach a server) ---------------------------


def test_a_missing_inventory_file_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yml"
    done = run_kerrigan(
        "inventory",
        "import",
        missing,
        cwd=tmp_path,
        env={"KERRIGAN_DATABASE_URL": "sqlite+aiosqlite:///k.db"},
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert str(missing) in line
    assert "no such file" in line


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("inventory", "import", str(LAB)), id="import"),
        pytest.param(("serve",), id="serve"),
    ],
)
def test_commands_on_an_unmigrated_database_exit_2_telling_to_run_db_upgrade(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    # A server that started anyway would hold the port until the timeout: that fails the test too.
    done = run_kerrigan(
        *args,
        cwd=tmp_path,
        env={"KERRIGAN_DATABASE_URL": f"sqlite+aiosqlite:///{empty}"},
        timeout=20,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert "kerrigan db upgrade" in line
    assert empty.stat().st_size == 0


async def test_db_upgrade_without_a_url_migrates_kerrigan_db_in_the_working_directory(tmp_path: Path) -> None:
    done = run_kerrigan("db", "upgrade", cwd=tmp_path, env={})
    assert done.returncode == 0, done.stderr
    database = Database.connect(f"sqlite+aiosqlite:///{tmp_path / 'kerrigan.db'}")
    try:
        await check_schema(database.engine)
    finally:
        await database.close()


@sqlite_only
async def test_export_into_a_pipe_its_reader_closed_ends_quietly(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db)
    environ = {key: value for key, value in os.environ.items() if not key.startswith("KERRIGAN_")}
    read, write = os.pipe()
    os.close(read)  # `| head` that has had its lines: gone before the export writes a byte
    try:
        done = subprocess.run(
            [sys.executable, "-m", "kerrigan.cli", "inventory", "export"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            cwd=tmp_path,
            env=environ | {"KERRIGAN_DATABASE_URL": kerrigan.database_url},
            timeout=60,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")  # as a tool SIGPIPE ended; not blamed on the database


@sqlite_only
async def test_a_runner_token_for_a_host_the_inventory_lacks_needs_force(
    kerrigan: Kerrigan, db: Database
) -> None:
    await seed_lab(db)
    refused = kerrigan("runners", "create", "lab-nonexistent")
    assert refused.returncode == 2
    assert refused.stdout == ""  # no token made
    assert refused.stderr.startswith(
        "kerrigan runners: the inventory has no runner host lab-nonexistent (its hosts: lab-a-01, lab-a-02, "
    ), refused.stderr
    assert "pass --force" in refused.stderr
    made = kerrigan("runners", "create", "lab-a-01")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("kgr_")
    forced = kerrigan("runners", "create", "lab-c-01", "--force")
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.startswith("kgr_")


async def test_a_maintenance_until_survives_export_and_import_into_another_database(
    kerrigan: Kerrigan, db: Database, tmp_path: Path
) -> None:
    await seed_lab(db)
    until = db.clock() + timedelta(hours=2)
    async with db.sessions() as session, session.begin():
        await set_state(
            session,
            "modalix-bluebox",
            DeviceState.MAINTENANCE,
            "reflashing the bootloader",
            until=until,
            change=Change("hubot", db.clock()),
        )
    exported = kerrigan("inventory", "export")
    assert exported.returncode == 0, exported.stderr
    assert f"state_until: '{until.isoformat()}'" in exported.stdout
    (tmp_path / "lab.yml").write_text(exported.stdout, encoding="utf-8")
    other = f"sqlite+aiosqlite:///{tmp_path / 'other.db'}"
    for args in (("db", "upgrade"), ("inventory", "import", tmp_path / "lab.yml")):
        done = run_kerrigan(*args, cwd=tmp_path, env={"KERRIGAN_DATABASE_URL": other})
        assert done.returncode == 0, done.stdout + done.stderr
    moved = Database.connect(other)
    try:
        async with moved.sessions() as session:
            stored = await get_device(session, "modalix-bluebox")
    finally:
        await moved.close()
    assert (stored.device.state, stored.device.state_until) == (DeviceState.MAINTENANCE, until)
    # Exported again, the file is the same: import and export agree on it.
    again = run_kerrigan("inventory", "export", cwd=tmp_path, env={"KERRIGAN_DATABASE_URL": other})
    assert again.stdout == exported.stdout
