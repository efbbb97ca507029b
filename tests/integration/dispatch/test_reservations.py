"""Reservations on a real database: queued with CI after gate work, granted a device leased to the person
(offered to no runner), ended by time or by a person allowed to, the device going to the queue at once."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from kerrigan.core.reservations import RequestError, ReservationState, read_request
from kerrigan.core.roles import Principal
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.audit import list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import load_inventory
from kerrigan.store.leases import leased_devices, renew_leases
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.store.reservations import (
    NotYoursError,
    Reservation,
    UnmatchableError,
    create_reservation,
    get_reservation,
    release_reservation,
)
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_dispatcher import lab, queue

HUBOT = Principal("hubot")
# modalix-old-01 is the one device with SDK 2.1.1 and uart-debug (pool sdk-2-1-som, owned by hubot).
OLD_UART = {"labels": {"sdk": ["2.1.1"], "form_factor": ["som"]}, "tags": ["uart-debug"]}


async def reserve(db: Database, body: dict[str, object], who: Principal = HUBOT) -> Reservation:
    async with db.sessions() as session, session.begin():
        inventory = await load_inventory(session)
        reservation, _ = await create_reservation(
            session, who, read_request(body), db.clock(), inventory=inventory
        )
        return reservation


async def state_of(db: Database, reservation: Reservation) -> Reservation:
    async with db.sessions() as session:
        return await get_reservation(session, reservation.id)


async def test_a_reservation_is_granted_a_free_device_leased_to_the_person_not_offered(db: Database) -> None:
    await lab(db)
    asked = await reserve(db, {"labels": {"sdk": "2.1.1"}, "tags": ["uart-debug"], "duration_s": 3600})
    assert asked.state is ReservationState.WAITING
    result = await Dispatcher(db).dispatch_once()
    [granted] = result.reserved
    assert (granted.state, granted.device_id, granted.host) == (
        ReservationState.ACTIVE,
        "modalix-old-01",
        "lab-a-02",
    )
    assert granted.ends_at == db.clock() + timedelta(hours=1)
    async with db.sessions() as session:
        assert await leased_devices(session) == {"modalix-old-01"}
        assert await jobs.offers(session, "lab-a-02") == []  # nothing for the runner to run
        lease = await session.get(DeviceLeaseRow, "modalix-old-01")
        assert lease is not None
        assert (lease.job_pk, lease.expires_at) == (None, granted.ends_at)
        [entry] = [e for e in await list_audit(session) if e.subject_type == "reservation"]
        assert (entry.actor, entry.field, entry.pool_id) == ("hubot", "granted:modalix-old-01", "sdk-2-1-som")


async def test_a_reservation_goes_before_normal_work_and_ci_waits_for_its_device(db: Database) -> None:
    await lab(db)
    await queue(db, "11111111-1111-1111-1111-111111111111", {"smoke": OLD_UART})
    asked = await reserve(db, {"device": "modalix-old-01", "duration_s": 600})
    first = await Dispatcher(db).dispatch_once()
    assert [r.id for r in first.reserved] == [asked.id]
    assert first.granted == ()
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow))
        assert job is not None
        assert job.state == "queued"


async def test_when_its_time_runs_out_the_device_goes_to_the_next_job_in_the_same_round(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    asked = await reserve(db, {"device": "modalix-old-01", "duration_s": 600})
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    await queue(db, "22222222-2222-2222-2222-222222222222", {"smoke": OLD_UART})
    async with db.sessions() as session, session.begin():
        await renew_leases(session, "lab-a-02", db.clock(), dispatcher.lease_ttl)  # a heartbeat
    assert (await state_of(db, asked)).ends_at == db.clock() + timedelta(seconds=600)  # not the runner's
    clock.advance(601)
    await dispatcher.expire()
    ended = await state_of(db, asked)
    assert (ended.state, ended.end_reason, ended.ended_by) == (ReservationState.ENDED, "expired", None)
    result = await dispatcher.dispatch_once()
    assert [g.device_id for g in result.granted] == ["modalix-old-01"]


async def test_the_person_its_pools_owners_and_admins_release_it_and_nobody_else(db: Database) -> None:
    await lab(db)
    asked = await reserve(db, {"device": "modalix-bluebox", "duration_s": 600}, Principal("mona"))
    await Dispatcher(db).dispatch_once()
    async with db.sessions() as session, session.begin():
        with pytest.raises(NotYoursError):
            await release_reservation(session, asked.id, Principal("stranger"), db.clock())
    async with db.sessions() as session, session.begin():
        released = await release_reservation(session, asked.id, Principal("octocat"), db.clock())  # owner
        assert (released.state, released.end_reason, released.ended_by) == (
            ReservationState.ENDED,
            "released",
            "octocat",
        )
        assert await leased_devices(session) == set()


async def test_a_request_nothing_can_match_is_refused_with_every_reason_and_nothing_queued(
    db: Database,
) -> None:
    await lab(db)
    with pytest.raises(UnmatchableError) as refused:
        await reserve(db, {"labels": {"form_factor": "usb-stick"}, "duration_s": 60})
    assert "0/12 devices available" in str(refused.value)
    assert "form_factor expected usb-stick" in str(refused.value)
    with pytest.raises(RequestError, match="there is no device nope"):
        await reserve(db, {"device": "nope", "duration_s": 60})
    async with db.sessions() as session:
        assert (await session.execute(select(DeviceLeaseRow))).all() == []


async def test_a_person_holds_at_most_two_and_a_wait_that_runs_out_leaves_the_queue(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    first = await reserve(db, {"device": "modalix-old-01", "duration_s": 600})
    waiting = await reserve(db, {"device": "modalix-old-01", "duration_s": 600, "wait_s": 30})
    with pytest.raises(RequestError, match="at most 2 at once"):
        await reserve(db, {"device": "modalix-bluebox", "duration_s": 600})
    dispatcher = Dispatcher(db)
    await dispatcher.dispatch_once()
    assert (await state_of(db, first)).state is ReservationState.ACTIVE
    assert (await state_of(db, waiting)).state is ReservationState.WAITING  # its device is the first's
    clock.advance(31)
    await dispatcher.expire()
    gave_up = await state_of(db, waiting)
    assert (gave_up.state, gave_up.end_reason) == (ReservationState.ENDED, "wait_expired")


async def test_metrics_count_waiting_and_active_reservations(db: Database) -> None:
    from kerrigan.store.lab_figures import PoolsOfRequirements, read_figures

    await lab(db)
    await reserve(db, {"device": "modalix-old-01", "duration_s": 600})
    await reserve(db, {"device": "modalix-old-01", "duration_s": 600, "wait_s": 60})
    await Dispatcher(db).dispatch_once()
    async with db.sessions() as session:
        figures = await read_figures(session, db.clock(), PoolsOfRequirements())
    assert figures.reservations == {"active": 1, "waiting": 1}
