"""``/queue``: the waiting jobs in the dispatcher's order with what each waits on, and the jobs holding
devices, read without locking or writing anything.

The site runs its own dispatcher in the background, so every queue here is built in one transaction and
holds no job a round could start: whichever round runs, the queue the page shows stays the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import html
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.core.dispatch_order import DispatchPlan, QueuedJob, Waiting, WaitKind
from kerrigan.core.manifest import Priority
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.database import Database
from kerrigan.store.leases import QueuedJobRecord, take_queued_jobs
from kerrigan.store.models import JobRow, RunnerHostRow
from kerrigan.store.queue_view import QueueSnapshot, read_queue
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from tests.integration.github.conftest import INSTALLATION
from tests.integration.pages.conftest import READER, Site, needs_chromium, on_sqlite_only

SOM_UART = {"labels": {"sdk": ["2.2.0"], "form_factor": ["som"]}, "tags": ["uart-debug"]}  # bluebox, redbox
OLD_UART = {"labels": {"sdk": ["2.1.1"], "form_factor": ["som"]}, "tags": ["uart-debug"]}  # modalix-old-01
PCIE = {"labels": {"sdk": ["2.2.0"], "form_factor": ["pcie"]}}  # pcie-card-01 and -02, both on lab-b-01


@pytest.fixture
async def site(site: Site) -> Site:
    """The pages' site, where the reader also reads the other repositories these tests queue jobs of."""
    for name in ("octo/sdk", "octo/gate", "octo/tools"):
        site.github.add_repository(name, INSTALLATION)
        site.github.set_permission(name, READER, "read")
    return site


def new_session(
    session_id: int,
    tasks: dict[str, dict[str, Any]],
    *,
    repository: str,
    priority: str = "normal",
    max_devkits: int = 4,
    vcpus: int = 2,
    queue_wait_limit_s: int = 300,
) -> Any:
    resolution = {
        "tasks": [{"id": task, "requested": requested} for task, requested in tasks.items()],
        "scheduling": {"max_devkits": max_devkits, "queue_wait_limit_s": queue_wait_limit_s},
    }
    built = builders.session(
        f"{session_id:08d}-0000-0000-0000-000000000000",
        tasks,
        repository=repository,
        resolution=resolution,
        vcpus=vcpus,
    )
    return dataclasses.replace(built, priority=priority)


async def store(db: Database, *sessions: Any) -> None:
    """Queue the sessions at once: a dispatch round sees all of them or none."""
    async with db.sessions() as session, session.begin():
        for new in sessions:
            await create_session(session, new, db.clock())


async def job_ids(db: Database) -> dict[str, str]:
    """Task id -> job id (task ids are unique across the sessions of these tests)."""
    async with db.sessions() as session:
        rows = await session.execute(select(JobRow.task_id, JobRow.pk))
        return {task: str(pk) for task, pk in rows}


async def dispatched(db: Database) -> None:
    """Until a dispatch round has seen every queued job (this test's round, or the site's own, which may
    hold the jobs locked meanwhile): each one's queue-wait clock has started."""
    for _ in range(100):
        await Dispatcher(db).dispatch_once()
        async with db.sessions() as session:
            unseen = await session.scalar(
                select(JobRow.pk).where(JobRow.state == "queued", JobRow.ready_at.is_(None))
            )
        if unseen is None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no dispatch round saw the queue")


async def busy_lab(db: Database, clock: FakeClock) -> dict[str, str]:
    """Three devices held; then a gate job too big for its host, a job fenced behind it, one waiting for a
    busy device and one waiting on its own session. Nothing in the queue can start."""
    async with db.sessions() as session, session.begin():
        host = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == "lab-b-01"))
        assert host is not None
        host.resources = {"max_weight": 4}
    await store(
        db,
        new_session(1, {"som-a": SOM_UART, "som-b": SOM_UART}, repository="octo/firmware"),
        new_session(2, {"old-a": OLD_UART, "old-b": OLD_UART}, repository="octo/firmware", max_devkits=1),
    )
    await dispatched(db)
    async with db.sessions() as session:
        leased = dict((await session.execute(select(JobRow.task_id, JobRow.state))).all())
    assert leased == {"som-a": "leased", "som-b": "leased", "old-a": "leased", "old-b": "queued"}
    clock.advance(10)
    await store(
        db,
        new_session(3, {"som-c": SOM_UART}, repository="octo/sdk"),
        new_session(4, {"pcie-big": PCIE}, repository="octo/gate", priority="gate", vcpus=8),
        new_session(5, {"pcie-small": PCIE}, repository="octo/tools"),
    )
    await dispatched(db)
    clock.advance(5)
    return await job_ids(db)


_ROW = re.compile(r'<tr id="job-(\d+)" class="wait-row-([a-z_]+)">(.*?)</tr>', re.DOTALL)


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def queue_rows(page: str) -> list[tuple[str, str, str]]:
    """(job id, kind, the row's text) of each row of the waiting table, in page order."""
    return [(job, kind, text_of(cells)) for job, kind, cells in _ROW.findall(page)]


async def test_the_page_shows_the_dispatchers_order_and_what_each_job_waits_on(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    jobs = await busy_lab(site.database, clock)
    status, page = await (await browser(READER)).get("/queue")
    assert status == 200
    rows = queue_rows(page)
    by_task = {job: task for task, job in jobs.items()}
    # Seed 003's order: the gate job first; then newer jobs rotating between repositories, those never
    # dispatched before octo/firmware (dispatched 15 s ago).
    assert [by_task[job] for job, _, _ in rows] == ["pcie-big", "som-c", "pcie-small", "old-b"]
    assert [kind for _, kind, _ in rows] == ["capacity", "device", "fenced", "own_session"]
    texts = {by_task[job]: text for job, _, text in rows}
    assert texts["pcie-big"].startswith("1 ")
    assert "gate" in texts["pcie-big"]
    assert "host capacity: it claims 8 vCPUs; lab-b-01 has 4 vCPUs left under max_weight" in texts["pcie-big"]
    assert "device busy: modalix-bluebox, modalix-redbox" in texts["som-c"]
    assert "5 s / 5 min 00 s" in texts["som-c"]  # queue-wait spent of its limit
    assert f"fenced by job {jobs['pcie-big']}" in texts["pcie-small"]
    assert f'href="#job-{jobs["pcie-big"]}"' in page  # the fence links the job it waits for
    assert "its own session's max_devkits: the session holds 1 of 1 device" in texts["old-b"]
    assert "(paused)" in texts["old-b"]
    assert "15 s" in texts["old-b"]  # waited since it became dispatchable
    assert 'href="/sessions/00000002-0000-0000-0000-000000000000"' in page


async def test_the_order_shown_is_the_order_the_next_dispatch_round_plans(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await busy_lab(site.database, clock)
    _, page = await (await browser(READER)).get("/queue")
    shown = [job for job, _, _ in queue_rows(page)]
    result = await Dispatcher(site.database).dispatch_once()
    assert result.granted == ()
    assert result.plan is not None
    assert [job for job in result.plan.order if job in result.plan.waiting] == shown
    assert [result.plan.position(job) for job in shown] == [1, 2, 3, 4]


async def test_jobs_holding_devices_are_listed_with_device_and_host(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    jobs = await busy_lab(site.database, clock)
    _, page = await (await browser(READER)).get("/queue")
    holding = page.split('id="holding-table"', 1)[1]
    for task in ("som-a", "som-b", "old-a"):
        assert f'<td class="num">{jobs[task]}</td>' in holding
    assert 'href="/devices/modalix-old-01"' in holding
    assert 'href="/runners#host-lab-a-02"' in holding
    assert "state-leased" in holding


async def test_filtering_by_repository_keeps_each_jobs_place_in_the_whole_queue(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    jobs = await busy_lab(site.database, clock)
    status, page = await (await browser(READER)).get("/queue?repository=octo/tools")
    assert status == 200
    [(job, kind, text)] = queue_rows(page)
    assert (job, kind) == (jobs["pcie-small"], "fenced")
    assert text.startswith("3 ")
    assert '<option value="octo/tools" selected>' in page
    assert "No job holds a device or a runner host's room for octo/tools" in page


async def test_reading_the_queue_for_the_page_writes_nothing(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    await busy_lab(site.database, clock)
    database = site.database
    async with database.sessions() as session:
        before = [
            (row.pk, row.state, row.ready_at, row.queue_wait_s)
            for row in await session.scalars(select(JobRow))
        ]
        snapshot = await read_queue(session, database.clock(), lock=False)
        assert snapshot is not None
        assert not session.dirty
        assert not session.new
    async with database.sessions() as session:
        after = [
            (row.pk, row.state, row.ready_at, row.queue_wait_s)
            for row in await session.scalars(select(JobRow))
        ]
    assert after == before


async def test_the_page_shows_jobs_a_dispatcher_has_locked_and_does_not_wait_for_it(
    site: Site, browser: Callable[..., Any], clock: FakeClock
) -> None:
    jobs = await busy_lab(site.database, clock)
    reader = await browser(READER)
    async with site.database.sessions() as dispatcher, dispatcher.begin():
        # A dispatcher in the middle of its round holds the queued jobs (FOR UPDATE on PostgreSQL).
        assert len(await take_queued_jobs(dispatcher)) == 4
        status, page = await asyncio.wait_for(reader.get("/queue"), timeout=10)
    assert status == 200
    assert {job for job, _, _ in queue_rows(page)} == {
        jobs[t] for t in ("pcie-big", "som-c", "pcie-small", "old-b")
    }


async def test_an_empty_queue_says_so(site: Site, browser: Callable[..., Any]) -> None:
    status, page = await (await browser(READER)).get("/queue")
    assert status == 200
    assert "No job is waiting" in page
    assert "No job holds a device" in page


async def test_a_bad_row_limit_is_refused_with_the_rule(site: Site, browser: Callable[..., Any]) -> None:
    status, page = await (await browser(READER)).get("/queue?limit=lots")
    assert status == 400
    assert "limit must be a whole number" in page


@pytest.mark.parametrize("path", ["/queue", "/queue?repository=octo/firmware"])
async def test_anonymous_users_are_sent_to_sign_in(
    site: Site, browser: Callable[..., Any], path: str
) -> None:
    anonymous = await browser()
    async with anonymous.http.get(site.base + path, allow_redirects=False) as response:
        assert response.status == 302
        assert response.headers["Location"] == f"/login?next={path}"


# -- the rows, from a plan built by hand -----------------------------------------------------------------

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def record(pk: int, task: str, *, session: str = "s1", limit_s: int = 300) -> QueuedJobRecord:
    resolution = {"tasks": [{"id": task, "requested": {}}], "scheduling": {"queue_wait_limit_s": limit_s}}
    return QueuedJobRecord(pk, task, session, "octo/firmware", "normal", 2, NOW, resolution, 0.0, NOW)


def test_a_job_with_a_free_device_is_shown_as_leased_on_the_next_round() -> None:
    from kerrigan.web.pages.queue import queue_rows as page_rows

    first, second = record(1, "a"), record(2, "b")
    job_a = QueuedJob("1", "octo/firmware", "s1", Priority.NORMAL, NOW.timestamp(), ("dev-1",))
    job_b = QueuedJob("2", "octo/firmware", "s1", Priority.NORMAL, NOW.timestamp(), ())
    plan = DispatchPlan(((job_a, "dev-1"),), {"2": Waiting(WaitKind.DEVICE)}, ("1", "2"))
    snapshot = QueueSnapshot(
        NOW,
        (first, second),
        {1: job_a, 2: job_b},
        plan,
        (),
        {"dev-1": "lab-a-01"},
        frozenset({"dev-1"}),
        {},
        {},
    )
    rows = page_rows(snapshot)
    assert [(row.job_id, row.kind, row.position) for row in rows] == [("1", "next", None), ("2", "device", 1)]
    assert rows[0].why == "device dev-1 on lab-a-01 is free: leased on the next round"
    assert rows[1].why.startswith("no device it matches is available now")


def test_a_job_without_recorded_requirements_is_listed_last_as_not_planned() -> None:
    from kerrigan.web.pages.queue import queue_rows as page_rows

    snapshot = QueueSnapshot(
        NOW, (record(1, "a"),), {}, DispatchPlan((), {}, ()), (), {}, frozenset(), {}, {}
    )
    [row] = page_rows(snapshot)
    assert (row.kind, row.position) == ("unplanned", None)
    assert "no requirements for task a" in row.why


# -- in a real browser -----------------------------------------------------------------------------------


@needs_chromium
@on_sqlite_only
async def test_in_a_browser_the_queue_filters_by_repository_and_sorts(
    site: Site, tab: Callable[..., Any], clock: FakeClock
) -> None:
    jobs = await busy_lab(site.database, clock)
    reader = await tab(READER)
    page = await reader.open("/queue")
    first = page.locator("#queue-table tbody tr").first
    assert await first.get_attribute("id") == f"job-{jobs['pcie-big']}"
    assert "host capacity" in await first.inner_text()
    await reader.shoot("queue-waiting-reasons")
    await page.get_by_role("columnheader", name="Waited").click()  # kerrigan.js sorts in place
    await page.get_by_role("columnheader", name="Waited").click()  # longest wait first
    assert await page.locator("#queue-table tbody tr").first.get_attribute("id") == f"job-{jobs['old-b']}"
    await page.get_by_label("Repository").select_option("octo/tools")
    await page.get_by_role("button", name="Show").click()
    await page.wait_for_url(f"{site.base}/queue?repository=octo%2Ftools")
    assert await page.locator("#queue-table tbody tr").count() == 1
    narrow = await tab(READER, width=390)
    await narrow.open("/queue")
    await narrow.shoot("queue-waiting-reasons-phone")


async def test_a_retry_every_matching_device_already_failed_says_it_takes_one_again(
    site: Site, browser: Callable[..., Any]
) -> None:
    db = site.database
    await store(db, new_session(1, {"som-a": SOM_UART, "som-b": SOM_UART}, repository="octo/firmware"))
    await dispatched(db)  # both devices it matches are held
    async with db.sessions() as session, session.begin():  # one transaction: no round sees it before
        await create_session(
            session, new_session(9, {"som-retry": SOM_UART}, repository="octo/firmware"), db.clock()
        )
        job = await session.scalar(select(JobRow).where(JobRow.task_id == "som-retry"))
        assert job is not None
        job.attempt, job.avoid_devices = 2, ["modalix-bluebox", "modalix-redbox"]  # a retry
    await dispatched(db)
    _, page = await (await browser(READER)).get("/queue")
    [(_, _, words)] = queue_rows(page)
    assert (
        "device busy: modalix-bluebox, modalix-redbox (every device it matches already failed this job; "
        "it takes one of them again)"
    ) in words


def test_a_waiting_gang_says_how_many_devices_of_each_role_are_free() -> None:
    from kerrigan.core.gang import Role, RoleCount
    from kerrigan.web.pages.queue import queue_rows as page_rows

    roles = (Role("dut", ("dev-1", "dev-2")), Role("peer", ("dev-3",)))
    gang = QueuedJob("1", "octo/firmware", "s1", Priority.NORMAL, NOW.timestamp(), (), roles=roles)
    split = QueuedJob("2", "octo/firmware", "s2", Priority.NORMAL, NOW.timestamp(), (), roles=roles)
    plan = DispatchPlan(
        (),
        {
            "1": Waiting(WaitKind.DEVICE, None, (RoleCount("dut", 1, 2), RoleCount("peer", 0, 1))),
            "2": Waiting(WaitKind.GANG, None, (RoleCount("dut", 1, 2), RoleCount("peer", 1, 1))),
        },
        ("1", "2"),
    )
    hosts = {"dev-1": "lab-a-01", "dev-2": "lab-a-02", "dev-3": "lab-b-01"}
    snapshot = QueueSnapshot(
        NOW, (record(1, "pair"), record(2, "pair", session="s2")), {1: gang, 2: split}, plan, (), hosts,
        frozenset({"dev-1"}), {}, {},
    )  # fmt: skip
    first, second = page_rows(snapshot)
    assert first.why == "gang: role dut: 1/2 devices free; role peer: 0/1 device free"
    assert second.why == (
        "gang: every role has a device free, but no one runner host has one for each "
        "(role dut: 1/2 devices free; role peer: 1/1 device free)"
    )


def test_a_waiting_reservation_stands_after_gate_work_with_its_person_and_what_it_waits_for() -> None:
    from datetime import timedelta

    from kerrigan.core.reservations import ReservationState
    from kerrigan.store.reservations import Reservation
    from kerrigan.web.pages.queue import queue_rows as page_rows

    reservation = Reservation(
        "0e4e1b52-0000-0000-0000-000000000000", "hubot", ReservationState.WAITING, {"labels": {}, "tags": []},
        "dev-1", 600, 300, "UART bring-up", NOW - timedelta(seconds=30), NOW + timedelta(seconds=270),
        None, None, None, None, None, None, None, 7,
    )  # fmt: skip
    person = QueuedJob(
        reservation.queue_id, "@hubot", reservation.queue_id, Priority.NORMAL,
        reservation.created_at.timestamp(), ("dev-1",), 0, arrival=7, reservation=True,
    )  # fmt: skip
    job = QueuedJob("1", "octo/firmware", "s1", Priority.NORMAL, NOW.timestamp(), ("dev-1",))
    plan = DispatchPlan(
        (), {person.id: Waiting(WaitKind.DEVICE), "1": Waiting(WaitKind.DEVICE)}, (person.id, "1")
    )
    snapshot = QueueSnapshot(
        NOW, (record(1, "smoke"),), {1: job}, plan, (), {"dev-1": "lab-a-01"}, frozenset(), {}, {}, {},
        (reservation,), (person,),
    )  # fmt: skip
    first, second = page_rows(snapshot)
    assert (first.job_id, first.repository, first.priority, first.position, first.href) == (
        "0e4e1b52",
        "@hubot",
        "reservation",
        1,
        None,
    )
    assert first.task_id == "reservation (UART bring-up)"
    assert first.why == "reservation for hubot, waiting for a device: dev-1"
    assert (first.queue_wait_spent_s, first.queue_wait_limit_s) == (30.0, 300.0)
    assert (second.job_id, second.position) == ("1", 2)
