"""The queue-wait budget on a real database: spent while a job waits, paused on its own session, withdrawn
when it runs out (in the server's queue at once; on a runner only when the runner says so); cancels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.dispatch.dispatcher import Dispatcher, Round
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.leases import leased_devices, take_queued_jobs
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab, queue

Client = TestClient  # type: ignore[type-arg]
SESSION = "99999999-9999-9999-9999-999999999999"
# The runner these tests speak as is lab-a-01: a job pinned to its device, so that neither dispatcher (the
# test's or the server's own, which runs beside it) can lease it to another host's.
ON_BLUEBOX = {**SOM_UART, "labels": {**SOM_UART["labels"], "kerrigan.target_id": ["modalix-bluebox"]}}


def result_pks(result: Round) -> list[int]:
    return [grant.job_pk for grant in result.granted]


async def leased_hosts(session: AsyncSession) -> dict[str, str]:
    return dict((await session.execute(select(DeviceLeaseRow.device_id, DeviceLeaseRow.host))).all())


async def rows(db: Database) -> list[JobRow]:
    async with db.sessions() as session:
        return list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def limit(db: Database, seconds: int) -> None:
    from kerrigan.store.models import SessionRow

    async with db.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.queue_wait_limit_s = seconds


async def test_zero_queue_wait_withdraws_and_cancel_is_idempotent(db: Database) -> None:
    await lab(db)
    # Three jobs, two devices: the third waits, and with no budget it is withdrawn in the same round.
    await queue(db, SESSION, {"a": SOM_UART, "b": SOM_UART, "c": SOM_UART})
    await limit(db, 0)
    result = await Dispatcher(db).dispatch_once()
    assert len(result.granted) == 2
    [withdrawn] = result.withdrawn
    states = {row.pk: (row.state, row.reason) for row in await rows(db)}
    assert states[withdrawn] == ("refused_before_start", "queue_wait_exceeded")
    async with db.sessions() as session, session.begin():
        first = await jobs.request_cancel(session, SESSION, db.clock())
    async with db.sessions() as session, session.begin():
        again = await jobs.request_cancel(session, SESSION, db.clock())
    # The two leased jobs were not in a runner's hands yet: they end at once, and nothing ends twice.
    assert (sorted(first), again) == (sorted(result_pks(result)), [])
    after = {row.pk: row.state for row in await rows(db)}
    assert after[withdrawn] == "refused_before_start"
    assert sorted(state for pk, state in after.items() if pk != withdrawn) == ["cancelled"] * 2
    async with db.sessions() as session:
        assert await leased_devices(session) == set()


async def test_a_queued_job_spends_its_budget_while_it_waits_for_a_device(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    await queue(db, SESSION, {"a": SOM_UART, "b": SOM_UART, "c": SOM_UART})
    await limit(db, 30)
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    clock.advance(20)
    assert (await dispatcher.dispatch_once()).withdrawn == ()
    clock.advance(11)
    [withdrawn] = (await dispatcher.dispatch_once()).withdrawn
    assert [row.reason for row in await rows(db) if row.pk == withdrawn] == ["queue_wait_exceeded"]


async def test_waiting_on_its_own_session_does_not_spend_the_budget(db: Database, clock: FakeClock) -> None:
    await lab(db)
    # max_devkits 1: the second job waits only on its own session's first job.
    await queue(db, SESSION, {"a": SOM_UART, "b": SOM_UART}, max_devkits=1)
    await limit(db, 30)
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    clock.advance(100)
    assert (await dispatcher.dispatch_once()).withdrawn == ()
    [_, waiting] = await rows(db)
    assert waiting.state == "queued"
    assert waiting.queue_wait_s == 0
    assert waiting.queue_wait_observed_at is None  # paused


async def test_cancelled_workspace_waiter_is_removed_from_the_queue(db: Database) -> None:
    await lab(db)
    await queue(db, SESSION, {"a": SOM_UART, "b": SOM_UART}, max_devkits=1)
    await Dispatcher(db).dispatch_once()
    async with db.sessions() as session:
        [running] = await session.scalars(select(JobRow).where(JobRow.state == "leased"))
        host = running.device_id and (await leased_hosts(session))[running.device_id]
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(running.pk), str(host), db.clock())  # in a runner's hands
    async with db.sessions() as session, session.begin():
        ended = await jobs.request_cancel(session, SESSION, db.clock())
    [accepted, waiter] = await rows(db)
    assert ended == [waiter.pk]
    assert (waiter.state, waiter.reason) == ("cancelled", "cancelled")
    assert accepted.state == "accepted"
    assert accepted.cancel_requested_at is not None  # its runner is asked on its next poll
    async with db.sessions() as session:
        assert await take_queued_jobs(session) == []


@pytest.fixture
async def runner(db: Database, aiohttp_client: Callable[..., Any]) -> tuple[Client, dict[str, str]]:
    await lab(db)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    headers = {"Authorization": f"Bearer {token}"}
    body = {"protocol": [1], "capabilities": ["gate_jobs", "log_pages", "withdraw"]}
    await client.post("/api/runner/v1/register", json=body, headers=headers)
    return client, headers


async def accepted_job(client: Client, headers: dict[str, str], db: Database) -> str:
    await queue(db, SESSION, {"smoke": ON_BLUEBOX}, max_devkits=1)
    await limit(db, 30)
    await Dispatcher(db).dispatch_once()
    # The app's own dispatcher may have taken the round: the long poll waits for its lease to commit.
    polled = await (await client.get("/api/runner/v1/poll?wait=5", headers=headers)).json()
    [offer] = polled["offers"]
    assert offer["queue_wait_remaining_s"] == 30
    await client.post(f"/api/runner/v1/jobs/{offer['id']}/accept", headers=headers)
    return str(offer["id"])


async def test_only_observed_permit_wait_can_withdraw_not_elapsed_acceptance(
    runner: tuple[Client, dict[str, str]], db: Database, clock: FakeClock
) -> None:
    client, headers = runner
    job = await accepted_job(client, headers, db)
    clock.advance(50)  # 50 s since acceptance, past the budget; the runner reports only 5 s waited
    await client.post("/api/runner/v1/heartbeat", json={"waiting": {job: 5_000}}, headers=headers)
    polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
    assert polled["withdraw"] == []
    # The waits the runner reports set the deadline: 31 s waited is past the 30 s budget.
    await client.post("/api/runner/v1/heartbeat", json={"waiting": {job: 31_000}}, headers=headers)
    polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
    assert polled["withdraw"] == [job]
    answer = await (await client.post(f"/api/runner/v1/jobs/{job}/withdrawn", headers=headers)).json()
    assert answer == {"job": job, "state": "refused_before_start", "changed": True}
    [row] = await rows(db)
    assert row.reason == "queue_wait_exceeded"
    async with db.sessions() as session:
        assert await leased_devices(session) == set()


async def test_a_start_that_crosses_the_withdrawal_request_wins(
    runner: tuple[Client, dict[str, str]], db: Database
) -> None:
    client, headers = runner
    job = await accepted_job(client, headers, db)
    await client.post("/api/runner/v1/heartbeat", json={"waiting": {job: 60_000}}, headers=headers)
    started = await (await client.post(f"/api/runner/v1/jobs/{job}/start", headers=headers)).json()
    assert started["state"] == "running"
    late = await (await client.post(f"/api/runner/v1/jobs/{job}/withdrawn", headers=headers)).json()
    assert late == {"job": job, "state": "running", "changed": False}  # the runner's start decided
    polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
    assert polled["withdraw"] == []


async def test_cancel_reaches_the_runner_on_its_poll(
    runner: tuple[Client, dict[str, str]], db: Database
) -> None:
    client, headers = runner
    job = await accepted_job(client, headers, db)
    await client.post(f"/api/runner/v1/jobs/{job}/start", headers=headers)
    async with db.sessions() as session, session.begin():
        await jobs.request_cancel(session, SESSION, db.clock())
    polled = await (await client.get("/api/runner/v1/poll?wait=5", headers=headers)).json()
    assert polled["cancel"] == [job]
    body = {"exit_status": -15, "outcome": "cancelled"}
    ended = await (await client.post(f"/api/runner/v1/jobs/{job}/finish", json=body, headers=headers)).json()
    assert ended["state"] == "cancelled"
    polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
    assert polled["cancel"] == []


async def test_a_refusal_the_host_can_never_lift_ends_the_job_with_its_detail(
    runner: tuple[Client, dict[str, str]], db: Database
) -> None:
    client, headers = runner
    await queue(db, SESSION, {"smoke": ON_BLUEBOX}, max_devkits=1)
    await Dispatcher(db).dispatch_once()  # or the server's own: the long poll waits for its lease
    polled = await (await client.get("/api/runner/v1/poll?wait=5", headers=headers)).json()
    job = polled["offers"][0]["id"]
    body = {"reason": "runner_full", "detail": "claims 9 vCPUs; this host has 2 allocatable", "retry": False}
    answer = await (await client.post(f"/api/runner/v1/jobs/{job}/refuse", json=body, headers=headers)).json()
    assert answer["state"] == "refused_before_start"
    [row] = await rows(db)
    assert (row.reason, row.detail) == ("runner_full", "claims 9 vCPUs; this host has 2 allocatable")


async def test_evicted_output_is_marked_not_skipped(
    runner: tuple[Client, dict[str, str]], db: Database
) -> None:
    client, headers = runner
    job = await accepted_job(client, headers, db)
    await client.post(f"/api/runner/v1/jobs/{job}/start", headers=headers)
    first = {"seq": 0, "offset": 0, "data": "boot\n"}
    await client.post(f"/api/runner/v1/jobs/{job}/output", json=first, headers=headers)
    # Chunks 1 and 2 are gone on the runner: it says so, sending chunk 3 at its own offset.
    late = {"seq": 3, "offset": 500, "data": "done\n", "truncated_before_seq": 3}
    answer = await (await client.post(f"/api/runner/v1/jobs/{job}/output", json=late, headers=headers)).json()
    assert answer == {"next_seq": 4}
    async with db.sessions() as session:
        chunks = await jobs.output(session, int(job))
    assert [seq for seq, _ in chunks] == [0, 1, 3]
    assert "chunks 1..2 were evicted" in chunks[1][1]
    assert chunks[2][1] == "done\n"


async def test_streamed_elapsed_queue_time_sets_a_local_deadline(
    runner: tuple[Client, dict[str, str]], db: Database, clock: FakeClock
) -> None:
    # The deadline is the budget less what the job spent in the server's queue, against the waits the
    # runner streams in its heartbeats: 12 s queued here leaves 18 s of the 30 s budget on the host.
    client, headers = runner
    # Made in one transaction: the server's own dispatcher runs beside this test, and a round of it that
    # read the job before the 12 s were written could write its own figure over them afterwards.
    resolution = {
        "tasks": [{"id": "smoke", "requested": ON_BLUEBOX}],
        "scheduling": {
            "max_devkits": 1,
            "strategy": "spread",
            "priority": "normal",
            "queue_wait_limit_s": 30,
        },
    }
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ["smoke"], resolution=resolution), db.clock())
        [row] = await session.scalars(select(JobRow))
        row.queue_wait_s = 12.0
    await Dispatcher(db).dispatch_once()  # or the server's own: the offer is the same
    polled = await (await client.get("/api/runner/v1/poll?wait=5", headers=headers)).json()
    [offer] = polled["offers"]
    assert offer["queue_wait_remaining_s"] == 18
    job = str(offer["id"])
    await client.post(f"/api/runner/v1/jobs/{job}/accept", headers=headers)
    for waited_ms, asked in ((10_000, []), (17_500, []), (18_000, [job])):
        await client.post("/api/runner/v1/heartbeat", json={"waiting": {job: waited_ms}}, headers=headers)
        polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
        assert polled["withdraw"] == asked, waited_ms


async def test_worker_behind_gate_keeps_its_full_queue_wait_budget(db: Database, clock: FakeClock) -> None:
    # A gate job takes the one device a normal job also waits for. The gate's own short budget is its
    # own: the worker behind it is withdrawn only when its own 300 s have passed.
    await lab(db)
    only_bluebox = {"labels": {"kerrigan.target_id": ["modalix-bluebox"]}, "tags": []}
    gate, worker = "cccccccc-cccc-cccc-cccc-cccccccccccc", "dddddddd-dddd-dddd-dddd-dddddddddddd"
    await queue(db, gate, {"gate": only_bluebox, "gate-2": only_bluebox}, repository="octo/a")
    await queue(db, worker, {"worker": only_bluebox}, repository="octo/b")
    from kerrigan.store.models import SessionRow

    async with db.sessions() as session, session.begin():
        for session_id, priority, budget in ((gate, "gate", 10), (worker, "normal", 300)):
            row = await session.scalar(select(SessionRow).where(SessionRow.id == session_id))
            assert row is not None
            row.priority = priority
            row.queue_wait_limit_s = budget
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    clock.advance(60)
    ended_early = (await dispatcher.dispatch_once()).withdrawn
    by_task = {row.task_id: row for row in await rows(db)}
    assert ended_early == (by_task["gate-2"].pk,)  # the gate's second job: its own 10 s budget
    assert by_task["worker"].state == "queued"
    clock.advance(241)
    assert (await dispatcher.dispatch_once()).withdrawn == (by_task["worker"].pk,)
