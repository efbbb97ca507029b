"""Suspect retries on SQLite and PostgreSQL (issue 28): a job that fails on a board that fails its task
far more often than its peers is retried once on a peer that is not suspect, and passes there; without
such a peer, or with ``retry: {suspect: 0}``, it fails as before, and its row says why."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.github.projection import render
from kerrigan.store import jobs
from kerrigan.store.audit import Change
from kerrigan.store.check_runs import Claim, projection
from kerrigan.store.database import Database
from kerrigan.store.inventory import set_state
from kerrigan.store.models import JobRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.history import runs_of
from tests.integration.dispatch.test_automatic_retry import (
    SESSION,
    all_jobs,
    end,
    run_current,
    session_row,
)
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab

MATCHING = ("modalix-bluebox", "modalix-redbox")  # the lab's devices that SOM_UART matches
KEPT = "modalix-greenbox"  # the third, in maintenance: a peer a suspect retry may wait for


async def queue(db: Database, retry: RetryPolicy, task: str = "smoke") -> None:
    resolution: dict[str, Any] = {
        "tasks": [{"id": task, "requested": SOM_UART}],
        "scheduling": {"max_devkits": 1, "strategy": "spread", "queue_wait_limit_s": 300},
    }
    new = builders.session(SESSION, [task], resolution=resolution, retry=retry)
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())


async def suspect_lab(db: Database, suspect: str) -> str:
    """``suspect`` failed ``smoke`` 8 of 10 times this week, its peer passed it 20 times; the peer."""
    [peer] = [device for device in MATCHING if device != suspect]
    await runs_of(db, suspect, runs=10, failures=8, task="smoke")
    await runs_of(db, peer, runs=20, failures=0, task="smoke")
    return peer


async def maintain(db: Database, device: str, state: DeviceState = DeviceState.MAINTENANCE) -> None:
    async with db.sessions() as session, session.begin():
        await set_state(
            session,
            device,
            state,
            "reflashing",
            until=None,
            change=Change("hubot", db.clock()),
        )


async def test_a_failure_on_a_suspect_is_retried_on_a_peer_and_passes_there(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    peer = await suspect_lab(db, first.device_id)
    await end(db, first, 1)  # its test fails: 9 of 11 this week on this board
    rows = await all_jobs(db)
    mine = [row for row in rows if row.session_pk == first.session_pk]
    assert [(row.state, row.attempt) for row in mine] == [("retried", 1), ("queued", 2)]
    failed, retry = mine
    assert (failed.suspect_runs, failed.suspect_failures, failed.suspect_retry) == (11, 9, "retried")
    assert (retry.avoid_devices, retry.avoid_strict, retry.retry_of) == ([first.device_id], True, failed.pk)
    assert (await session_row(db)).state == "in_progress"
    second = await run_current(db, dispatcher)
    assert second.device_id == peer
    await end(db, second, 0)
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "success")
    # Its check run names both attempts, the suspect's numbers as they were when it failed.
    async with db.sessions() as session:
        view = await projection(session, Claim(row.pk, row.id, "token", db.clock(), 0))
    output = render(view, "http://kerrigan/sessions/x").fields["output"]
    assert output["title"] == "1 job passed"
    assert (
        f"- `smoke`: failed on {first.device_id}, suspect: 9 of 11 failed this week; passed on {peer}"
        in output["summary"]
    )


async def test_only_once_by_default(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    await suspect_lab(db, first.device_id)
    await end(db, first, 1)
    second = await run_current(db, dispatcher)
    await end(db, second, 1)  # it fails on the peer too: the code, most likely
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry) for row in mine] == [("retried", "retried"), ("failed", None)]
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "failure")


async def test_without_an_unsuspected_peer_it_fails_as_before_and_says_so(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    await suspect_lab(db, first.device_id)
    for other in (*MATCHING, KEPT):
        if other != first.device_id:
            await maintain(db, other, DeviceState.RETIRED)  # it can never run the task again
    await end(db, first, 1)
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry, row.suspect_failures) for row in mine] == [
        ("failed", "no_peer", 9)
    ]
    row = await session_row(db)
    assert (row.state, row.conclusion) == ("completed", "failure")


async def test_retry_suspect_zero_fails_as_before(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy(suspect=0))
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    await suspect_lab(db, first.device_id)
    await end(db, first, 1)
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry) for row in mine] == [("failed", None)]
    assert (await session_row(db)).conclusion == "failure"


async def test_a_board_that_is_not_suspect_is_not_retried(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    await runs_of(db, first.device_id, runs=10, failures=1, task="smoke")
    await end(db, first, 1)
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry) for row in mine] == [("failed", None)]


async def test_a_suspect_retry_never_goes_back_to_the_suspect(db: Database) -> None:
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    peer = await suspect_lab(db, first.device_id)
    await end(db, first, 1)
    await maintain(db, peer)  # the peer went away after the retry was queued
    assert (await dispatcher.dispatch_once()).granted == ()  # not the suspect, though it is free


async def test_a_matrix_job_is_judged_against_the_jobs_of_its_own_matrix_values(db: Database) -> None:
    # Issue 28, row 4: the board fails n=3 far more than its peer does; the 40 runs of n=1 it passed are
    # another task's numbers, and do not dilute n=3's.
    await lab(db)
    await queue(db, RetryPolicy(), task="smoke[n=3]")
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    [peer] = [device for device in MATCHING if device != first.device_id]
    await runs_of(db, first.device_id, runs=10, failures=8, task="smoke[n=3]")
    await runs_of(db, peer, runs=20, failures=0, task="smoke[n=3]")
    await runs_of(db, first.device_id, runs=40, failures=0, task="smoke[n=1]")
    await end(db, first, 1)
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry, row.suspect_runs) for row in mine] == [
        ("retried", "retried", 11),
        ("queued", None, None),
    ]


async def test_a_job_is_judged_when_it_ends_not_again_when_its_board_becomes_suspect_later(
    db: Database, clock: FakeClock
) -> None:
    """Its board was no suspect when it failed: another job of its session ending after the board became
    one (other sessions' failures) does not bring it back as a suspect retry."""
    await lab(db)
    resolution: dict[str, Any] = {
        "tasks": [{"id": task, "requested": SOM_UART} for task in ("smoke", "flash")],
        "scheduling": {"max_devkits": 2, "strategy": "spread", "queue_wait_limit_s": 300},
    }
    new = builders.session(SESSION, ["smoke", "flash"], resolution=resolution, retry=RetryPolicy())
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())
    assert len((await Dispatcher(db).dispatch_once()).granted) == 2
    async with db.sessions() as session, session.begin():
        leased = list(await session.scalars(select(JobRow).where(JobRow.state == "leased")))
        for job in leased:
            assert job.host is not None
            await jobs.accept(session, str(job.pk), job.host, db.clock())
            await jobs.start(session, str(job.pk), job.host, db.clock())
    [failed] = [job for job in leased if job.task_id == "smoke"]
    [other] = [job for job in leased if job.task_id == "flash"]
    assert failed.device_id is not None
    await end(db, failed, 1)  # no history yet: no suspect
    await runs_of(db, failed.device_id, runs=10, failures=8, task="smoke")  # now it is one for smoke
    await runs_of(db, other.device_id or "", runs=20, failures=0, task="smoke")
    clock.advance(60)
    await end(db, other, 0)
    mine = [row for row in await all_jobs(db) if row.session_pk == failed.session_pk]
    assert sorted((row.task_id, row.state, row.suspect_retry) for row in mine) == [
        ("flash", "succeeded", None),
        ("smoke", "failed", None),
    ]
    assert (await session_row(db)).conclusion == "failure"


async def test_a_peer_in_maintenance_counts_and_the_retry_waits_for_it(db: Database) -> None:
    """Maintenance may pass: the retry waits for the peer (within its queue-wait budget, a lab problem if it
    never comes back) rather than the failure on the suspect standing as the code's."""
    await lab(db)
    await queue(db, RetryPolicy())
    dispatcher = Dispatcher(db)
    first = await run_current(db, dispatcher)
    assert first.device_id is not None
    peer = await suspect_lab(db, first.device_id)
    await maintain(db, peer)
    await end(db, first, 1)
    mine = [row for row in await all_jobs(db) if row.session_pk == first.session_pk]
    assert [(row.state, row.suspect_retry) for row in mine] == [("retried", "retried"), ("queued", None)]
    assert (await dispatcher.dispatch_once()).granted == ()  # the suspect is free, but never for it
    await maintain(db, peer, DeviceState.AVAILABLE)
    second = await run_current(db, dispatcher)
    assert second.device_id == peer
