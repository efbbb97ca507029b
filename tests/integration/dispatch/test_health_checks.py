"""Health checks on a real database: queued by each trigger, dispatched ahead of work, setting health.

A check is a session of its own with no repository and no check run, one job pinned to its device in the
gate tier; it runs on a bad device (not on one in maintenance, nor on a paused host), and its end sets the
device good or bad without counting as an infrastructure failure and without a retry.
"""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import func, select

from kerrigan.core.device_status import HostPause
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import DeviceState
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.health_checks.queueing import NoHealthCheckError, pending_check, queue_check
from kerrigan.store.inventory import end_due_maintenance, get_device, save_device, set_state
from kerrigan.store.models import DeviceRow, JobRow, SessionRow
from kerrigan.store.runners import set_pause
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_device_health import BLUEBOX, run_one
from tests.integration.dispatch.test_dispatcher import lab, queue

DEVICE = "modalix-bluebox"


async def give_check(db: Database, check: HealthCheck | None, device_id: str = DEVICE) -> None:
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, device_id)
        await save_device(
            session, dataclasses.replace(stored.device, health_check=check), Change("octocat", db.clock())
        )


async def ask(db: Database, device_id: str = DEVICE) -> int:
    async with db.sessions() as session, session.begin():
        found = await queue_check(session, device_id, db.clock(), why="asked")
    assert found.queued
    return found.job_pk


async def check_jobs(db: Database, device_id: str = DEVICE) -> list[JobRow]:
    async with db.sessions() as session:
        rows = await session.scalars(
            select(JobRow)
            .join(SessionRow, JobRow.session_pk == SessionRow.pk)
            .where(SessionRow.health_check_device == device_id)
            .order_by(JobRow.pk)
        )
        return list(rows.all())


async def run_check(db: Database, dispatcher: Dispatcher, job_pk: int, exit_status: int) -> None:
    """Dispatch, accept, start and finish the check ``job_pk`` with ``exit_status``."""
    granted = (await dispatcher.dispatch_once()).granted
    assert [(g.job_pk, g.device_id) for g in granted] == [(job_pk, DEVICE)], granted
    host = granted[0].host
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(job_pk), host, db.clock())
        await jobs.start(session, str(job_pk), host, db.clock())
    async with db.sessions() as session, session.begin():
        await jobs.finish(session, str(job_pk), host, db.clock(), exit_status=exit_status, accounting=None)


async def health(db: Database, device_id: str = DEVICE) -> tuple[str, str, int | None, int]:
    async with db.sessions() as session:
        row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device_id))
        assert row is not None
        return row.health, row.health_reason, row.health_job_pk, row.infrastructure_failures


async def test_a_passing_check_sets_the_device_good_with_its_job_and_sends_no_check_run(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("/opt/lab/health/modalix.sh", timeout_s=60, vcpus=1))
    job_pk = await ask(db)
    async with db.sessions() as session:
        job = await session.get(JobRow, job_pk)
        assert job is not None
        run = await session.get(SessionRow, job.session_pk)
        assert run is not None
        assert (job.command, job.vcpus, job.timeout_s) == ("/opt/lab/health/modalix.sh", 1, 60)
        assert job.requirements == {"labels": {"kerrigan.target_id": [DEVICE]}, "tags": []}
        assert (run.repository, run.event, run.priority, run.installation_id) == (
            "",
            "health_check",
            "gate",
            None,
        )
    await run_check(db, Dispatcher(db), job_pk, 0)
    assert await health(db) == ("good", "health check passed", job_pk, 0)
    async with db.sessions() as session:
        run = await session.get(SessionRow, job.session_pk)
        assert run is not None
        assert (run.state, run.conclusion) == ("completed", "success")
        assert (run.version, run.sync_due_at) == (0, None)  # the reconciler never sends one


async def test_a_failing_check_sets_the_device_bad_is_not_retried_and_keeps_work_off_it(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("false"))
    dispatcher = Dispatcher(db)
    job_pk = await ask(db)
    await run_check(db, dispatcher, job_pk, 1)
    assert await health(db) == ("bad", "health check failed", job_pk, 0)  # not an infrastructure failure
    assert [row.state for row in await check_jobs(db)] == ["failed"]
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    assert (await dispatcher.dispatch_once()).granted == ()
    # The bad device still takes its own next check, and passing it brings the device back.
    await give_check(db, HealthCheck("true"))
    again = await ask(db)
    await run_check(db, dispatcher, again, 0)
    assert (await health(db))[:2] == ("good", "health check passed")
    assert [g.device_id for g in (await dispatcher.dispatch_once()).granted] == [DEVICE]


async def test_a_check_goes_ahead_of_work_queued_before_it(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    job_pk = await ask(db)
    granted = (await Dispatcher(db).dispatch_once()).granted
    assert [(g.job_pk, g.device_id) for g in granted] == [(job_pk, DEVICE)]


async def test_a_second_check_is_not_queued_while_one_is_queued_or_running(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    job_pk = await ask(db)
    async with db.sessions() as session, session.begin():
        again = await queue_check(session, DEVICE, db.clock(), why="asked again")
    assert (again.job_pk, again.queued) == (job_pk, False)
    await Dispatcher(db).dispatch_once()
    async with db.sessions() as session, session.begin():
        assert await pending_check(session, DEVICE) == job_pk  # leased: still pending
    assert len(await check_jobs(db)) == 1


async def test_a_device_without_a_check_gets_none(db: Database) -> None:
    await lab(db)
    async with db.sessions() as session, session.begin():
        with pytest.raises(NoHealthCheckError):
            await queue_check(session, DEVICE, db.clock(), why="asked")


async def test_a_check_never_runs_in_maintenance_or_on_a_paused_host(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    async with db.sessions() as session, session.begin():
        await set_state(
            session, DEVICE, DeviceState.MAINTENANCE, "rewiring", until=None, change=Change("o", db.clock())
        )
    await ask(db)
    dispatcher = Dispatcher(db)
    assert (await dispatcher.dispatch_once()).granted == ()
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, DEVICE)
        pause = HostPause("kernel upgrade", "octocat", db.clock())
        await set_pause(session, stored.device.host, pause, Change("octocat", db.clock()))
        await set_state(
            session, DEVICE, DeviceState.AVAILABLE, "", until=None, change=Change("o", db.clock())
        )
    assert (await dispatcher.dispatch_once()).granted == ()


async def test_a_check_that_never_started_leaves_health_alone(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    job_pk = await ask(db)
    granted = (await Dispatcher(db).dispatch_once()).granted
    async with db.sessions() as session, session.begin():
        await jobs.refuse(
            session, str(job_pk), granted[0].host, db.clock(), reason="invalid_claim", detail="x"
        )
    assert (await health(db))[:2] == ("unknown", "")


async def test_every_queues_a_check_on_an_idle_device_whose_last_check_is_older(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true", every_s=3600))
    dispatcher = Dispatcher(db, lease_ttl_s=24 * 3600)  # no heartbeats here: the runner must not be lost
    await dispatcher.expire()
    first = await check_jobs(db)
    assert len(first) == 1  # never checked: due at once
    clock.advance(60)
    await dispatcher.expire()
    assert len(await check_jobs(db)) == 1  # one is pending
    await run_check(db, dispatcher, first[0].pk, 0)
    clock.advance(30 * 60)
    await dispatcher.expire()
    assert len(await check_jobs(db)) == 1  # its last check is newer than an hour
    running = await run_one(db, dispatcher)  # the device is busy when the hour is up: no check now
    clock.advance(31 * 60)
    await dispatcher.expire()
    assert len(await check_jobs(db)) == 1
    assert running.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.finish(session, str(running.pk), running.host, db.clock(), exit_status=0, accounting=None)
    clock.advance(31)
    await dispatcher.expire()
    assert [row.state for row in await check_jobs(db)] == ["succeeded", "queued"]


async def test_an_infrastructure_failure_queues_a_check_instead_of_counting(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    assert job.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.finish(session, str(job.pk), job.host, db.clock(), exit_status=75, accounting=None)
    assert [row.state for row in await check_jobs(db)] == ["queued"]
    assert (await health(db))[3] == 0


async def test_an_infrastructure_failure_without_a_check_counts_and_queues_nothing(db: Database) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    assert job.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.finish(session, str(job.pk), job.host, db.clock(), exit_status=75, accounting=None)
    assert await check_jobs(db) == []
    assert (await health(db))[3] == 1


async def test_returning_from_maintenance_queues_a_check(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"))
    change = Change("octocat", db.clock())
    async with db.sessions() as session, session.begin():
        await set_state(session, DEVICE, DeviceState.MAINTENANCE, "cable", until=None, change=change)
    assert await check_jobs(db) == []
    async with db.sessions() as session, session.begin():
        await set_state(session, DEVICE, DeviceState.AVAILABLE, "", until=None, change=change)
    assert [row.state for row in await check_jobs(db)] == ["queued"]


async def test_a_maintenance_ending_by_itself_queues_a_check(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await give_check(db, HealthCheck("true"), "modalix-redbox")
    async with db.sessions() as session, session.begin():
        await set_state(
            session,
            "modalix-redbox",
            DeviceState.MAINTENANCE,
            "reflash",
            until=db.clock() + timedelta(minutes=5),
            change=Change("octocat", db.clock()),
        )
    clock.advance(6 * 60)
    async with db.sessions() as session, session.begin():
        assert await end_due_maintenance(session, db.clock()) == ["modalix-redbox"]
    assert [row.state for row in await check_jobs(db, "modalix-redbox")] == ["queued"]
    async with db.sessions() as session:
        count = await session.scalar(select(func.count()).select_from(SessionRow))
    assert count == 1
