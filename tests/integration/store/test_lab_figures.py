"""The lab's figures behind ``/metrics``, read from the database, on SQLite and PostgreSQL: devices by pool,
state and health; queued jobs by the pools they wait on; runner hosts; check runs GitHub does not show yet."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import select, update

from kerrigan.store.check_runs import claim_due, shown
from kerrigan.store.database import Database
from kerrigan.store.lab_figures import NO_BOARD, NO_POOL, LabFigures, PoolsOfRequirements, read_figures
from kerrigan.store.models import DeviceRow, PoolRow, RunnerHostRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.store.transitions import record_version
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock

BLUEBOX = {"tasks": [{"id": "boot", "requested": {"labels": {"kerrigan.target_id": ["modalix-bluebox"]}}}]}
NOWHERE = {"tasks": [{"id": "boot", "requested": {"labels": {"kerrigan.target_id": ["no-such-board"]}}}]}


async def queue(db: Database, resolution: dict[str, object]) -> str:
    session_id = str(uuid.uuid4())
    async with db.sessions() as session, session.begin():
        await create_session(
            session, builders.session(session_id, ["boot"], resolution=resolution), db.clock()
        )
    return session_id


async def figures(db: Database, pools: PoolsOfRequirements | None = None) -> LabFigures:
    async with db.sessions() as session:
        return await read_figures(session, db.clock(), pools or PoolsOfRequirements())


async def bluebox_pool(db: Database) -> str:
    async with db.sessions() as session:
        found = await session.scalar(
            select(PoolRow.id)
            .join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk)
            .where(DeviceRow.id == "modalix-bluebox")
        )
    assert found is not None
    return found


async def test_devices_are_counted_by_pool_state_and_health(lab_db: Database) -> None:
    found = await figures(lab_db)
    async with lab_db.sessions() as session:
        devices = len((await session.scalars(select(DeviceRow.id))).all())
        pools = set((await session.scalars(select(PoolRow.id))).all())
    assert sum(found.devices.values()) == devices
    assert {pool for pool, _, _ in found.devices} <= pools
    assert found.queue == {}
    assert found.checkruns_pending == 0
    assert found.checkruns_unshown_since is None

    async with lab_db.sessions() as session, session.begin():
        await session.execute(update(DeviceRow).where(DeviceRow.id == "modalix-bluebox").values(health="bad"))
    found = await figures(lab_db)
    pool = await bluebox_pool(lab_db)
    assert found.devices[(pool, "available", "bad")] == 1
    assert sum(found.devices.values()) == devices


async def test_queued_jobs_count_in_the_pools_they_wait_on_and_the_answer_follows_the_inventory(
    lab_db: Database, clock: FakeClock
) -> None:
    pool = await bluebox_pool(lab_db)
    for _ in range(2):
        await queue(lab_db, BLUEBOX)
    await queue(lab_db, NOWHERE)
    pools = PoolsOfRequirements()
    assert (await figures(lab_db, pools)).queue == {pool: 2, NO_POOL: 1}

    # Maintenance ends by itself: its jobs still wait on that pool.
    clock.advance(1)
    async with lab_db.sessions() as session, session.begin():
        await session.execute(
            update(DeviceRow)
            .where(DeviceRow.id == "modalix-bluebox")
            .values(state="maintenance", updated_at=lab_db.clock())
        )
    assert (await figures(lab_db, pools)).queue == {pool: 2, NO_POOL: 1}

    # Retired, the board can never take them: the same cache sees the inventory changed.
    clock.advance(1)
    async with lab_db.sessions() as session, session.begin():
        await session.execute(
            update(DeviceRow)
            .where(DeviceRow.id == "modalix-bluebox")
            .values(state="retired", updated_at=lab_db.clock())
        )
    assert (await figures(lab_db, pools)).queue == {NO_POOL: 3}


async def test_runner_hosts_are_online_offline_or_paused(lab_db: Database) -> None:
    async with lab_db.sessions() as session, session.begin():
        hosts = list((await session.scalars(select(RunnerHostRow.id).order_by(RunnerHostRow.id))).all())
        assert len(hosts) >= 2
        await session.execute(update(RunnerHostRow).values(online=False))
        await session.execute(
            update(RunnerHostRow)
            .where(RunnerHostRow.id == hosts[0])
            .values(online=True, last_heartbeat_at=lab_db.clock())
        )
        await session.execute(
            update(RunnerHostRow)
            .where(RunnerHostRow.id == hosts[1])
            .values(paused_at=lab_db.clock(), paused_reason="x")
        )
    found = {host.id: host for host in (await figures(lab_db)).hosts}
    assert found[hosts[0]].state == "online"
    assert found[hosts[0]].last_heartbeat_at == lab_db.clock()
    assert found[hosts[1]].state == "paused"
    assert all(found[host].state == "offline" for host in hosts[2:])


async def test_a_check_run_behind_counts_from_its_first_unshown_version_until_github_shows_it(
    db: Database, clock: FakeClock
) -> None:
    session_id = await queue(db, {})
    first = db.clock()
    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
        assert row is not None
        record_version(session, row, first)
    clock.advance(30)
    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
        assert row is not None
        record_version(session, row, db.clock())  # a newer version: still behind since the first
    found = await figures(db)
    assert found.checkruns_pending == 1
    assert found.checkruns_unshown_since == first

    async with db.sessions() as session, session.begin():
        [claim] = await claim_due(session, db.clock(), timedelta(seconds=30))
        row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
        assert row is not None
        assert await shown(session, claim, row.version, db.clock())
    found = await figures(db)
    assert found.checkruns_pending == 0
    assert found.checkruns_unshown_since is None


async def test_a_check_run_github_shows_is_not_pending_whatever_unshown_since_says(db: Database) -> None:
    session_id = await queue(db, {})
    async with db.sessions() as session, session.begin():
        # As an older release's reconciler leaves a row mid-upgrade: shown, yet unshown_since still set.
        await session.execute(
            update(SessionRow)
            .where(SessionRow.id == session_id)
            .values(version=3, shown_version=3, unshown_since=db.clock())
        )
    found = await figures(db)
    assert found.checkruns_pending == 0
    assert found.checkruns_unshown_since is None


async def test_the_pools_a_queued_job_waits_on_follow_what_the_runner_hosts_report(lab_db: Database) -> None:
    big = {"tasks": [{"id": "boot", "requested": {"labels": {"kerrigan.target_id": ["modalix-bluebox"]}}}]}
    session_id = str(uuid.uuid4())
    async with lab_db.sessions() as session, session.begin():
        claim = builders.session(session_id, ["boot"], resolution=big, vcpus=64)
        await create_session(session, claim, lab_db.clock())
    pools = PoolsOfRequirements()
    pool = await bluebox_pool(lab_db)
    assert (await figures(lab_db, pools)).queue == {pool: 1}  # no host has said what it has: it may fit
    async with lab_db.sessions() as session, session.begin():
        await session.execute(update(RunnerHostRow).values(resources={"vcpus": 4}))
    assert (await figures(lab_db, pools)).queue == {NO_POOL: 1}  # 64 vCPUs fit on no host that reported


async def test_queued_jobs_that_hold_no_board_wait_on_no_pool_but_their_own_label(lab_db: Database) -> None:
    # A build with board: none waits on runner hosts: no pool's gauge counts it, nor the pool of jobs
    # no device can ever take.
    resolution = {"tasks": [{"id": "build", "requested": {"labels": {"kerrigan.host": ["lab-a-01"]}}}]}
    async with lab_db.sessions() as session, session.begin():
        new = builders.session(str(uuid.uuid4()), ["build"], resolution=resolution, boardless=["build"])
        await create_session(session, new, lab_db.clock())
    assert (await figures(lab_db)).queue == {NO_BOARD: 1}
