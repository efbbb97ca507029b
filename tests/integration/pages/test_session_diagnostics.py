"""A session resolved against 10,000 devices: its diagnostics stored compact, its page and API as before."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from kerrigan.core.explain import resolution_json
from kerrigan.core.lifecycle import RetryPolicy, resolution_outcome
from kerrigan.core.matching import resolve
from kerrigan.core.resolution import Resolution, ResolvedTask
from kerrigan.github.checks import CheckRunBody
from kerrigan.store.models import SessionRow
from kerrigan.store.sessions import create_session, get_session, resolve_session
from kerrigan.testing import builders
from kerrigan.testing.labs import synthetic_lab
from kerrigan.web.pages.sessions.resolution_views import REJECTED_SHOWN, bounded, task_view
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import device_links, table, text

Open = Callable[..., Any]
SESSION = "d1a90000-0000-4000-8000-000000000001"
PLAIN = "d1a90000-0000-4000-8000-000000000002"


def unschedulable_document(pools: int = 100, per_pool: int = 100) -> dict[str, Any]:
    """The explain document of a task no device of a synthetic lab can match, with every reason."""
    lab = synthetic_lab(pools, per_pool)
    unmatchable = builders.requirements({"form-factor": "som", "sdk": "2.2.0"}, tags=["uart-debgu"])
    task = {"id": "smoke", "line": 3, **resolution_json(resolve(unmatchable, lab, repository="octo/fw"))}
    document: dict[str, Any] = json.loads(json.dumps({"workflow": "w", "file": "w.yml", "tasks": [task]}))
    return document


RETRY = {"infrastructure": 2, "exit_status": [], "limit": 0}


async def store(site: Site, session_id: str, document: dict[str, Any]) -> None:
    async with site.database.sessions() as db, db.begin():
        await create_session(db, builders.session(session_id), site.database.clock())
        await resolve_session(
            db,
            session_id,
            site.database.clock(),
            outcome=resolution_outcome(valid=True, unschedulable=True),
            resolution=Resolution.from_document(document),
            retry=RetryPolicy.from_dict(RETRY),
            check_run=CheckRunBody(
                {"status": "completed", "conclusion": "failure", "output": {"title": "t", "summary": "s"}}
            ).as_json(),
            unschedulable=["smoke"],
        )


async def stored_json(site: Site, session_id: str) -> Any:
    async with site.database.sessions() as db:
        return await db.scalar(select(SessionRow.resolution).where(SessionRow.id == session_id))


async def stored_retry(site: Site, session_id: str) -> Any:
    async with site.database.sessions() as db:
        return await db.scalar(select(SessionRow.retry).where(SessionRow.id == session_id))


async def test_a_session_against_10000_devices_is_stored_compact_and_read_back_whole(site: Site) -> None:
    document = unschedulable_document()
    await store(site, SESSION, document)

    stored = await stored_json(site, SESSION)
    assert len(json.dumps(stored)) < 64 * 1024 < len(json.dumps(document))
    # What the retry code reads, as it was; a policy without suspect retries says so (issue 28: one
    # stored before them has none).
    assert await stored_retry(site, SESSION) == {**RETRY, "suspect": 0}
    assert stored["tasks"][0]["requested"] == document["tasks"][0]["requested"]
    async with site.database.sessions() as db:
        session = await get_session(db, SESSION)
    assert session.resolution == Resolution.from_document(document)


async def test_a_session_stored_before_compaction_is_read_as_it_is(site: Site, browser: Open) -> None:
    document = unschedulable_document(2, 30)
    async with site.database.sessions() as db, db.begin():
        await create_session(db, builders.session(PLAIN), site.database.clock())
        row = await db.scalar(select(SessionRow).where(SessionRow.id == PLAIN))
        assert row is not None
        row.resolution = {**document, "retry": RETRY}  # as an older Kerrigan stored it: every device in full
    assert (await stored_json(site, PLAIN))["tasks"][0]["rejected_devices"] == document["tasks"][0][
        "rejected_devices"
    ]
    async with site.database.sessions() as db:
        assert (await get_session(db, PLAIN)).resolution == Resolution.from_document(document)

    status, page = await (await browser(READER)).get(f"/sessions/{PLAIN}")
    assert status == 200
    assert sorted(device_links(table(page, "rejected-1"))) == sorted(
        verdict["device"] for verdict in document["tasks"][0]["rejected_devices"]
    )


async def test_the_page_of_a_compact_session_shows_its_reasons_and_devices(site: Site, browser: Open) -> None:
    document = unschedulable_document()
    await store(site, SESSION, document)

    status, page = await (await browser(READER)).get(f"/sessions/{SESSION}")

    assert status == 200
    assert len(page.encode()) <= 1_500_000
    words = text(page)
    assert "Rejected devices (10000, every reason)" in words
    for reason in ("form-factor missing", "tag uart-debgu missing", "sdk expected 2.2.0, got 2.0.0"):
        assert reason in words
    shown = device_links(table(page, "rejected-1"))
    assert shown == [v["device"] for v in document["tasks"][0]["rejected_devices"][:REJECTED_SHOWN]]

    assert (
        bounded(task_view(ResolvedTask.from_document(document["tasks"][0]))).rejected_more
        == 10_000 - REJECTED_SHOWN
    )
    assert f"… and {10_000 - REJECTED_SHOWN} more rejected devices not shown" in words

    # The filter reaches every device, not only those shown first.
    last = document["tasks"][0]["rejected_devices"][-1]["device"]
    status, filtered = await (await browser(READER)).get(f"/sessions/{SESSION}?q={last}&task=smoke")
    assert status == 200
    assert device_links(table(filtered, "rejected-1")) == [last]
