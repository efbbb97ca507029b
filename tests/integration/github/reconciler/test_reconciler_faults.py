"""The check-run reconciler's promises (DESIGN.md, "Check runs follow the session"), proved against the
GitHub stand-in's fault injection, on SQLite and (with ``KERRIGAN_TEST_POSTGRES_URL``) PostgreSQL.

Two ways in: the ``harness`` (Kerrigan's app and its own reconciler with its defaults, deliveries over
HTTP), and the :class:`~tests.integration.github.reconciler.rig.Rig` (sessions, jobs and reconcilers of the
test's own, on the ``db`` fixture's FakeClock), both against a watched stand-in (``rig.py`` says how).
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from datetime import timedelta
from typing import Any

import pytest

from kerrigan.core.lifecycle import JobState
from kerrigan.github.budget import Budget
from kerrigan.github.reconciler import Reconciler
from tests.integration.github.conftest import (
    PUSH_WORKFLOWS,
    SHA,
    Harness,
    check_run_name,
    push_payload,
)
from tests.integration.github.reconciler.rig import (
    CREATE,
    SECONDARY,
    UPDATE,
    Rig,
    WatchedStandIn,
    disagreements,
    drive,
    overlapping,
    regressions,
    running,
    ticking,
    until,
)

# -- 1. a lost connection never duplicates a check run ----------------------------------------------------

LOST_CREATES = {
    "acted, then answered 502": {"act_first": True, "status": 502},
    "acted, then dropped": {"act_first": True, "drop": True},
    "answered 502 before acting": {"status": 502},
    "dropped before acting": {"drop": True},
}


@pytest.mark.parametrize("fault", LOST_CREATES.values(), ids=LOST_CREATES.keys())
async def test_a_lost_create_never_duplicates_a_check_run(harness: Harness, fault: dict[str, Any]) -> None:
    github = harness.github
    assert isinstance(github, WatchedStandIn)
    lost = github.faults.inject("POST", CREATE, times=3, **fault)
    assert await harness.deliver("push", push_payload(SHA)) == 202
    await harness.settle()

    assert lost.hits == 3
    sessions = await harness.sessions()
    assert sorted(session.workflow for session in sessions) == sorted(PUSH_WORKFLOWS)
    assert harness.check_run_names() == sorted(check_run_name(name) for name in PUSH_WORKFLOWS)
    assert disagreements(github, sessions) == []
    creates = harness.requests("POST", "/check-runs")
    if fault.get("act_first"):  # GitHub made them: each was found by its external_id, not made again
        assert harness.requests("GET", f"/commits/{SHA}/check-runs")
        assert len(creates) == len(PUSH_WORKFLOWS)
    else:  # GitHub made nothing: each was made by the next try
        assert len(creates) == len(PUSH_WORKFLOWS) + 3


# -- 2. transient failures are retried without a limit ------------------------------------------------------

TRANSIENT = {
    "500": {"status": 500},
    "502": {"status": 502},
    "503": {"status": 503},
    "429 with Retry-After 0": {"status": 429, "headers": {"Retry-After": "0"}},
    "403 secondary limit, Retry-After 1": {
        "status": 403,
        "headers": {"Retry-After": "1"},
        "message": SECONDARY,
        "times": 1,
    },
    "403 secondary limit, Retry-After 0": {
        "status": 403,
        "headers": {"Retry-After": "0"},
        "message": SECONDARY,
    },
    "dropped": {"drop": True},
    "acted, then dropped": {"act_first": True, "drop": True},
    "acted, then 503": {"act_first": True, "status": 503},
    "slow (0.3 s)": {"delay_s": 0.3, "times": 2},
    "502 six times in a row": {"status": 502, "times": 6},  # more than the client's own 5 attempts
}


@pytest.mark.parametrize("fault", TRANSIENT.values(), ids=TRANSIENT.keys())
async def test_transient_failures_are_retried_until_github_shows_the_latest_version(
    rig: Rig, fault: dict[str, Any]
) -> None:
    github = rig.github
    options = {"times": 3, **fault}
    creates = github.faults.inject("POST", CREATE, **options)
    updates = github.faults.inject("PATCH", UPDATE, **options)
    async with ticking(rig.clock), running(rig.reconciler()):
        [session] = await rig.start()
        await until(rig.caught_up)
        first, second = await rig.jobs(session.id)
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(first, JobState.SUCCEEDED)
        await rig.move(second, JobState.FAILED, exit_status=3)
        await until(rig.caught_up)

    # A create GitHub acted on is adopted, not sent again: the fault meets the one POST only.
    made = fault.get("act_first") or not (fault.get("status") or fault.get("drop"))
    assert (creates.hits, updates.hits) == (1 if made else options["times"], options["times"])
    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert disagreements(github, [stored]) == []
    assert regressions(github) == []


async def test_backoff_keeps_growing_across_waits_in_place(rig: Rig) -> None:
    """Two failures retried in place, the third waited out as the session's due time: the session counts
    three failures, so the next wait is the fourth step of the backoff, not the second."""
    reconciler = rig.reconciler(backoff_base_s=0.01, wait_in_place_s=0.029)  # steps 1, 2 in place; 3 not
    [session] = await rig.start()
    await reconciler.round()
    rig.github.faults.inject("PATCH", UPDATE, status=500, times=3)
    first, _ = await rig.jobs(session.id)
    await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1

    row = await rig.row(session.id)
    assert rig.github.writes(session.id, "PATCH") == 3
    assert row.sync_attempts == 3
    assert row.sync_due_at is not None
    assert row.sync_due_at > rig.clock()
    rig.clock.advance(1)
    assert await reconciler.round() == 1
    assert disagreements(rig.github, await rig.sessions()) == []
    assert (await rig.row(session.id)).sync_attempts == 0


# -- 3. a secondary limit without Retry-After waits at least a minute ---------------------------------------

LIMITS = {
    "403 secondary limit": {"status": 403, "message": SECONDARY},
    "429": {"status": 429},
}


@pytest.mark.parametrize("fault", LIMITS.values(), ids=LIMITS.keys())
async def test_a_secondary_limit_without_retry_after_waits_at_least_a_minute(
    rig: Rig, fault: dict[str, Any]
) -> None:
    github, clock = rig.github, rig.clock
    reconciler = rig.reconciler(fake_time=True)  # the budget counts in the FakeClock's seconds too
    app = reconciler.app
    limited, other = await rig.start(2, app=app)
    assert await reconciler.round() == 2
    github.faults.inject("PATCH", UPDATE, **fault)
    job, _ = await rig.jobs(limited.id)
    await rig.move(job, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1

    limited_at = clock()
    row = await rig.row(limited.id)
    assert row.sync_due_at is not None
    assert row.sync_due_at >= limited_at + timedelta(seconds=60)
    assert row.shown_version < row.version
    assert github.writes(limited.id, "PATCH") == 1
    # The whole installation waits: a version of another session recorded now does not go either.
    job, _ = await rig.jobs(other.id)
    await rig.move(job, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    for step in (0, 30, 29):
        clock.advance(step)
        await reconciler.sweep()
        await reconciler.round()
        assert github.writes(limited.id, "PATCH") == 1
        assert github.writes(other.id, "PATCH") == 0
    clock.advance(1)  # a minute after the limit
    await until(lambda: _rounds_until_caught_up(rig, reconciler))
    assert github.writes(limited.id, "PATCH") == 2
    assert github.writes(other.id, "PATCH") == 1
    assert disagreements(github, await rig.sessions()) == []


async def _rounds_until_caught_up(rig: Rig, reconciler: Reconciler) -> bool:
    await reconciler.round()
    return await rig.caught_up()


# -- 4. a refused update never hides the session's state, nor leaves it stuck -------------------------------

REFUSAL = "Invalid request.\n\noutput.summary is too long (injected)."


async def test_a_refused_final_update_shows_the_conclusion_in_a_short_body_and_keeps_the_refusal(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    github = rig.github
    reconciler = rig.reconciler()
    [session] = await rig.start()
    first, second = await rig.jobs(session.id)
    await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
    assert await reconciler.round() == 1
    assert rig.run(session)["status"] == "in_progress"
    refusal = github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=1)
    await rig.move(first, JobState.SUCCEEDED)
    await rig.move(second, JobState.FAILED, exit_status=3)
    with caplog.at_level(logging.ERROR, logger="kerrigan.github.reconciler"):
        assert await reconciler.round() == 1

    assert refusal.hits == 1
    run = rig.run(session)
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert "(short report: GitHub refused the full one)" in run["output"]["title"]
    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error
    assert "422" in stored.check_run_error
    assert any(REFUSAL in record.getMessage() for record in caplog.records)
    assert disagreements(github, [stored]) == []
    assert await reconciler.round() == 0  # nothing left to send


@pytest.mark.parametrize("then", ["a later version", "the refused-retry time"])
async def test_a_version_refused_on_every_request_leaves_the_session_whole_and_is_not_stuck(
    rig: Rig, then: str
) -> None:
    github, clock = rig.github, rig.clock
    reconciler = rig.reconciler()
    [session] = await rig.start()
    assert await reconciler.round() == 1
    first, second = await rig.jobs(session.id)
    github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=None)
    if then == "a later version":  # an in-progress version is refused; the completed one follows
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        refused_state: tuple[str, str | None] = ("in_progress", None)
    else:  # the final version is refused
        await rig.run_through(first)
        await rig.run_through(second)
        refused_state = ("completed", "success")
    assert await reconciler.round() == 1

    row = await rig.row(session.id)
    assert (row.state, row.conclusion) == refused_state  # the session is whole
    assert row.check_run_error is not None
    assert REFUSAL in row.check_run_error
    assert row.shown_version < row.version
    assert rig.run(session)["status"] == "queued"  # GitHub still shows what it last took
    assert github.writes(session.id, "PATCH") == 2  # the full body, then the short one
    assert await reconciler.round() == 0  # not tried again at once
    github.faults.clear()
    if then == "a later version":
        await rig.move(first, JobState.SUCCEEDED)
        await rig.run_through(second)
    else:
        clock.advance(599)
        await reconciler.sweep()
        assert await reconciler.round() == 0
        clock.advance(1)
        await reconciler.sweep()
    assert await reconciler.round() == 1

    [stored] = await rig.sessions()
    assert (stored.state.value, stored.conclusion) == ("completed", "success")
    assert disagreements(github, [stored]) == []
    assert "(short report" not in rig.run(session)["output"]["title"]


SHORT_BODY_LOST = {
    "acted, then answered 502": {"act_first": True, "status": 502},
    "answered 502 before acting": {"status": 502},
    "dropped before acting": {"drop": True},
}


@pytest.mark.parametrize("lost", SHORT_BODY_LOST.values(), ids=SHORT_BODY_LOST.keys())
async def test_a_refused_create_whose_short_body_is_lost_is_retried_and_made_once(
    rig: Rig, lost: dict[str, Any]
) -> None:
    """GitHub refuses the full body of a create, and the short body's answer is then lost: that is no
    refusal (it is retried with backoff, not after the refused-retry time), and a short create GitHub made
    is found by its external_id, not made again."""
    github = rig.github
    reconciler = rig.reconciler()
    github.faults.inject("POST", CREATE, status=422, message=REFUSAL, times=1)
    github.faults.inject("POST", CREATE, times=1, **lost)
    [session] = await rig.start()
    assert await reconciler.round() == 1
    rig.clock.advance(600)  # past the refused-retry time: whatever was left to do is done
    await reconciler.round()

    [stored] = await rig.sessions()
    assert disagreements(github, [stored]) == []
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error
    if lost.get("act_first"):  # the short check run GitHub made is the one adopted
        assert "(short report: GitHub refused the full one)" in rig.run(session)["output"]["title"]
        assert github.writes(session.id, "POST") == 2


async def test_a_short_update_failing_for_a_while_is_retried_with_backoff(rig: Rig) -> None:
    github = rig.github
    reconciler = rig.reconciler()
    [session] = await rig.start()
    assert await reconciler.round() == 1
    github.faults.inject("PATCH", UPDATE, status=422, message=REFUSAL, times=1)
    github.faults.inject("PATCH", UPDATE, status=503, times=2)
    first, second = await rig.jobs(session.id)
    await rig.run_through(first)
    await rig.run_through(second, exit_status=3)
    assert await reconciler.round() == 1

    [stored] = await rig.sessions()
    assert disagreements(github, [stored]) == []
    assert (stored.state.value, stored.conclusion) == ("completed", "failure")
    assert stored.check_run_error is not None
    assert REFUSAL in stored.check_run_error


# -- 5. versions in order, one request at a time, the latest wins ------------------------------------------


async def test_versions_recorded_while_a_request_is_in_flight_go_as_one_the_latest(rig: Rig) -> None:
    github = rig.github
    [session] = await rig.start()
    first, second = await rig.jobs(session.id)
    async with running(rig.reconciler()):
        await until(rig.caught_up)
        gate = github.hold("PATCH", UPDATE)
        await rig.move(first, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)

        async def in_flight() -> bool:
            return github.in_flight[session.id] == 1

        await until(in_flight)
        before = (await rig.row(session.id)).version
        await rig.move(second, JobState.LEASED, JobState.ACCEPTED, JobState.RUNNING)
        await rig.move(first, JobState.SUCCEEDED)
        await rig.move(second, JobState.FAILED, exit_status=3)
        assert (await rig.row(session.id)).version == before + 3
        gate.open()
        await until(rig.caught_up)

    patches = [r for r in github.requests if r.method == "PATCH" and re.search(UPDATE, r.path)]
    assert len(patches) == 2  # the one in flight, then the latest: the two between were never sent
    assert (patches[-1].body["status"], patches[-1].body["conclusion"]) == ("completed", "failure")
    assert github.statuses[rig.run(session)["id"]] == [
        ("queued", None),
        ("in_progress", None),
        ("completed", "failure"),
    ]
    assert overlapping(github) == {}
    assert disagreements(github, await rig.sessions()) == []


async def test_many_transitions_while_github_is_slow_keep_order_one_request_at_a_time(rig: Rig) -> None:
    github = rig.github
    github.faults.inject("POST", CREATE, delay_s=0.05, times=None)
    github.faults.inject("PATCH", UPDATE, delay_s=0.05, times=None)
    rng = random.Random(5)
    async with ticking(rig.clock), running(rig.reconciler()):
        sessions = await rig.start(5)
        await asyncio.gather(*(drive(rig, session, rng) for session in sessions))
        await until(rig.caught_up)

    stored = await rig.sessions()
    assert all(session.state.value == "completed" for session in stored)
    assert overlapping(github) == {}
    assert regressions(github) == []
    assert disagreements(github, stored) == []
    versions = sum(session.version for session in stored)
    assert len(github.arrived) < versions  # versions recorded while one was in flight were coalesced


# -- 7. progress of many sessions under load ---------------------------------------------------------------


async def test_fifty_sessions_driven_at_once_against_a_slow_github_all_agree_at_the_end(rig: Rig) -> None:
    github = rig.github
    github.faults.inject("POST", CREATE, delay_s=0.02, times=None)
    github.faults.inject("PATCH", UPDATE, delay_s=0.02, times=None)
    github.faults.inject("PATCH", UPDATE, status=502, probability=0.1, times=None)
    # Three writes a session at the least: more than GitHub's 80 a minute, whose waits are not tested here.
    app = rig.app(budget=Budget(creating_per_minute=10_000))
    rng = random.Random(7)
    async with ticking(rig.clock), running(rig.reconciler(app)):
        sessions = await rig.start(50, app=app)
        await asyncio.gather(*(drive(rig, session, rng) for session in sessions))
        await until(rig.caught_up, timeout=30)

    stored = await rig.sessions()
    assert len(stored) == 50
    assert all(session.state.value == "completed" for session in stored)
    assert disagreements(github, stored) == []
    assert overlapping(github) == {}
    assert regressions(github) == []
