"""A pool's health check that cannot run, on a real database: ``check_broken``, the boards keep their health.

Issue 28: a check whose command the job cannot find (exit 127) set every available board of its pool bad at
once. Now its jobs end ``check_broken``, the devices keep their health, and the pool's audit log says when
the check broke and when it worked again. The same failure on every device within an hour is broken too:
the device it set bad first gets its health back.
"""

from __future__ import annotations

import dataclasses

from sqlalchemy import select

from kerrigan.core.health_checks import HealthCheck
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.health_checks.ends import CHECK_STATE_FIELD
from kerrigan.store.health_checks.queueing import queue_check
from kerrigan.store.inventory import get_pool, save_pool
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import lab

POOL = "sdk-2-2-som"
BLUEBOX, REDBOX = "modalix-bluebox", "modalix-redbox"  # its available devices on online hosts


async def pool_check(db: Database, run: str) -> None:
    async with db.sessions() as session, session.begin():
        stored = await get_pool(session, POOL)
        check = HealthCheck(run)
        await save_pool(
            session, dataclasses.replace(stored.pool, health_check=check), Change("octocat", db.clock())
        )


async def run_checks(db: Database, exits: dict[str, int]) -> dict[str, int]:
    """Queue, dispatch, start and finish the check of each device with its exit status; their job pks."""
    async with db.sessions() as session, session.begin():
        pks = {
            device: (await queue_check(session, device, db.clock(), why="asked")).job_pk for device in exits
        }
    granted = {g.device_id: g.host for g in (await Dispatcher(db).dispatch_once()).granted}
    assert set(granted) == set(exits), granted
    for device, exit_status in exits.items():
        job_id, host = str(pks[device]), granted[device]
        async with db.sessions() as session, session.begin():
            await jobs.accept(session, job_id, host, db.clock())
            await jobs.start(session, job_id, host, db.clock())
        async with db.sessions() as session, session.begin():
            await jobs.finish(session, job_id, host, db.clock(), exit_status=exit_status, accounting=None)
    return pks


async def health(db: Database, device_id: str) -> tuple[str, str]:
    async with db.sessions() as session:
        row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device_id))
        assert row is not None
        return row.health.value, row.health_reason


async def reasons(db: Database, pks: dict[str, int]) -> dict[str, str | None]:
    async with db.sessions() as session:
        return {device: (await session.get(JobRow, pk)).reason for device, pk in pks.items()}  # type: ignore[union-attr]


async def pool_entries(db: Database) -> list[tuple[object, object]]:
    async with db.sessions() as session:
        entries = await list_audit(session, pool_id=POOL)
    return [(entry.before, entry.after) for entry in reversed(entries) if entry.field == CHECK_STATE_FIELD]


async def test_exit_127_on_every_board_keeps_their_health_and_the_audit_log_says_so(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await pool_check(db, "/opt/lab/health/modalix.sh")
    await run_checks(db, {BLUEBOX: 0})
    assert await health(db, BLUEBOX) == ("good", "health check passed")
    await pool_check(db, "/opt/lab/health/missing.sh")
    clock.advance(600)
    pks = await run_checks(db, {BLUEBOX: 127, REDBOX: 127})
    assert await health(db, BLUEBOX) == ("good", "health check passed")  # not bad at once, as before
    assert await health(db, REDBOX) == ("unknown", "")
    assert await reasons(db, pks) == {BLUEBOX: "check_broken", REDBOX: "check_broken"}
    broken = (
        "check_broken: /opt/lab/health/missing.sh fails, exit 127 on modalix-bluebox (command not found); "
        "the devices keep their health"
    )
    assert await pool_entries(db) == [("works", broken)]  # once, when it broke: not once per board
    # The path fixed in the pool: another command, another check (the pool's own entry says it changed).
    await pool_check(db, "/opt/lab/health/modalix.sh")
    clock.advance(600)
    await run_checks(db, {REDBOX: 0})
    assert await health(db, REDBOX) == ("good", "health check passed")
    assert len(await pool_entries(db)) == 1


async def test_the_same_failure_on_both_boards_within_an_hour_gives_the_first_its_health_back(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await pool_check(db, "/opt/lab/health/modalix.sh")
    await run_checks(db, {BLUEBOX: 0})
    clock.advance(600)
    first = await run_checks(db, {BLUEBOX: 3})
    assert await health(db, BLUEBOX) == ("bad", "health check failed")  # one board failing: that board's
    clock.advance(20 * 60)
    second = await run_checks(db, {REDBOX: 3})
    assert await health(db, REDBOX) == ("unknown", "")
    assert await health(db, BLUEBOX) == ("good", "health check passed")  # what it had before
    assert await reasons(db, first | second) == {BLUEBOX: "check_broken", REDBOX: "check_broken"}
    async with db.sessions() as session:
        bluebox = [
            (entry.before, entry.after)
            for entry in reversed(await list_audit(session, device_id=BLUEBOX))
            if entry.field == "health"
        ]
    assert bluebox[-2:] == [
        ("good: health check passed", "bad: health check failed"),
        ("bad: health check failed", "good: health check passed"),
    ]
    broken = (
        "check_broken: /opt/lab/health/modalix.sh fails, exit 3 on modalix-bluebox, modalix-redbox; "
        "the devices keep their health"
    )
    assert await pool_entries(db) == [("works", broken)]
    # It passes again: it works, and the audit log says so.
    clock.advance(600)
    await run_checks(db, {BLUEBOX: 0})
    assert await pool_entries(db) == [("works", broken), (broken, "works: passed on modalix-bluebox")]


async def test_one_board_failing_while_its_peer_passes_is_set_bad(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await pool_check(db, "/opt/lab/health/modalix.sh")
    await run_checks(db, {REDBOX: 0})
    clock.advance(600)
    pks = await run_checks(db, {BLUEBOX: 3})
    assert await health(db, BLUEBOX) == ("bad", "health check failed")
    assert await reasons(db, pks) == {BLUEBOX: None}
    assert await pool_entries(db) == []


async def test_a_different_failure_on_each_board_sets_both_bad(db: Database, clock: FakeClock) -> None:
    await lab(db)
    await pool_check(db, "/opt/lab/health/modalix.sh")
    await run_checks(db, {BLUEBOX: 3, REDBOX: 4})
    assert await health(db, BLUEBOX) == ("bad", "health check failed")
    assert await health(db, REDBOX) == ("bad", "health check failed")
    assert await pool_entries(db) == []
