"""Holds on a real database (SQLite and PostgreSQL): a failed job's boards reserved for a person, each pinned
to its device and marked as the hold of the job, a gang's boards counted as one reservation, asked again
answered with the hold there is, a retired board refused; each hold audited."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from kerrigan.core.holds import HoldableJob
from kerrigan.core.inventory import DeviceState
from kerrigan.core.lifecycle import JobState
from kerrigan.core.reservations import RequestError, ReservationState
from kerrigan.core.roles import Principal
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.audit import list_audit
from kerrigan.store.database import Database
from kerrigan.store.holds import HoldRefusedError, place_hold
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import DeviceRow
from kerrigan.store.reservations import Reservation
from tests.integration.dispatch.test_dispatcher import lab

HUBOT = Principal("hubot")
GANG = HoldableJob(4242, "pair", JobState.FAILED, ("modalix-old-01", "modalix-bluebox"))


async def hold(db: Database, job: HoldableJob, per_user: int = 1) -> tuple[list[Reservation], bool]:
    async with db.sessions() as session, session.begin():
        return await place_hold(
            session,
            HUBOT,
            job,
            db.clock(),
            duration_s=900,
            inventory=await load_inventory(session),
            per_user=per_user,
        )


async def test_a_gang_jobs_boards_are_held_each_pinned_counted_once_and_granted(db: Database) -> None:
    await lab(db)
    made, new = await hold(db, GANG)
    assert new
    assert [(r.device, r.held_job_pk, r.duration_s) for r in made] == [
        ("modalix-old-01", 4242, 900),
        ("modalix-bluebox", 4242, 900),
    ]
    assert made[0].requirements["labels"] == {"kerrigan.target_id": ["modalix-old-01"]}

    again, new = await hold(db, GANG)  # a redelivered click: the same hold, nothing more
    assert not new
    assert [r.id for r in again] == [r.id for r in made]

    other = HoldableJob(4243, "boot", JobState.TIMED_OUT, ("modalix-redbox",))
    with pytest.raises(RequestError, match="KERRIGAN_RESERVATIONS_PER_USER"):
        await hold(db, other)  # per_user 1: the gang's two boards were one hold

    result = await Dispatcher(db).dispatch_once()
    assert sorted(r.device_id or "" for r in result.reserved) == ["modalix-bluebox", "modalix-old-01"]
    assert all(r.state is ReservationState.ACTIVE for r in result.reserved)
    async with db.sessions() as session:
        fields = sorted(e.field for e in await list_audit(session, actor="hubot"))
    assert [f for f in fields if f.startswith("hold:")] == ["hold:modalix-bluebox", "hold:modalix-old-01"]


async def test_a_retired_board_or_a_job_that_did_not_fail_is_refused(db: Database) -> None:
    await lab(db)
    async with db.sessions() as session, session.begin():
        await session.execute(
            update(DeviceRow).where(DeviceRow.id == "modalix-redbox").values(state=DeviceState.RETIRED)
        )
    with pytest.raises(HoldRefusedError, match="board modalix-redbox of job 7 is retired"):
        await hold(db, HoldableJob(7, "boot", JobState.FAILED, ("modalix-redbox",)))
    with pytest.raises(HoldRefusedError, match="did not fail"):
        await hold(db, HoldableJob(8, "boot", JobState.SUCCEEDED, ("modalix-old-01",)))
