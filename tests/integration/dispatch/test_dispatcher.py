"""Dispatch rounds on a real database: queued jobs get free, matching devices in queue order."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import diff_inventories
from kerrigan.core.inventory_file import parse_inventory
from kerrigan.core.lifecycle import NO_RETRY, RetryPolicy
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.inventory import apply_diff
from kerrigan.store.leases import leased_devices
from kerrigan.store.models import JobRow, RunnerHostRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.agents_spoke import hear_hosts
from kerrigan.testing.clock import FakeClock

ROOT = Path(__file__).resolve().parents[3]
SOM_UART = {"labels": {"sdk": ["2.2.0"], "form_factor": ["som"]}, "tags": ["uart-debug"]}


async def lab(db: Database) -> None:
    inventory = parse_inventory(
        (ROOT / "fixtures/inventory/lab.yml").read_text(encoding="utf-8"), "lab"
    ).inventory
    assert inventory is not None
    async with db.sessions() as session, session.begin():
        await apply_diff(
            session, inventory, diff_inventories(Inventory(), inventory), Change("t", db.clock())
        )
    await hear_hosts(db)  # its runner hosts' agents have spoken: the tests play their part


async def queue(
    db: Database,
    session_id: str,
    tasks: dict[str, dict[str, Any]],
    *,
    max_devkits: int = 4,
    repository: str = "octo/firmware",
    vcpus: int = 2,
    retry: RetryPolicy = NO_RETRY,
) -> None:
    resolution = {
        "tasks": [{"id": task, "requested": requested} for task, requested in tasks.items()],
        "scheduling": {"max_devkits": max_devkits, "strategy": "spread", "priority": "normal"},
    }
    new = builders.session(
        session_id, tasks, repository=repository, resolution=resolution, vcpus=vcpus, retry=retry
    )
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())


async def leases_by_task(db: Database) -> dict[str, str]:
    async with db.sessions() as session:
        rows = await session.execute(select(JobRow.task_id, JobRow.device_id).where(JobRow.state == "leased"))
        return dict(rows.all())


async def test_queued_jobs_get_free_devices_that_match_their_requirements(db: Database) -> None:
    await lab(db)
    await queue(db, "44444444-4444-4444-4444-444444444444", {"smoke": SOM_UART, "boot": SOM_UART})
    result = await Dispatcher(db).dispatch_once()
    assert len(result.granted) == 2
    assert set((await leases_by_task(db)).values()) == {"modalix-bluebox", "modalix-redbox"}


async def test_a_session_holds_at_most_max_devkits_devices(db: Database) -> None:
    await lab(db)
    await queue(db, "55555555-5555-5555-5555-555555555555", {"a": SOM_UART, "b": SOM_UART}, max_devkits=1)
    await Dispatcher(db).dispatch_once()
    assert len(await leases_by_task(db)) == 1


async def test_a_leased_device_is_not_leased_again_until_it_is_released(db: Database) -> None:
    await lab(db)
    await queue(db, "66666666-6666-6666-6666-666666666666", {"a": SOM_UART, "b": SOM_UART, "c": SOM_UART})
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    await dispatcher.dispatch_once()
    async with db.sessions() as session:
        assert len(await leased_devices(session)) == 2
        waiting = await session.scalar(select(JobRow.pk).where(JobRow.state == "queued"))
    assert waiting is not None


async def test_a_runner_hosts_max_weight_bounds_the_vcpus_leased_on_it(db: Database) -> None:
    await lab(db)
    async with db.sessions() as session, session.begin():
        for host in ("lab-a-01", "lab-a-02"):
            row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host))
            assert row is not None
            row.resources = {"max_weight": 4}
    await queue(db, "77777777-7777-7777-7777-777777777777", {"big": SOM_UART}, vcpus=8)
    result = await Dispatcher(db).dispatch_once()
    assert result.granted == ()
    assert result.plan is not None
    [reason] = result.plan.waiting.values()
    assert reason.kind.value == "capacity"


async def test_a_job_whose_runner_went_silent_is_queued_again_once_then_fails(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, "88888888-8888-8888-8888-888888888888", {"smoke": SOM_UART}, max_devkits=1)
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    clock.advance(61)
    assert len(await dispatcher.expire()) == 1
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert (job.state, job.reason) == ("queued", "runner_lost")
    await dispatcher.dispatch_once()
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow))
        assert job is not None
        host = job.host
        assert host is not None
        await jobs.accept(session, str(job.pk), host, db.clock())
        await jobs.start(session, str(job.pk), host, db.clock())
    clock.advance(61)
    await dispatcher.expire()
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert (job.state, job.reason) == ("failed", "runner_lost")
        assert await leased_devices(session) == set()


async def test_nothing_queued_is_a_quiet_round(db: Database) -> None:
    result = await Dispatcher(db, lease_ttl_s=timedelta(seconds=60).total_seconds()).dispatch_once()
    assert (result.granted, result.plan) == ((), None)


async def admit_only(db: Database, pool_id: str, *globs: str) -> None:
    """Give ``pool_id`` a repositories list, as an admin's edit would."""
    import dataclasses

    from kerrigan.store.inventory import load_inventory

    async with db.sessions() as session, session.begin():
        before = await load_inventory(session)
        pools = tuple(
            dataclasses.replace(pool, repositories=globs) if pool.id == pool_id else pool
            for pool in before.pools
        )
        after = dataclasses.replace(before, pools=pools)
        await apply_diff(session, after, diff_inventories(before, after), Change("t", db.clock()))


async def test_a_pool_that_does_not_admit_the_repository_never_leases_it_a_device(db: Database) -> None:
    # The list is applied at dispatch too, not only when the session was resolved: one added after the
    # session was queued holds.
    await lab(db)
    await queue(db, "77777777-7777-7777-7777-777777777777", {"smoke": SOM_UART}, repository="octo/other")
    await admit_only(db, "sdk-2-2-som", "octo-lab/*")
    result = await Dispatcher(db).dispatch_once()
    assert not result.granted
    assert await leases_by_task(db) == {}


async def test_a_repository_a_pool_admits_by_glob_is_leased_its_devices(db: Database) -> None:
    await lab(db)
    await admit_only(db, "sdk-2-2-som", "Octo-Lab/*")
    session_id = "88888888-8888-8888-8888-888888888888"
    await queue(db, session_id, {"smoke": SOM_UART}, repository="octo-lab/firmware")
    await Dispatcher(db).dispatch_once()
    assert set((await leases_by_task(db)).values()) <= {"modalix-bluebox", "modalix-redbox"}
    assert len(await leases_by_task(db)) == 1


async def test_a_device_whose_host_can_never_fit_the_claim_is_never_leased(db: Database) -> None:
    # The session was resolved before the hosts reported their CPUs: the dispatcher holds the claim
    # against the reports it has now.
    await lab(db)
    await queue(db, "99999999-9999-9999-9999-999999999999", {"smoke": SOM_UART}, vcpus=8)
    async with db.sessions() as session, session.begin():
        for host in (await session.scalars(select(RunnerHostRow))).all():
            host.resources = {"vcpus": 2}
    result = await Dispatcher(db).dispatch_once()
    assert not result.granted
    assert await leases_by_task(db) == {}
