"""The reconciler's claims on check runs: two reconcilers never send one check run at once; one whose
claim was taken over writes nothing, to the database or to GitHub; a stopped one's claim is taken up after
its lease; nothing is lost across a restart. On SQLite and PostgreSQL (see rig.py for the rig and the
watched stand-in)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from datetime import timedelta

from kerrigan.core.lifecycle import JobState
from kerrigan.store import check_runs
from kerrigan.store.database import Database
from tests.integration.github.reconciler.rig import (
    CREATE,
    UPDATE,
    Rig,
    disagreements,
    drive,
    overlapping,
    regressions,
    running,
    ticking,
    until,
)


async def test_two_reconcilers_on_one_database_never_send_one_check_run_at_once(rig: Rig) -> None:
    other_db = Database.connect(rig.db.engine.url.render_as_string(hide_password=False), rig.clock)
    try:
        github = rig.github
        github.faults.inject("POST", CREATE, delay_s=0.02, times=None)
        github.faults.inject("PATCH", UPDATE, delay_s=0.02, times=None)
        first, second = rig.reconciler(), rig.reconciler(rig.app(other_db))
        rng = random.Random(11)
        async with ticking(rig.clock), running(first, second):
            sessions = await rig.start(20)
            await asyncio.gather(*(drive(rig, session, rng) for session in sessions))
            await until(rig.caught_up, timeout=90)  # a guard: two SQLite writers are slow on a busy machine
    finally:
        await other_db.close()

    assert first.sent  # both took part
    assert second.sent
    assert overlapping(github) == {}
    assert regressions(github) == []
    stored = await rig.sessions()
    assert all(session.state.value == "completed" for session in stored)
    assert disagreements(github, stored) == []


async def test_a_reconciler_whose_claim_was_taken_over_writes_nothing(rig: Rig) -> None:
    """The first reconciler's request hangs past its lease; a second takes the check run over and shows
    it. The first's request then fails: it neither sends GitHub another request nor writes the session."""
    github, clock = rig.github, rig.clock
    slow = rig.reconciler(lease_s=3.0)  # renews every second: not before its request's answer
    [session] = await rig.start()
    assert await slow.round() == 1
    first, second = await rig.jobs(session.id)
    await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    github.faults.inject("PATCH", UPDATE, delay_s=0.5, status=502, times=1)
    sending = asyncio.create_task(slow.round())

    async def in_flight() -> bool:
        return github.in_flight[session.id] == 1

    await until(in_flight)
    held = (await rig.row(session.id)).sync_claim
    clock.advance(10)  # the slow one's lease has run out
    taker = rig.reconciler()
    assert await taker.round() == 1
    shown = await rig.row(session.id)
    assert shown.sync_claim is None
    assert shown.shown_version == shown.version
    await rig.move(first, JobState.SUCCEEDED)  # news for whoever holds the check run: nobody, now
    await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    sent = len(github.arrived)
    before = await rig.row(session.id)
    await sending

    assert held is not None
    assert len(github.arrived) == sent  # the slow one sent nothing after its claim was taken over
    after = await rig.row(session.id)
    assert (after.shown_version, after.sync_claim, after.sync_due_at, after.sync_attempts) == (
        before.shown_version,
        before.sync_claim,
        before.sync_due_at,
        before.sync_attempts,
    )
    assert await taker.round() == 1
    assert disagreements(github, await rig.sessions()) == []


async def test_a_claim_never_renewed_is_taken_up_after_its_lease(rig: Rig) -> None:
    clock = rig.clock
    reconciler = rig.reconciler()
    [session] = await rig.start()
    async with rig.db.sessions() as db, db.begin():  # a reconciler claims it, and dies
        [claim] = await check_runs.claim_due(db, clock(), timedelta(seconds=30))
    assert claim.session_id == session.id
    assert await reconciler.round() == 0
    clock.advance(29)
    assert await reconciler.round() == 0
    assert rig.github.writes(session.id) == 0
    clock.advance(1.001)
    assert await reconciler.round() == 1
    assert disagreements(rig.github, await rig.sessions()) == []


async def test_a_reconciler_stopped_mid_request_leaves_its_claim_to_be_taken_up_after_its_lease(
    rig: Rig,
) -> None:
    """Stopped while GitHub holds its request (a shutdown, a crash): it writes nothing more, and another
    reconciler takes the check run up once the claim's lease has run out."""
    github, clock = rig.github, rig.clock
    stopped = rig.reconciler()
    [session] = await rig.start()
    gate = github.hold("POST", CREATE)
    task = asyncio.create_task(stopped.run())

    async def in_flight() -> bool:
        return github.in_flight[session.id] == 1

    await until(in_flight)
    held = (await rig.row(session.id)).sync_claim
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    gate.open()  # GitHub makes the check run after all; its answer finds nobody

    async def answered() -> bool:
        return github.in_flight[session.id] == 0

    await until(answered)
    for _ in range(5):  # let anything left of the stopped one run
        await asyncio.sleep(0.01)
    row = await rig.row(session.id)
    assert held is not None
    assert row.sync_claim == held  # nothing of the stopped one wrote
    assert row.shown_version == 0
    taker = rig.reconciler()
    assert await taker.round() == 0
    clock.advance(31)
    assert await taker.round() == 1
    assert github.writes(session.id, "POST") == 1  # the check run GitHub made was adopted
    assert disagreements(github, await rig.sessions()) == []


async def test_nothing_is_lost_across_a_restart(rig: Rig) -> None:
    """Versions recorded while no reconciler runs, and a create whose answer was lost just before the
    process stopped, are all shown by the next reconciler; no check run is made twice."""
    github, clock = rig.github, rig.clock
    before = rig.reconciler(backoff_base_s=5.0)  # a retry it would wait out, not hold the claim for
    sessions = await rig.start(5)
    github.faults.inject("POST", CREATE, act_first=True, drop=True, times=1)
    assert await before.round() == 5
    unknown = [s for s in await rig.sessions() if s.check_run_id is None]
    assert len(unknown) == 1  # GitHub made its check run; the answer was lost and the retry is later
    assert (await rig.row(unknown[0].id)).create_sent_version is not None
    # No reconciler from here on: jobs run and end, one session fails.
    for number, session in enumerate(sessions):
        first, second = await rig.jobs(session.id)
        await rig.run_through(first)
        await rig.run_through(second, exit_status=3 if number == 0 else 0)
    assert all(session.shown_version < session.version for session in await rig.sessions())

    clock.advance(60)
    after = rig.reconciler()
    async with running(after):
        await until(rig.caught_up)
    stored = await rig.sessions()
    assert disagreements(github, stored) == []
    assert len(github.check_runs) == 5
