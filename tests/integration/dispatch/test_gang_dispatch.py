"""Gang jobs on a real database: every role's device on one runner host, leased together or not at all,
offered with each role's device, and all freed when the job ends."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.leases import Grant, grant_leases, leased_devices
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.history import runs_of
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab, queue

MODALIX = {"labels": {"kerrigan.board": ["modalix"]}, "tags": []}
DAVINCI = {"labels": {"kerrigan.board": ["davinci"]}, "tags": []}
PAIR = {"labels": {}, "tags": [], "roles": [{"role": "dut", **MODALIX}, {"role": "peer", **DAVINCI}]}
# Only lab-b-01 holds both boards (davinci-som-01's host, lab-b-02, is offline).
ON_LAB_B_01 = {"modalix-old-02", "davinci-old-01"}


async def test_a_gang_gets_a_device_for_every_role_on_one_runner_host(db: Database) -> None:
    await lab(db)
    await queue(db, "11111111-1111-1111-1111-111111111111", {"pair": PAIR})
    result = await Dispatcher(db).dispatch_once()
    assert {(g.role, g.device_id, g.host) for g in result.granted} == {
        ("dut", "modalix-old-02", "lab-b-01"),
        ("peer", "davinci-old-01", "lab-b-01"),
    }
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert (job.state, job.device_id, job.host) == ("leased", "modalix-old-02", "lab-b-01")
        assert job.devices == [
            {"role": "dut", "device": "modalix-old-02"},
            {"role": "peer", "device": "davinci-old-01"},
        ]
        [offer] = await jobs.offers(session, "lab-b-01")  # one offer, not one per device
        assert offer.roles == (("dut", "modalix-old-02"), ("peer", "davinci-old-01"))


async def test_a_gang_waits_holding_nothing_while_one_role_is_busy(db: Database) -> None:
    await lab(db)
    await queue(db, "22222222-2222-2222-2222-222222222222", {"other": DAVINCI}, max_devkits=1)
    await queue(db, "33333333-3333-3333-3333-333333333333", {"pair": PAIR})
    dispatcher = Dispatcher(db)
    first = await dispatcher.dispatch_once()
    assert [g.device_id for g in first.granted] == ["davinci-old-01"]
    async with db.sessions() as session:
        assert await leased_devices(session) == {"davinci-old-01"}  # modalix-old-02 is not held for the gang
        other = await session.scalar(select(JobRow).where(JobRow.task_id == "other"))
        assert other is not None
    assert first.plan is not None
    waiting = [w for w in first.plan.waiting.values() if w.roles]
    assert [str(count) for count in waiting[0].roles] == [
        "role dut: 6/6 devices free",
        "role peer: 0/1 device free",
    ]
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(other.pk), "lab-b-01", db.clock())
        await jobs.start(session, str(other.pk), "lab-b-01", db.clock())
        await jobs.finish(session, str(other.pk), "lab-b-01", db.clock(), exit_status=0, accounting=None)
    second = await dispatcher.dispatch_once()
    assert {g.device_id for g in second.granted} == ON_LAB_B_01


async def test_a_gang_whose_device_was_taken_meanwhile_gets_none_of_its_devices(db: Database) -> None:
    await lab(db)
    await queue(db, "44444444-4444-4444-4444-444444444444", {"pair": PAIR, "solo": SOM_UART})
    async with db.sessions() as session:
        pair = await session.scalar(select(JobRow.pk).where(JobRow.task_id == "pair"))
        solo = await session.scalar(select(JobRow.pk).where(JobRow.task_id == "solo"))
    assert pair is not None
    assert solo is not None
    session_id = "44444444-4444-4444-4444-444444444444"
    async with db.sessions() as session, session.begin():
        # Another dispatcher leased davinci-old-01 a moment before this one writes its plan.
        taken = await grant_leases(
            session,
            [Grant(solo, "davinci-old-01", "lab-b-01", session_id)],
            db.clock(),
            Dispatcher(db).lease_ttl,
        )
        assert len(taken) == 1
        granted = await grant_leases(
            session,
            [
                Grant(pair, "modalix-old-02", "lab-b-01", session_id, "dut"),
                Grant(pair, "davinci-old-01", "lab-b-01", session_id, "peer"),
            ],
            db.clock(),
            Dispatcher(db).lease_ttl,
        )
        assert granted == []
    async with db.sessions() as session:
        rows = (await session.execute(select(DeviceLeaseRow.device_id, DeviceLeaseRow.job_pk))).all()
        assert [tuple(row) for row in rows] == [("davinci-old-01", solo)]
        job = await session.get(JobRow, pair)
        assert job is not None
        assert (job.state, job.device_id, job.devices) == ("queued", None, [])


async def test_a_gang_that_ends_frees_every_device_it_held(db: Database) -> None:
    await lab(db)
    await queue(db, "55555555-5555-5555-5555-555555555555", {"pair": PAIR})
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    async with db.sessions() as session, session.begin():
        job_pk = await session.scalar(select(JobRow.pk))
        assert job_pk is not None
        assert await leased_devices(session) == ON_LAB_B_01
        await jobs.accept(session, str(job_pk), "lab-b-01", db.clock())
        await jobs.start(session, str(job_pk), "lab-b-01", db.clock())
        assert await jobs.held_jobs(session, "lab-b-01") == {str(job_pk): "running"}
        await jobs.finish(session, str(job_pk), "lab-b-01", db.clock(), exit_status=0, accounting=None)
    async with db.sessions() as session:
        assert await leased_devices(session) == set()


async def test_a_gang_whose_runner_went_silent_is_queued_again_once_with_every_device_freed(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, "66666666-6666-6666-6666-666666666666", {"pair": PAIR})
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    clock.advance(61)
    lost = await dispatcher.expire()
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert lost == (job.pk,)  # once, though both of its leases ran out
        assert (job.state, job.reason, job.device_id, job.devices) == ("queued", "runner_lost", None, [])
        assert await leased_devices(session) == set()


async def test_a_gang_retried_where_only_its_failed_host_can_hold_it_takes_again_only_what_it_must(
    db: Database,
) -> None:
    """Each role has other candidates (modalix boards elsewhere, davinci-som-01 on lab-b-02), but no other
    host holds one of each: avoiding the devices it failed on would keep the retry queued until its
    queue-wait budget ran out (found by benchmarks/soak_lab_week.py: a rig of scarce boards). So it goes
    back to lab-b-01, taking again only the davinci there, the one no other can replace: the dut is
    another modalix of that host, not the board it failed on (a second reviewer's find)."""
    await lab(db)
    await queue(db, "77777777-7777-7777-7777-777777777777", {"pair": PAIR}, retry=RetryPolicy())
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    async with db.sessions() as session, session.begin():
        job_pk = await session.scalar(select(JobRow.pk))
        assert job_pk is not None
        await jobs.accept(session, str(job_pk), "lab-b-01", db.clock())
        await jobs.start(session, str(job_pk), "lab-b-01", db.clock())
        await jobs.finish(session, str(job_pk), "lab-b-01", db.clock(), exit_status=75, accounting=None)
    result = await dispatcher.dispatch_once()
    assert {(g.role, g.device_id, g.host) for g in result.granted} == {
        ("dut", "pcie-card-01", "lab-b-01"),
        ("peer", "davinci-old-01", "lab-b-01"),
    }
    async with db.sessions() as session:
        retry = await session.scalar(select(JobRow).where(JobRow.attempt == 2))
        assert retry is not None
        assert set(retry.avoid_devices) == ON_LAB_B_01
        assert retry.state == "leased"


async def test_a_gang_failed_on_a_suspect_that_no_host_can_hold_without_it_is_not_retried(
    db: Database,
) -> None:
    """A suspect retry avoids its devices for good: unless one host holds an unsuspected device for every
    role, the retry could only wait out its queue-wait budget and end for the lab. Here the dut role has
    other modalix boards, but the only other davinci is on lab-b-02, which holds no modalix: the failure
    stands, saying there was no peer (a second reviewer's find)."""
    await lab(db)
    await queue(db, "77777777-7777-7777-7777-777777777777", {"pair": PAIR}, retry=RetryPolicy())
    dispatcher = Dispatcher(db)
    [grant, _] = (await dispatcher.dispatch_once()).granted
    await runs_of(db, "modalix-old-02", runs=10, failures=8, task="pair")
    await runs_of(db, "pcie-card-01", runs=20, failures=0, task="pair")
    async with db.sessions() as session, session.begin():
        job_pk = str(grant.job_pk)
        await jobs.accept(session, job_pk, "lab-b-01", db.clock())
        await jobs.start(session, job_pk, "lab-b-01", db.clock())
        await jobs.finish(session, job_pk, "lab-b-01", db.clock(), exit_status=1, accounting=None)
    async with db.sessions() as session:
        failed = await session.get(JobRow, grant.job_pk)
        assert failed is not None
        assert await session.scalar(select(JobRow).where(JobRow.retry_of == grant.job_pk)) is None
        assert (failed.device_id, failed.state, failed.suspect_retry) == (
            "modalix-old-02",
            "failed",
            "no_peer",
        )
        assert (failed.suspect_runs, failed.suspect_failures) == (11, 9)
