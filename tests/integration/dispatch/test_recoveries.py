"""Board recoveries on a real database, as the runner protocol drives them: a job that ends in doubt on a
board its runner powered off (or could not: its power silent) queues a recovery of that board (ahead of its
next job); the recovery's end makes the board good, queues the next one, or, the third failure in a row,
makes it bad with its console's last lines. A recovery whose power did not answer is queued again without
counting, until the power has been silent for an hour. What the runner names that is not the job's own
board is ignored."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from kerrigan.core.device_status import Health
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.lifecycle import JobState
from kerrigan.core.log_streams import LogStream
from kerrigan.core.recovery import POWER_WAIT_FOR_BAD_S, RECOVERY_COMMAND, RECOVERY_TASK
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.metrics import DEVICE_RECOVERIES
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.jobs.output import append_log
from kerrigan.store.models import DeviceRow, JobRow, SessionRow
from kerrigan.store.signals import RecoveryEnded
from kerrigan.testing.clock import FakeClock
from kerrigan.web.metrics import count_fact
from tests.integration.dispatch.test_device_health import run_one
from tests.integration.dispatch.test_dispatcher import lab
from tests.integration.dispatch.test_health_checks import give_check

BLUEBOX = "modalix-bluebox"


async def finish(
    db: Database,
    job: JobRow,
    exit_status: int,
    outcome: str | None = None,
    powered_off: tuple[str, ...] = (BLUEBOX,),
    power_unknown: tuple[str, ...] = (),
) -> None:
    assert job.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.finish(
            session,
            str(job.pk),
            job.host,
            db.clock(),
            exit_status=exit_status,
            accounting=None,
            outcome=outcome,
            powered_off=powered_off,
            power_unknown=power_unknown,
        )


async def recoveries(db: Database) -> list[JobRow]:
    async with db.sessions() as session:
        rows = await session.scalars(
            select(JobRow).where(JobRow.task_id == RECOVERY_TASK).order_by(JobRow.pk)
        )
        return list(rows.all())


async def device(db: Database, device_id: str = BLUEBOX) -> DeviceRow:
    async with db.sessions() as session:
        row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device_id))
    assert row is not None
    return row


async def run_recovery(db: Database, dispatcher: Dispatcher, *, start: bool = True) -> JobRow:
    """Lease, accept and (``start``) start the board's queued recovery (it goes first: the gate tier)."""
    result = await dispatcher.dispatch_once()
    assert [grant.device_id for grant in result.granted] == [BLUEBOX], result.plan
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow).where(JobRow.state == "leased"))
        assert job is not None
        assert job.host is not None
        assert job.task_id == RECOVERY_TASK
        await jobs.accept(session, str(job.pk), job.host, db.clock())
        if start:
            await jobs.start(session, str(job.pk), job.host, db.clock())
        return job


async def why(db: Database, recovery: JobRow) -> str:
    async with db.sessions() as session:
        owner = await session.get(SessionRow, recovery.session_pk)
    assert owner is not None
    return str(owner.resolution["health_check"]["why"])


@pytest.mark.parametrize(
    ("exit_status", "outcome"),
    [(75, "boot_failed"), (75, "power_failed"), (75, None), (-1, "cancelled"), (-1, "timed_out")],
)
async def test_a_job_that_ends_in_doubt_on_a_powered_off_board_queues_its_recovery(
    db: Database, exit_status: int, outcome: str | None
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, exit_status, outcome)
    [recovery] = await recoveries(db)
    assert (recovery.state, recovery.command, recovery.power) == (JobState.QUEUED, RECOVERY_COMMAND, "cycle")
    assert recovery.requirements == {"labels": {"kerrigan.target_id": [BLUEBOX]}, "tags": []}
    async with db.sessions() as session:
        owner = await session.get(SessionRow, recovery.session_pk)
    assert owner is not None
    assert owner.health_check_device == BLUEBOX
    assert (
        owner.resolution["health_check"]["why"]
        == f"recovery after {outcome or 'device_fault'} (job {job.pk})"
    )
    assert (await device(db)).infrastructure_failures == 0  # the recovery decides, not the count


@pytest.mark.parametrize(("exit_status", "powered_off"), [(0, (BLUEBOX,)), (1, (BLUEBOX,)), (75, ())])
async def test_no_recovery_after_a_job_that_passed_or_failed_its_test_or_whose_board_stayed_on(
    db: Database, exit_status: int, powered_off: tuple[str, ...]
) -> None:
    await lab(db)
    job = await run_one(db, Dispatcher(db))
    await finish(db, job, exit_status, powered_off=powered_off)
    assert await recoveries(db) == []


async def test_a_runner_naming_another_board_gets_no_recovery_of_it(db: Database) -> None:
    await lab(db)
    job = await run_one(db, Dispatcher(db))
    await finish(db, job, 75, "boot_failed", powered_off=("modalix-redbox", BLUEBOX, "no-such-board"))
    assert [row.requirements["labels"]["kerrigan.target_id"] for row in await recoveries(db)] == [[BLUEBOX]]


async def test_a_board_with_a_health_check_runs_it_as_its_recovery(db: Database) -> None:
    await lab(db)
    await give_check(db, HealthCheck("/opt/lab/health/modalix.sh", timeout_s=300, vcpus=1))
    job = await run_one(db, Dispatcher(db))
    await finish(db, job, 75, "boot_failed")
    [recovery] = await recoveries(db)
    assert (recovery.command, recovery.timeout_s) == ("/opt/lab/health/modalix.sh", 300)


async def test_three_failed_recoveries_in_a_row_make_the_board_bad_with_its_console(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "boot_failed")
    for attempt in range(1, 4):
        recovery = await run_recovery(db, dispatcher)
        async with db.sessions() as session, session.begin():
            await append_log(
                session,
                str(recovery.pk),
                recovery.host or "",
                LogStream.CONSOLE,
                seq=0,
                byte_offset=0,
                data=f"U-Boot 2024.01\nStarting kernel ...\nhung at attempt {attempt}\n",
                sent_bytes=60,
                max_bytes=1 << 20,
                at=db.clock(),
            )
        clock.advance(5)
        await finish(db, recovery, 75, "boot_failed")
        row = await device(db)
        assert row.recovery_failures == attempt
        assert (row.health is Health.BAD) == (attempt == 3)
    assert row.health_reason == (
        "3 recoveries failed in a row (the last boot_failed); the console's last lines: "
        "U-Boot 2024.01 | Starting kernel ... | hung at attempt 3"
    )
    rows = await recoveries(db)
    assert [row.state for row in rows] == [JobState.FAILED] * 3  # none queued after the third
    assert row.health_job_pk == rows[-1].pk  # the device page links the job whose console it was


async def test_a_recovery_that_boots_makes_the_board_good_and_forgets_the_failures(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "boot_failed")
    failed = await run_recovery(db, dispatcher)
    await finish(db, failed, 75, "boot_failed")
    assert (await device(db)).recovery_failures == 1
    booted = await run_recovery(db, dispatcher)
    await finish(db, booted, 0)
    row = await device(db)
    assert (row.health, row.health_reason, row.recovery_failures) == (Health.GOOD, "recovered: it booted", 0)
    assert [row.state for row in await recoveries(db)] == [JobState.FAILED, JobState.SUCCEEDED]


async def test_a_cancelled_recovery_says_nothing_of_the_board(db: Database) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "boot_failed")
    recovery = await run_recovery(db, dispatcher)
    await finish(db, recovery, -1, "cancelled")
    row = await device(db)
    assert (row.health, row.recovery_failures) == (Health.UNKNOWN, 0)
    assert len(await recoveries(db)) == 1  # none follows


async def test_a_board_whose_power_did_not_answer_at_the_end_is_recovered_too(db: Database) -> None:
    await lab(db)
    job = await run_one(db, Dispatcher(db))
    await finish(db, job, 75, "boot_failed", powered_off=(), power_unknown=(BLUEBOX, "modalix-redbox"))
    [recovery] = await recoveries(db)  # only the job's own board
    assert recovery.requirements["labels"]["kerrigan.target_id"] == [BLUEBOX]
    assert (
        await why(db, recovery)
        == f"recovery after boot_failed (job {job.pk}); its power did not answer at the end"
    )
    assert (await device(db)).infrastructure_failures == 0


async def test_a_recovery_whose_power_is_silent_waits_for_it_without_counting_then_recovers(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "power_failed", powered_off=(), power_unknown=(BLUEBOX,))
    for _ in range(5):  # more than FAILED_RECOVERIES_FOR_BAD: a silent PDU is not the board's failure
        silent = await run_recovery(db, dispatcher, start=False)
        clock.advance(30)
        await finish(db, silent, 75, "power_failed", powered_off=(), power_unknown=(BLUEBOX,))
        row = await device(db)
        assert (row.health, row.recovery_failures) == (Health.UNKNOWN, 0)
        assert row.health_reason.startswith("its power did not answer; its recovery is tried again")
    rows = await recoveries(db)
    assert row.health_job_pk == rows[0].pk  # the first silent one: the wait counts from it
    assert await why(db, rows[-1]) == "recovery waits for its power: the last power_failed"
    booted = await run_recovery(db, dispatcher)  # the PDU answers again
    await finish(db, booted, 0)
    row = await device(db)
    assert (row.health, row.health_reason) == (Health.GOOD, "recovered: it booted")
    assert len(await recoveries(db)) == 6  # none after it


async def test_a_power_silent_for_an_hour_makes_the_board_bad(db: Database, clock: FakeClock) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "boot_failed", powered_off=(), power_unknown=(BLUEBOX,))
    first = await run_recovery(db, dispatcher, start=False)
    await finish(db, first, 75, "power_failed", powered_off=())
    clock.advance(POWER_WAIT_FOR_BAD_S - 1)
    almost = await run_recovery(db, dispatcher, start=False)
    await finish(db, almost, 75, "power_failed", powered_off=())
    assert (await device(db)).health is Health.UNKNOWN
    clock.advance(1)
    last = await run_recovery(db, dispatcher, start=False)
    await finish(db, last, 75, "power_failed", powered_off=())
    row = await device(db)
    assert (row.health, row.recovery_failures, row.health_job_pk) == (Health.BAD, 0, last.pk)
    assert row.health_reason == "its power has not answered for 60 min (every recovery's power cycle failed)"
    assert len(await recoveries(db)) == 3  # none after it: a person or its health check brings it back


async def test_a_boot_that_fails_after_the_power_came_back_counts_as_before(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await run_one(db, dispatcher)
    await finish(db, job, 75, "boot_failed", powered_off=(), power_unknown=(BLUEBOX,))
    silent = await run_recovery(db, dispatcher, start=False)
    await finish(db, silent, 75, "power_failed", powered_off=())
    for attempt in range(1, 4):
        clock.advance(POWER_WAIT_FOR_BAD_S)  # long after the wait began: only the power's silence is timed
        hung = await run_recovery(db, dispatcher, start=False)
        await finish(db, hung, 75, "boot_failed")
        assert (await device(db)).recovery_failures == attempt
    row = await device(db)
    assert row.health is Health.BAD
    assert row.health_reason.startswith("3 recoveries failed in a row (the last boot_failed)")


def test_the_recoveries_metric_counts_each_outcome_by_device() -> None:
    series = DEVICE_RECOVERIES.labels("modalix-greenbox", "bad")
    before = series._value.get()
    count_fact(RecoveryEnded("modalix-greenbox", "bad"))
    assert series._value.get() == before + 1
