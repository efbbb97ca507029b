"""Jobs that hold no device (``board: none``) on a real database: leased room on a runner host, no device,
offered to that host with no device, their vCPUs counted against its max_weight; their lease renewed by its
heartbeats and lost with them; a retry after the host failed goes elsewhere; a build then a boarded test."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import select

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.database import Database
from kerrigan.store.leases import HostGrant, grant_host_leases, leased_devices, renew_leases
from kerrigan.store.models import DeviceRow, HostLeaseRow, JobRow, RunnerHostRow
from kerrigan.store.queue_view import read_queue, waiting_for_device
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.waiting import wait_until
from tests.conftest import FakeClock
from tests.integration.dispatch.test_dispatcher import SOM_UART, lab

ANY_HOST: dict[str, Any] = {"labels": {}, "tags": []}
LAB_A: dict[str, Any] = {"labels": {"kerrigan.host": ["lab-a-01", "lab-a-02"]}, "tags": []}


async def queue(
    db: Database,
    session_id: str,
    tasks: Mapping[str, Mapping[str, Any]],
    *,
    boardless: Iterable[str],
    needs: Mapping[str, Iterable[str]] | None = None,
    vcpus: int = 2,
    max_devkits: int = 4,
) -> None:
    resolution = {
        "tasks": [{"id": task, "requested": requested} for task, requested in tasks.items()],
        "scheduling": {"max_devkits": max_devkits, "strategy": "spread", "priority": "normal"},
    }
    new = builders.session(
        session_id,
        tasks,
        resolution=resolution,
        retry=RetryPolicy(infrastructure=2, exit_status=frozenset(), limit=0),
        vcpus=vcpus,
        boardless=boardless,
        needs=needs,
    )
    async with db.sessions() as session, session.begin():
        await create_session(session, new, db.clock())


async def report(db: Database, resources: Mapping[str, dict[str, int]]) -> None:
    """What each runner host's agent reported (``vcpus``, ``max_weight``), by host."""
    async with db.sessions() as session, session.begin():
        for host, values in resources.items():
            row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host))
            assert row is not None
            row.resources = values


AGENT = {"vcpus": 16, "max_weight": 28}


async def lab_with_agents(db: Database) -> None:
    """The lab, its online hosts' agents registered: a boardless job goes only where an agent reported."""
    await lab(db)
    await report(db, {"lab-a-01": AGENT, "lab-a-02": AGENT, "lab-b-01": AGENT})


async def job_row(db: Database, task_id: str, attempt: int = 1) -> JobRow:
    async with db.sessions() as session:
        row = await session.scalar(select(JobRow).where(JobRow.task_id == task_id, JobRow.attempt == attempt))
        assert row is not None
        return row


async def host_leases(db: Database) -> dict[int, str]:
    async with db.sessions() as session:
        return dict((await session.execute(select(HostLeaseRow.job_pk, HostLeaseRow.host))).all())


async def test_a_boardless_job_is_leased_room_on_a_runner_host_and_no_device(db: Database) -> None:
    await lab_with_agents(db)
    await report(
        db, {"lab-a-01": {"vcpus": 16, "max_weight": 16}, "lab-a-02": {"vcpus": 16, "max_weight": 8}}
    )
    await queue(db, "11111111-1111-1111-1111-111111111111", {"build": LAB_A}, boardless=["build"], vcpus=8)
    result = await Dispatcher(db).dispatch_once()
    assert result.granted == ()
    assert [(grant.host, grant.session_id[:8]) for grant in result.placed] == [("lab-a-01", "11111111")]
    build = await job_row(db, "build")
    assert (build.state, build.device_id, build.host, build.devices) == ("leased", None, "lab-a-01", [])
    assert await host_leases(db) == {build.pk: "lab-a-01"}
    async with db.sessions() as session:
        assert await leased_devices(session) == set()  # no board is held
        [offer] = await jobs.offers(session, "lab-a-01")
        assert (offer.job_id, offer.device_id, offer.spec.vcpus) == (str(build.pk), None, 8)
        assert await jobs.offers(session, "lab-a-02") == []


async def test_it_runs_its_life_on_that_host_and_frees_its_room_when_it_ends(db: Database) -> None:
    await lab_with_agents(db)
    await queue(db, "22222222-2222-2222-2222-222222222222", {"lint": LAB_A}, boardless=["lint"])
    await Dispatcher(db).dispatch_once()
    lint = await job_row(db, "lint")
    host = lint.host
    assert host is not None
    other = "lab-a-02" if host == "lab-a-01" else "lab-a-01"
    async with db.sessions() as session, session.begin():
        try:
            await jobs.accept(session, str(lint.pk), other, db.clock())
            raise AssertionError("another host accepted it")
        except jobs.NotYoursError:
            pass
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(lint.pk), host, db.clock())
        await jobs.start(session, str(lint.pk), host, db.clock(), cpus="0-1")
        assert await jobs.held_jobs(session, host) == {str(lint.pk): "running"}
        await jobs.append_output(session, str(lint.pk), host, seq=0, byte_offset=0, data="lint ok\n")
        await jobs.finish(session, str(lint.pk), host, db.clock(), exit_status=0, accounting={"wall_s": 1})
    ended = await job_row(db, "lint")
    assert (ended.state, ended.device_id, ended.host) == ("succeeded", None, host)
    assert await host_leases(db) == {}
    async with db.sessions() as session:
        assert await jobs.held_jobs(session, host) == {}


async def test_its_vcpus_count_against_the_hosts_max_weight_while_it_holds_them(db: Database) -> None:
    await lab_with_agents(db)
    await report(db, {"lab-a-01": {"vcpus": 16, "max_weight": 6}, "lab-a-02": {"vcpus": 16, "max_weight": 6}})
    session_id = "33333333-3333-3333-3333-333333333333"
    await queue(db, session_id, {"a": LAB_A, "b": LAB_A, "c": LAB_A}, boardless=["a", "b", "c"], vcpus=4)
    dispatcher = Dispatcher(db)
    first = await dispatcher.dispatch_once()
    assert sorted(grant.host for grant in first.placed) == ["lab-a-01", "lab-a-02"]
    second = await dispatcher.dispatch_once()
    assert second.placed == ()  # each host has 2 of its 6 left: the third waits for room
    assert second.plan is not None
    [waiting] = second.plan.waiting.values()
    assert waiting.kind.value == "capacity"
    # A boarded job on a host whose room the builds hold waits for room too, not for a device.
    await queue(db, "44444444-4444-4444-4444-444444444444", {"smoke": SOM_UART}, boardless=[], vcpus=4)
    third = await dispatcher.dispatch_once()
    assert third.granted == ()
    smoke = await job_row(db, "smoke")
    assert third.plan is not None
    assert third.plan.waiting[str(smoke.pk)].kind.value == "capacity"


async def test_it_does_not_count_against_its_sessions_max_devkits(db: Database) -> None:
    await lab_with_agents(db)
    await queue(
        db,
        "55555555-5555-5555-5555-555555555555",
        {"build": ANY_HOST, "smoke": SOM_UART},
        boardless=["build"],
        max_devkits=1,
    )
    result = await Dispatcher(db).dispatch_once()
    assert len(result.placed) == 1
    assert [grant.device_id for grant in result.granted] in (["modalix-bluebox"], ["modalix-redbox"])


async def test_a_build_then_a_boarded_test_the_board_is_leased_only_for_the_test(db: Database) -> None:
    await lab_with_agents(db)
    await queue(
        db,
        "66666666-6666-6666-6666-666666666666",
        {"build": ANY_HOST, "test": SOM_UART},
        boardless=["build"],
        needs={"test": ["build"]},
    )
    dispatcher = Dispatcher(db)
    first = await dispatcher.dispatch_once()
    assert (len(first.placed), first.granted) == (1, ())
    async with db.sessions() as session:
        assert await leased_devices(session) == set()
    test = await job_row(db, "test")
    assert test.state == "waiting"
    build = await job_row(db, "build")
    host = build.host
    assert host is not None
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(build.pk), host, db.clock())
        await jobs.start(session, str(build.pk), host, db.clock())
        await jobs.finish(session, str(build.pk), host, db.clock(), exit_status=0, accounting=None)
    assert (await job_row(db, "test")).state == "queued"
    second = await dispatcher.dispatch_once()
    assert second.placed == ()
    [grant] = second.granted
    assert grant.device_id in ("modalix-bluebox", "modalix-redbox")
    async with db.sessions() as session:
        assert await leased_devices(session) == {grant.device_id}


async def test_heartbeats_renew_its_room_and_silence_loses_it_as_a_devices_lease(
    db: Database, clock: FakeClock
) -> None:
    await lab_with_agents(db)
    await queue(db, "77777777-7777-7777-7777-777777777777", {"build": LAB_A}, boardless=["build"])
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    build = await job_row(db, "build")
    assert build.host is not None
    clock.advance(50)
    async with db.sessions() as session, session.begin():
        assert await renew_leases(session, build.host, db.clock(), dispatcher.lease_ttl) == 1
    clock.advance(50)
    assert await dispatcher.expire() == ()  # renewed: not lost
    clock.advance(61)
    assert await dispatcher.expire() == (build.pk,)
    again = await job_row(db, "build")
    assert (again.state, again.reason) == ("queued", "runner_lost")  # never started: queued once more
    assert await host_leases(db) == {}
    await dispatcher.dispatch_once()
    leased = await job_row(db, "build")
    assert leased.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(leased.pk), leased.host, db.clock())
        await jobs.start(session, str(leased.pk), leased.host, db.clock())
    clock.advance(61)
    await dispatcher.expire()
    lost = await job_row(db, "build")
    assert (lost.state, lost.reason) == ("retried", "runner_lost")  # failed, and another attempt queued
    assert (await job_row(db, "build", attempt=2)).state == "queued"


async def test_a_retry_after_an_infrastructure_failure_avoids_the_host_it_failed_on(
    db: Database, clock: FakeClock
) -> None:
    await lab_with_agents(db)
    await queue(db, "88888888-8888-8888-8888-888888888888", {"build": LAB_A}, boardless=["build"])
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    first = await job_row(db, "build")
    assert first.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(first.pk), first.host, db.clock())
        await jobs.start(session, str(first.pk), first.host, db.clock())
    clock.advance(61)
    await dispatcher.expire()  # runner_lost after it started: failed, and retried (infrastructure: 2)
    retry = await job_row(db, "build", attempt=2)
    assert (retry.state, retry.boardless, retry.avoid_hosts, retry.avoid_devices) == (
        "queued",
        True,
        [first.host],
        [],
    )
    async with db.sessions() as session, session.begin():
        # The first host came back: it is still avoided while another host can take the job.
        await renew_leases(session, first.host, db.clock(), dispatcher.lease_ttl)
    await dispatcher.dispatch_once()
    second = await job_row(db, "build", attempt=2)
    assert second.host in {"lab-a-01", "lab-a-02"} - {first.host}


async def test_a_boardless_jobs_failure_counts_against_no_device(db: Database) -> None:
    await lab_with_agents(db)
    await queue(db, "99999999-9999-9999-9999-999999999999", {"build": LAB_A}, boardless=["build"])
    await Dispatcher(db).dispatch_once()
    build = await job_row(db, "build")
    assert build.host is not None
    async with db.sessions() as session, session.begin():
        await jobs.accept(session, str(build.pk), build.host, db.clock())
        await jobs.start(session, str(build.pk), build.host, db.clock())
        # Exit 75 is a device fault: a job that holds no device faults none.
        await jobs.finish(session, str(build.pk), build.host, db.clock(), exit_status=75, accounting=None)
    async with db.sessions() as session:
        counts = dict((await session.execute(select(DeviceRow.id, DeviceRow.infrastructure_failures))).all())
        assert set(counts.values()) == {0}


async def test_a_job_is_leased_room_once_however_many_dispatchers_try(db: Database) -> None:
    await lab_with_agents(db)
    await queue(db, "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", {"build": LAB_A}, boardless=["build"])
    build = await job_row(db, "build")
    grant = HostGrant(build.pk, "lab-a-01", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")
    other = HostGrant(build.pk, "lab-a-02", "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa")
    async with db.sessions() as session, session.begin():
        assert await grant_host_leases(session, [grant], db.clock(), Dispatcher(db).lease_ttl) == [grant]
    async with db.sessions() as session, session.begin():
        assert await grant_host_leases(session, [other], db.clock(), Dispatcher(db).lease_ttl) == []
    assert await host_leases(db) == {build.pk: "lab-a-01"}
    assert (await job_row(db, "build")).host == "lab-a-01"


async def test_the_queue_shows_where_a_boardless_job_goes_next(db: Database) -> None:
    await lab_with_agents(db)
    await report(db, {"lab-a-01": {"vcpus": 16, "max_weight": 6}, "lab-a-02": {"vcpus": 16, "max_weight": 2}})
    await queue(db, "bbbbbbbb-bbbb-bbbb-bbbb-bbbbbbbbbbbb", {"build": LAB_A}, boardless=["build"], vcpus=4)
    async with db.sessions() as session:
        snapshot = await read_queue(session, db.clock(), lock=False)
    assert snapshot is not None
    [(job, host)] = snapshot.plan.placed
    assert (job.hosts, host) == (("lab-a-01", "lab-a-02"), "lab-a-01")
    assert snapshot.host_room_after_plan["lab-a-01"] == 2


async def test_the_runner_protocol_offers_it_with_no_device_and_renews_its_room(
    db: Database, aiohttp_client: Callable[..., Any]
) -> None:
    await lab_with_agents(db)
    async with db.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", db.clock())
    settings = Settings(database_url=db.engine.url.render_as_string(hide_password=False))
    client = await aiohttp_client(create_app(settings, clock=db.clock))
    auth = {"Authorization": f"Bearer {token}"}
    registration = {"protocol": [1], "capabilities": [], "resources": {"vcpus": 16, "max_weight": 28}}
    assert (await client.post("/api/runner/v1/register", json=registration, headers=auth)).status == 200
    await queue(db, "cccccccc-cccc-cccc-cccc-cccccccccccc", {"build": LAB_A}, boardless=["build"], vcpus=4)

    async def leased() -> JobRow | None:  # by this round or the app's own dispatcher's, whichever takes it
        await Dispatcher(db).dispatch_once()
        row = await job_row(db, "build")
        return row if row.state == "leased" else None

    build = await wait_until(leased)
    assert build.host == "lab-a-01"
    polled = await (await client.get("/api/runner/v1/poll?wait=0", headers=auth)).json()
    [offer] = polled["offers"]
    assert offer["id"] == str(build.pk)
    assert (offer["device"], offer["board"], offer["labels"], offer["devices"]) == (None, None, {}, [])
    assert offer["claim"] == {"vcpus": 4}
    accepted = await client.post(f"/api/runner/v1/jobs/{build.pk}/accept", json={}, headers=auth)
    assert (await accepted.json())["state"] == "accepted"
    beat = await (await client.post("/api/runner/v1/heartbeat", json={}, headers=auth)).json()
    assert (beat["leases_renewed"], beat["jobs"]) == (1, {str(build.pk): "accepted"})


async def test_its_host_is_asked_to_cancel_or_withdraw_it_and_no_other_host_is(db: Database) -> None:
    await lab_with_agents(db)
    await queue(db, "dddddddd-dddd-dddd-dddd-dddddddddddd", {"build": LAB_A}, boardless=["build"])
    await queue(db, "eeeeeeee-eeee-eeee-eeee-eeeeeeeeeeee", {"lint": LAB_A}, boardless=["lint"])
    await Dispatcher(db).dispatch_once()
    build, lint = await job_row(db, "build"), await job_row(db, "lint")
    assert build.host is not None
    assert lint.host is not None
    other = "lab-a-02" if build.host == "lab-a-01" else "lab-a-01"
    async with db.sessions() as session, session.begin():
        for job in (build, lint):
            assert job.host is not None
            await jobs.accept(session, str(job.pk), job.host, db.clock())
        await jobs.start(session, str(build.pk), build.host, db.clock())
        await jobs.request_cancel(session, "dddddddd-dddd-dddd-dddd-dddddddddddd", db.clock())
        # lint waits on its host for CPUs past its queue-wait budget: withdrawn, asked of its host only.
        waited = {str(lint.pk): 10**9}
        not_lints = next(host for host in ("lab-a-01", "lab-a-02", "lab-b-01") if host != lint.host)
        assert await jobs.observe_runner_waits(session, not_lints, waited, db.clock()) == []
        assert await jobs.observe_runner_waits(session, lint.host, waited, db.clock()) == [str(lint.pk)]
    async with db.sessions() as session:
        asked = await jobs.runner_requests(session, build.host)
        assert str(build.pk) in asked.cancel
        elsewhere = await jobs.runner_requests(session, other)
        assert str(build.pk) not in elsewhere.cancel
        assert str(lint.pk) in (await jobs.runner_requests(session, lint.host)).withdraw


async def test_a_queued_boardless_job_waits_for_no_device_a_person_holds(db: Database) -> None:
    # A reservation is extended only while no queued job could take its board: a build on the board's
    # host is not such a job.
    await lab_with_agents(db)
    on_bluebox_host = {"labels": {"kerrigan.host": ["lab-a-01"]}, "tags": []}
    await queue(db, "ffffffff-ffff-ffff-ffff-ffffffffffff", {"build": on_bluebox_host}, boardless=["build"])
    async with db.sessions() as session:
        assert await waiting_for_device(session, "modalix-bluebox") == 0
    await queue(db, "f0f0f0f0-f0f0-f0f0-f0f0-f0f0f0f0f0f0", {"smoke": on_bluebox_host}, boardless=[])
    async with db.sessions() as session:
        assert await waiting_for_device(session, "modalix-bluebox") == 1
