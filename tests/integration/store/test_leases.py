"""Device leases: one job per device, whatever races — proven with two dispatchers on one database."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select, update

from kerrigan.store import leases
from kerrigan.store.database import Database
from kerrigan.store.leases import (
    Grant,
    expired_leases,
    grant_leases,
    leased_devices,
    release_lease,
    renew_leases,
    take_queued_jobs,
)
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders

TTL = timedelta(seconds=60)
DEVICES = [f"dev-{n:02d}" for n in range(20)]


async def queue_jobs(
    db: Database, count: int, session_id: str = "11111111-1111-1111-1111-111111111111"
) -> None:
    async with db.sessions() as session, session.begin():
        await create_session(
            session, builders.session(session_id, [f"task-{n:03d}" for n in range(count)]), db.clock()
        )


async def test_a_device_is_leased_to_one_job_and_the_job_leaves_the_queue(db: Database) -> None:
    await queue_jobs(db, 2)
    async with db.sessions() as session, session.begin():
        first, second = await take_queued_jobs(session)
        granted = await grant_leases(
            session,
            [
                Grant(first.pk, "dev-00", "lab-a", first.session_id),
                Grant(second.pk, "dev-00", "lab-a", second.session_id),
            ],
            db.clock(),
            TTL,
        )
    assert [g.job_pk for g in granted] == [first.pk]
    async with db.sessions() as session:
        assert await leased_devices(session) == {"dev-00"}
        assert [j.pk for j in await take_queued_jobs(session)] == [second.pk]


async def test_a_job_ended_meanwhile_gets_no_lease_and_its_device_stays_free(db: Database) -> None:
    await queue_jobs(db, 2)
    async with db.sessions() as session, session.begin():
        first, second = await take_queued_jobs(session)
        await session.execute(update(JobRow).where(JobRow.pk == first.pk).values(state="cancelled"))
        granted = await grant_leases(
            session,
            [
                Grant(first.pk, "dev-00", "lab-a", first.session_id),
                Grant(second.pk, "dev-01", "lab-a", second.session_id),
            ],
            db.clock(),
            TTL,
        )
    assert [g.job_pk for g in granted] == [second.pk]
    async with db.sessions() as session:
        assert await leased_devices(session) == {"dev-01"}
        states = dict((await session.execute(select(JobRow.pk, JobRow.state))).all())
    assert states == {first.pk: "cancelled", second.pk: "leased"}


async def test_a_released_device_can_be_leased_again(db: Database) -> None:
    await queue_jobs(db, 2)
    async with db.sessions() as session, session.begin():
        first, second = await take_queued_jobs(session)
        await grant_leases(session, [Grant(first.pk, "dev-00", "lab-a", first.session_id)], db.clock(), TTL)
        await release_lease(session, "dev-00", first.pk)
        granted = await grant_leases(
            session, [Grant(second.pk, "dev-00", "lab-a", second.session_id)], db.clock(), TTL
        )
    assert [g.job_pk for g in granted] == [second.pk]


async def test_leases_expire_when_their_host_stops_renewing_them(db: Database) -> None:
    await queue_jobs(db, 2)
    async with db.sessions() as session, session.begin():
        first, second = await take_queued_jobs(session)
        await grant_leases(
            session,
            [
                Grant(first.pk, "dev-00", "lab-a", first.session_id),
                Grant(second.pk, "dev-01", "lab-b", second.session_id),
            ],
            db.clock(),
            TTL,
        )
    later = db.clock() + timedelta(seconds=45)
    async with db.sessions() as session, session.begin():
        assert await renew_leases(session, "lab-a", later, TTL) == 1
    async with db.sessions() as session:
        assert await expired_leases(session, later + timedelta(seconds=30)) == [("dev-01", second.pk)]


async def _naive_dispatcher(db: Database, devices: list[str]) -> int:
    """Reads the queue without taking the jobs, then grants: the worst case for double leases."""
    async with db.sessions() as session, session.begin():
        async with db.sessions() as peek:
            queued = (
                await peek.scalars(select(JobRow).where(JobRow.state == "queued").order_by(JobRow.pk))
            ).all()
        grants = [Grant(job.pk, device, "lab-a", "s") for job, device in zip(queued, devices, strict=False)]
        return len(await grant_leases(session, grants, db.clock(), TTL))


async def _skip_locked_dispatcher(db: Database, devices: list[str]) -> int:
    async with db.sessions() as session, session.begin():
        queued = await take_queued_jobs(session)
        grants = [
            Grant(job.pk, device, "lab-a", job.session_id)
            for job, device in zip(queued, devices, strict=False)
        ]
        return len(await grant_leases(session, grants, db.clock(), TTL))


async def _check_exclusive(db: Database, jobs: int) -> None:
    async with db.sessions() as session:
        leases = (await session.execute(select(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk))).all()
        leased_jobs = (
            await session.execute(select(JobRow.pk, JobRow.device_id).where(JobRow.state == "leased"))
        ).all()
        queued = await session.scalar(
            select(func.count()).select_from(JobRow).where(JobRow.state == "queued")
        )
    assert len({device for device, _ in leases}) == len(leases)  # no device twice
    assert len({job for _, job in leases}) == len(leases)  # no job twice
    assert sorted((job, device) for device, job in leases) == sorted(leased_jobs)
    assert len(leases) == min(jobs, len(DEVICES))
    assert queued == jobs - len(leases)


async def test_two_dispatchers_racing_never_lease_a_device_twice(database_url: str, db: Database) -> None:
    await queue_jobs(db, 30)
    replica = Database.connect(database_url, db.clock)  # a second kerrigan serve on the same database
    try:
        for _ in range(3):
            await asyncio.gather(
                _naive_dispatcher(db, DEVICES), _naive_dispatcher(replica, list(reversed(DEVICES)))
            )
    finally:
        await replica.close()
    await _check_exclusive(db, 30)


async def test_dispatchers_taking_jobs_with_skip_locked_share_the_queue_without_overlap(
    database_url: str, db: Database
) -> None:
    await queue_jobs(db, 30)
    replicas = [Database.connect(database_url, db.clock) for _ in range(3)]
    try:
        granted = await asyncio.gather(*(_skip_locked_dispatcher(r, DEVICES) for r in replicas))
        granted += await asyncio.gather(*(_skip_locked_dispatcher(r, DEVICES) for r in replicas))
    finally:
        for replica in replicas:
            await replica.close()
    assert sum(granted) == len(DEVICES)
    await _check_exclusive(db, 30)


async def test_a_round_waits_for_another_replicas_round_instead_of_skipping_its_jobs(
    database_url: str, db: Database
) -> None:
    """Two replicas' rounds that overlapped lost a freed board (the lab week on PostgreSQL, issue 31): the
    second skipped every job the first held, and the first had read the devices before the board was
    freed. The second now waits for the first, then takes what it left."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's write lock serializes rounds; only PostgreSQL's replicas overlap")
    await queue_jobs(db, 2)
    replica = Database.connect(database_url, db.clock)  # a second kerrigan serve on the same database
    try:
        async with db.sessions() as session, session.begin():
            first, second = await take_queued_jobs(session)
            other = asyncio.create_task(_skip_locked_dispatcher(replica, ["dev-01"]))
            await asyncio.sleep(0.5)
            assert not other.done()  # waiting for this round, not skipping the jobs it holds
            grant = Grant(first.pk, "dev-00", "lab-a", first.session_id)
            assert len(await grant_leases(session, [grant], db.clock(), TTL)) == 1
        assert await asyncio.wait_for(other, 10) == 1  # then it leases the job this round left
    finally:
        await replica.close()
    async with db.sessions() as session:
        leases = dict((await session.execute(select(DeviceLeaseRow.job_pk, DeviceLeaseRow.device_id))).all())
    assert leases == {first.pk: "dev-00", second.pk: "dev-01"}


async def test_a_round_held_too_long_is_passed_by_the_other_replicas(
    database_url: str, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica cut off mid-round (its connection half-open) must not stop every other's dispatch: after
    ROUND_WAIT_S the round goes on, skipping only the jobs the stuck one holds."""
    if db.engine.dialect.name != "postgresql":
        pytest.skip("SQLite's write lock serializes rounds; only PostgreSQL's replicas overlap")
    monkeypatch.setattr(leases, "ROUND_WAIT_S", 0.3)
    await queue_jobs(db, 1)
    replica = Database.connect(database_url, db.clock)
    try:
        async with db.sessions() as session, session.begin():
            [held] = await take_queued_jobs(session)  # the stuck round
            await queue_jobs(replica, 1, "22222222-2222-2222-2222-222222222222")  # queued meanwhile
            other = asyncio.create_task(_skip_locked_dispatcher(replica, ["dev-01"]))
            assert await asyncio.wait_for(other, 10) == 1  # done while the stuck round still holds
        async with db.sessions() as session:
            leases_now = dict(
                (await session.execute(select(DeviceLeaseRow.job_pk, DeviceLeaseRow.device_id))).all()
            )
        assert held.pk not in leases_now
        assert list(leases_now.values()) == ["dev-01"]
    finally:
        await replica.close()


async def test_freeing_a_jobs_stale_lease_leaves_a_lease_granted_to_another_job_meanwhile(
    db: Database,
) -> None:
    await queue_jobs(db, 2)
    async with db.sessions() as session, session.begin():
        first, second = await take_queued_jobs(session)
        await grant_leases(session, [Grant(second.pk, "dev-00", "lab-a", second.session_id)], db.clock(), TTL)
        await release_lease(session, "dev-00", first.pk)  # a replica's stale view: dev-00 was first's
        assert await leased_devices(session) == {"dev-00"}
