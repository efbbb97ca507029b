"""A session's resolution as stored and handed back: its per-device lists compact in the database, expanded
for the readers that show them, and left compact for one that needs none (a check run's projection)."""

from __future__ import annotations

from kerrigan.core.lifecycle import resolution_outcome
from kerrigan.store.database import Database
from kerrigan.store.sessions import create_session, get_session, resolve_session
from kerrigan.testing import builders

SESSION = "66666666-6666-6666-6666-666666666666"
REJECTED = [
    {"device": f"modalix-{n:03}", "pool": "sdk-2-2-som", "reasons": ["form_factor missing"], "never": True}
    for n in range(100)
]
DOCUMENT = {
    "workflow": "hil-smoke",
    "retry": {"infrastructure": 2},
    "tasks": [{"id": "smoke", "outcome": "unschedulable", "rejected_devices": REJECTED}],
}


async def resolved(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ("smoke",)), db.clock())
        back = await resolve_session(
            session,
            SESSION,
            db.clock(),
            outcome=resolution_outcome(valid=True, unschedulable=False),
            resolution=DOCUMENT,
            check_run={"name": "kerrigan / hil-smoke"},
        )
    assert back.resolution == DOCUMENT


async def test_a_stored_resolution_comes_back_as_it_was_resolved(db: Database) -> None:
    await resolved(db)
    async with db.sessions() as session:
        found = await get_session(session, SESSION)
    assert found.resolution == DOCUMENT


async def test_without_device_lists_the_rest_of_the_resolution_is_there_and_the_lists_are_not(
    db: Database,
) -> None:
    await resolved(db)
    async with db.sessions() as session:
        found = await get_session(session, SESSION, device_lists=False)
    assert found.resolution["retry"] == {"infrastructure": 2}
    [task] = found.resolution["tasks"]
    assert (task["id"], task["outcome"]) == ("smoke", "unschedulable")
    assert not isinstance(task["rejected_devices"], list)  # compact: readers take a non-list for none
    assert found.cannot_pass() == "task smoke can never be scheduled on the lab's devices"
