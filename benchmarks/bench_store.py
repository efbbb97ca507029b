"""Time loading an inventory snapshot from the database for matching.

A synthetic lab (10,000 devices in 200 pools; ``--devices-per-pool`` changes it) is written to a fresh
SQLite database (and to PostgreSQL with ``--postgres URL``), then ``load_inventory`` is timed next to a
baseline in the same run: the bare ``SELECT`` of the same device rows, building no objects.
Target (docs/performance.md): 10,000 devices loaded in well under a second on SQLite.

    python benchmarks/bench_store.py
    python benchmarks/bench_store.py --quick
    python benchmarks/bench_store.py --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import insert, select, text
from sqlalchemy.engine import make_url

from kerrigan.core.inventory import Inventory
from kerrigan.store.database import Database, create_engine, upgrade
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import DeviceRow, PoolRow, RunnerHostRow
from kerrigan.testing.labs import synthetic_lab


async def fill(database: Database, lab: Inventory) -> None:
    """Write the lab with bulk inserts (the benchmark is about reading)."""
    now = datetime(2026, 11, 29, tzinfo=UTC)
    async with database.sessions() as session, session.begin():
        await session.execute(
            insert(RunnerHostRow), [{"id": h.id, "online": h.online, "created_at": now} for h in lab.hosts]
        )
        await session.execute(
            insert(PoolRow),
            [
                {
                    "id": p.id,
                    "name": p.name,
                    "owners": list(p.owners),
                    "firmware_channel": p.firmware.channel,
                    "firmware_base_version": p.firmware.base_version,
                    "labels": dict(p.labels),
                    "tags": sorted(p.tags),
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for p in lab.pools
            ],
        )
        pool_pks = dict((await session.execute(select(PoolRow.id, PoolRow.pk))).all())
        await session.execute(
            insert(DeviceRow),
            [
                {
                    "id": d.id,
                    "pool_pk": pool_pks[d.pool_id],
                    "board": d.board,
                    "target_type": d.target_type,
                    "os_type": d.os_type,
                    "host": d.host,
                    "state": d.state,
                    "state_reason": d.state_reason,
                    "state_changed_at": now,
                    "labels": dict(d.labels),
                    "tags": sorted(d.tags),
                    "version": 1,
                    "created_at": now,
                    "updated_at": now,
                }
                for d in lab.devices
            ],
        )


async def median_ms(work: Callable[[], Awaitable[object]], repeat: int) -> float:
    """Median wall time in milliseconds after one warm-up."""
    await work()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        await work()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


async def measure(url: str, lab: Inventory, repeat: int) -> tuple[float, float]:
    """(baseline ms, load_inventory ms) on the database at ``url``."""
    database = Database.connect(url)
    try:
        await upgrade(database.engine)
        await fill(database, lab)

        async def baseline() -> object:
            async with database.sessions() as session:
                return (
                    await session.execute(
                        text(
                            "SELECT d.id, p.id, d.board, d.target_type, d.os_type, d.host, d.state, "
                            "d.state_reason, d.labels, d.tags FROM devices d JOIN pools p ON d.pool_pk = p.pk"
                        )
                    )
                ).all()

        async def load() -> Inventory:
            async with database.sessions() as session:
                return await load_inventory(session)

        loaded = await load()
        assert len(loaded.devices) == len(lab.devices)
        return await median_ms(baseline, repeat), await median_ms(load, repeat)
    finally:
        await database.close()


async def with_postgres(server: str, lab: Inventory, repeat: int) -> tuple[float, float]:
    """Measure on a database of its own on ``server``, dropped afterwards."""
    name = f"kerrigan_bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    async with admin.connect() as connection:
        await connection.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        return await measure(make_url(server).set(database=name).render_as_string(False), lab, repeat)
    finally:
        async with admin.connect() as connection:
            await connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


def main() -> None:
    """Run and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 devices, few repeats")
    parser.add_argument("--postgres", metavar="URL", help="also measure on this PostgreSQL server")
    args = parser.parse_args()
    pools, repeat = (20, 3) if args.quick else (200, 11)
    lab = synthetic_lab(pools, 50)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
        rows.append(("sqlite", *asyncio.run(measure(url, lab, repeat))))
    if args.postgres:
        rows.append(("postgresql", *asyncio.run(with_postgres(args.postgres, lab, repeat))))
    print(f"{'database':>10} {'devices':>8} {'baseline ms':>12} {'load_inventory ms':>18} {'x baseline':>11}")
    for name, baseline_ms, load_ms in rows:
        print(
            f"{name:>10} {len(lab.devices):>8} {baseline_ms:>12.1f} {load_ms:>18.1f} "
            f"{load_ms / baseline_ms:>11.1f}"
        )
    if not args.quick:
        met = rows[0][2] < 1000
        print(f"{'met ' if met else 'MISSED'} 10k devices loaded from SQLite in well under a second")


if __name__ == "__main__":
    main()
