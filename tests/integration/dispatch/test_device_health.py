"""Device health, owners' maintenance and host pauses on a real database, as the dispatcher sees them.

A device failing three jobs in a row for the infrastructure goes ``bad`` and gets no more jobs until a
person puts it back; a maintenance with ``until`` ends by itself and says so in the audit log; a paused
runner host's devices get no new job while the running ones finish, and the queue says why.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import select

from kerrigan.core.device_status import HostPause
from kerrigan.core.inventory import DeviceState
from kerrigan.core.matching import resolve
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store import jobs
from kerrigan.store.audit import Change, list_audit
from kerrigan.store.database import Database
from kerrigan.store.inventory import get_device, load_inventory, set_state
from kerrigan.store.models import JobRow
from kerrigan.store.queue_view import read_queue, requirements_of
from kerrigan.store.runners import (
    create_runner_token,
    host_report,
    mark_silent_hosts_offline,
    record_report,
    revoke_runner_token,
    set_pause,
)
from kerrigan.testing.clock import FakeClock
from tests.integration.dispatch.test_automatic_retry import end
from tests.integration.dispatch.test_dispatcher import lab, queue

BLUEBOX = {"labels": {"kerrigan.target_id": ["modalix-bluebox"]}, "tags": []}


async def run_one(db: Database, dispatcher: Dispatcher) -> JobRow:
    """Queue one job for modalix-bluebox, lease it, accept and start it."""
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    result = await dispatcher.dispatch_once()
    assert [grant.device_id for grant in result.granted] == ["modalix-bluebox"], result.plan
    async with db.sessions() as session, session.begin():
        job = await session.scalar(select(JobRow).where(JobRow.state == "leased"))
        assert job is not None
        assert job.host is not None
        await jobs.accept(session, str(job.pk), job.host, db.clock())
        await jobs.start(session, str(job.pk), job.host, db.clock())
        return job


async def waits_because(db: Database) -> list[str]:
    """The texts every queued job's candidates were rejected for, as the queue reads them."""
    async with db.sessions() as session:
        snapshot = await read_queue(session, db.clock(), lock=False)
        inventory = await load_inventory(session)
    assert snapshot is not None
    words = []
    for record in snapshot.records:
        requested = requirements_of(record)
        assert requested is not None
        resolution = resolve(requested, inventory)
        words += [reason.text for verdict in resolution.rejected for reason in verdict.reasons]
    return words


async def test_three_infrastructure_failures_in_a_row_make_a_device_bad_until_a_person_puts_it_back(
    db: Database, clock: FakeClock
) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    await end(db, await run_one(db, dispatcher), 75)
    await end(db, await run_one(db, dispatcher), 0)  # it worked: the count starts again
    for _ in range(3):
        last = await run_one(db, dispatcher)
        await end(db, last, 75)
    async with db.sessions() as session:
        stored = await get_device(session, "modalix-bluebox")
    health = stored.device.health
    assert (health.health.value, health.job) == ("bad", last.pk)
    assert health.reason == "3 infrastructure failures in a row (the last device_fault)"
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    assert (await dispatcher.dispatch_once()).granted == ()
    assert any(text.startswith("device health bad since ") for text in await waits_because(db))
    # An owner takes it out and puts it back: its health is unknown again, and it takes the waiting job.
    async with db.sessions() as session, session.begin():
        for state in (DeviceState.MAINTENANCE, DeviceState.AVAILABLE):
            await set_state(
                session,
                "modalix-bluebox",
                state,
                "new cable",
                until=None,
                change=Change("octocat", db.clock()),
            )
    async with db.sessions() as session:
        assert (await get_device(session, "modalix-bluebox")).device.health.health.value == "unknown"
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]
    # Both changes of its health are in the audit log: who, what, when, from what to what.
    async with db.sessions() as session:
        audit = await list_audit(session, device_id="modalix-bluebox")
    health = [(e.actor, e.before, e.after, e.pool_id) for e in reversed(audit) if e.field == "health"]
    assert health == [
        ("kerrigan", "unknown", f"bad: {stored.device.health.reason}", stored.device.pool_id),
        (
            "octocat",
            f"bad: {stored.device.health.reason}",
            "unknown: put back by a person",
            stored.device.pool_id,
        ),
    ]


async def test_a_maintenance_until_a_time_ends_by_itself(db: Database, clock: FakeClock) -> None:
    await lab(db)
    async with db.sessions() as session, session.begin():
        await set_state(
            session,
            "modalix-bluebox",
            DeviceState.MAINTENANCE,
            "reflashing the bootloader",
            until=db.clock() + timedelta(minutes=30),
            change=Change("hubot", db.clock()),
        )
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    dispatcher = Dispatcher(db)
    await dispatcher.expire()
    assert (await dispatcher.dispatch_once()).granted == ()
    assert any(
        text.startswith("device in maintenance since ")
        and "by hubot until " in text
        and text.endswith(": reflashing the bootloader")
        for text in await waits_because(db)
    )
    clock.advance(31 * 60)
    await dispatcher.expire()
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]
    async with db.sessions() as session:
        audit = await list_audit(session, device_id="modalix-bluebox", limit=5)
    ended = [(entry.actor, entry.field, entry.after) for entry in audit if entry.actor == "kerrigan"]
    assert ("kerrigan", "state", "available") in ended


async def test_a_paused_host_gets_no_new_job_until_it_is_resumed(db: Database, clock: FakeClock) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    running = await run_one(db, dispatcher)
    async with db.sessions() as session, session.begin():
        pause = HostPause("kernel upgrade", "octocat", db.clock(), db.clock() + timedelta(hours=1))
        assert await set_pause(session, str(running.host), pause, Change("octocat", db.clock())) is not None
    await end(db, running, 0)  # the running job finished as ever
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    assert (await dispatcher.dispatch_once()).granted == ()
    assert f"runner host {running.host} paused by octocat until " in " ".join(await waits_because(db))
    async with db.sessions() as session, session.begin():
        assert await set_pause(session, str(running.host), None, Change("octocat", db.clock())) is not None
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]


async def test_a_pause_until_a_time_ends_by_itself(db: Database, clock: FakeClock) -> None:
    await lab(db)
    async with db.sessions() as session, session.begin():
        device = await get_device(session, "modalix-bluebox")
        pause = HostPause("", "octocat", db.clock(), db.clock() + timedelta(minutes=5))
        await set_pause(session, device.device.host, pause, Change("octocat", db.clock()))
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    dispatcher = Dispatcher(db)
    assert (await dispatcher.dispatch_once()).granted == ()
    clock.advance(6 * 60)
    await dispatcher.expire()
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]


async def leased_one(db: Database, dispatcher: Dispatcher) -> JobRow:
    """Queue one job for modalix-bluebox and lease it."""
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]
    async with db.sessions() as session:
        job = await session.scalar(select(JobRow).where(JobRow.state == "leased"))
        assert job is not None
        assert job.host is not None
        return job


async def test_a_host_that_refuses_for_lack_of_room_is_held_then_offered_work_again(
    db: Database, clock: FakeClock
) -> None:
    # Not straight back to the host that said no: the job waits, naming the hold, and is offered again
    # once the hold has ended by itself.
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await leased_one(db, dispatcher)
    async with db.sessions() as session, session.begin():
        detail = "free 1024 bytes, floor 4096 bytes"
        moved = await jobs.refuse(
            session, str(job.pk), str(job.host), db.clock(), reason="runner_disk_full", detail=detail
        )
        assert moved.state == "queued"
    assert (await dispatcher.dispatch_once()).granted == ()
    assert f"runner host {job.host} paused by kerrigan until " in " ".join(await waits_because(db))
    clock.advance(61)
    await dispatcher.expire()
    assert [grant.device_id for grant in (await dispatcher.dispatch_once()).granted] == ["modalix-bluebox"]
    async with db.sessions() as session:
        audit = await list_audit(session, limit=5)
    assert any(
        entry.actor == "kerrigan"
        and "it refused a job runner_disk_full (free 1024 bytes" in (entry.after or "")
        for entry in audit
    )


async def test_a_refusal_leaves_a_persons_pause_as_it_is(db: Database, clock: FakeClock) -> None:
    await lab(db)
    dispatcher = Dispatcher(db)
    job = await leased_one(db, dispatcher)
    pause = HostPause("kernel upgrade", "octocat", db.clock(), None)  # until resumed
    async with db.sessions() as session, session.begin():
        await set_pause(session, str(job.host), pause, Change("octocat", db.clock()))
        await jobs.refuse(session, str(job.pk), str(job.host), db.clock(), reason="runner_full", detail="")
    async with db.sessions() as session:
        report = await host_report(session, str(job.host))
    assert report is not None
    assert report.pause == pause


async def test_only_a_devices_own_host_says_it_is_absent(db: Database, clock: FakeClock) -> None:
    from kerrigan.store.runners import record_report

    await lab(db)

    async def present() -> bool:
        async with db.sessions() as session:
            return (await load_inventory(session)).devices_by_id["modalix-bluebox"].present

    async with db.sessions() as session, session.begin():  # lab-a-02's file names lab-a-01's board
        await record_report(
            session, "lab-a-02", db.clock(), resources={}, device_states={"modalix-bluebox": "missing"}
        )
    assert await present()
    async with db.sessions() as session, session.begin():
        await record_report(
            session, "lab-a-01", db.clock(), resources={}, device_states={"modalix-bluebox": "missing"}
        )
    assert not await present()
    assert "device absent from runner host lab-a-01" in await waits_because_of_bluebox(db)


async def waits_because_of_bluebox(db: Database) -> list[str]:
    await queue(db, str(uuid.uuid4()), {"smoke": BLUEBOX})
    assert (await Dispatcher(db).dispatch_once()).granted == ()
    return await waits_because(db)


async def test_a_runner_host_going_online_and_offline_and_its_tokens_are_in_the_audit_log(
    db: Database, clock: FakeClock
) -> None:
    async with db.sessions() as session, session.begin():
        await create_runner_token(session, "lab-z-09", db.clock(), actor="olga")
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        await record_report(session, "lab-z-09", db.clock(), resources={}, device_states={})
        await record_report(session, "lab-z-09", db.clock(), resources={}, device_states={})  # no change
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        assert await mark_silent_hosts_offline(session, db.clock(), timedelta(seconds=45)) == ["lab-z-09"]
    async with db.sessions() as session, session.begin():
        await record_report(session, "lab-z-09", db.clock(), resources={}, device_states={})
    clock.advance(60)
    async with db.sessions() as session, session.begin():
        await create_runner_token(session, "lab-z-09", db.clock(), actor="olga")  # rotate
    async with db.sessions() as session, session.begin():
        assert await revoke_runner_token(session, "lab-z-09", Change("olga", db.clock()))
        assert not await revoke_runner_token(session, "lab-z-09", Change("olga", db.clock()))  # none left
    async with db.sessions() as session:
        audit = await list_audit(session)
    made, rotated = "token made 2026-11-29 12:00", "token made 2026-11-29 12:03"
    assert [(e.actor, e.action, e.subject_id, e.field, e.before, e.after) for e in reversed(audit)] == [
        ("olga", "add", "lab-z-09", "token", None, made),
        ("kerrigan", "change", "lab-z-09", "online", "offline", "online: its runner spoke"),
        ("kerrigan", "change", "lab-z-09", "online", "online", "offline: no heartbeat for 45 s"),
        ("kerrigan", "change", "lab-z-09", "online", "offline", "online: its runner spoke"),
        ("olga", "change", "lab-z-09", "token", made, rotated),
        ("olga", "remove", "lab-z-09", "token", rotated, None),
        ("olga", "change", "lab-z-09", "online", "online", "offline: its token was revoked"),
    ]
    assert [e.at for e in reversed(audit)][-1] == db.clock()
    async with db.sessions() as session:
        report = await host_report(session, "lab-z-09")
    assert report is not None
    assert (report.online, report.token, report.token_created_at) == (False, False, None)
