"""A session's resolution as stored and handed back: its per-device lists compact in the database, expanded
for the readers that show them, and left compact for one that needs none (a check run's projection); its
retry policy beside it."""

from __future__ import annotations

from dataclasses import replace

from kerrigan.core.lifecycle import RetryPolicy, resolution_outcome
from kerrigan.core.matching import Outcome
from kerrigan.core.resolution import Resolution
from kerrigan.store.database import Database
from kerrigan.store.sessions import create_session, delivered_manifests, get_session, resolve_session
from kerrigan.testing import builders

SESSION = "66666666-6666-6666-6666-666666666666"
OTHER = "77777777-7777-7777-7777-777777777777"
REJECTED = [
    {"device": f"modalix-{n:03}", "pool": "sdk-2-2-som", "reasons": ["form_factor missing"], "never": True}
    for n in range(100)
]
DOCUMENT = {
    "workflow": "hil-smoke",
    "tasks": [{"id": "smoke", "outcome": "unschedulable", "rejected_devices": REJECTED}],
}
RETRY = {"infrastructure": 2}


async def resolved(db: Database) -> None:
    async with db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ("smoke",)), db.clock())
        back = await resolve_session(
            session,
            SESSION,
            db.clock(),
            outcome=resolution_outcome(valid=True, unschedulable=False),
            resolution=Resolution.from_document(DOCUMENT),
            check_run={"name": "kerrigan / hil-smoke"},
            retry=RetryPolicy.from_dict(RETRY),
        )
    assert back.resolution == Resolution.from_document(DOCUMENT)
    assert back.retry == RetryPolicy.from_dict(RETRY)


async def test_a_stored_resolution_comes_back_as_it_was_resolved(db: Database) -> None:
    await resolved(db)
    async with db.sessions() as session:
        found = await get_session(session, SESSION)
    assert found.resolution == Resolution.from_document(DOCUMENT)
    assert len(found.resolution.tasks[0].match.rejected_devices) == len(REJECTED)
    assert found.retry == RetryPolicy.from_dict(RETRY)


async def test_without_device_lists_the_rest_of_the_resolution_is_there_and_the_lists_are_not(
    db: Database,
) -> None:
    await resolved(db)
    async with db.sessions() as session:
        found = await get_session(session, SESSION, device_lists=False)
    assert found.retry == RetryPolicy.from_dict(RETRY)
    [task] = found.resolution.tasks
    assert (task.id, task.outcome) == ("smoke", Outcome.UNSCHEDULABLE)
    assert task.match.rejected_devices == ()  # compact: read as none
    assert found.cannot_pass() == "task smoke can never be scheduled on the lab's devices"


async def test_the_manifests_a_delivery_started_are_known_by_its_id_and_repository(db: Database) -> None:
    """What a delivery processed again after a restart skips (``github.sessions.start_workflows``)."""
    started = builders.session(SESSION)
    started = replace(started, delivery_id="d-1", manifest_path=".kerrigan/workflows/smoke.yml")
    other = replace(builders.session(OTHER), delivery_id="d-2", manifest_path=".kerrigan/workflows/other.yml")
    async with db.sessions() as session, session.begin():
        await create_session(session, started, db.clock())
        await create_session(session, other, db.clock())
    async with db.sessions() as session:
        assert await delivered_manifests(session, "octo/firmware", "d-1") == {".kerrigan/workflows/smoke.yml"}
        assert await delivered_manifests(session, "octo/other", "d-1") == set()
        assert await delivered_manifests(session, "octo/firmware", "d-3") == set()
