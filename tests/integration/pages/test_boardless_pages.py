"""The pages of a job that holds no device (``board: none``): the session page explains its task by runner
hosts and lists the job with no board on its host; ``/queue`` and ``/runners`` show it on its host with no
board; a boardless job in the queue says it waits for a runner host, never for a device."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from kerrigan.core.dispatch_order import DispatchPlan, QueuedJob, Waiting, WaitKind
from kerrigan.core.manifest import Priority
from kerrigan.store.leases import QueuedJobRecord
from kerrigan.store.models import JobRow, RunnerHostRow
from kerrigan.store.queue_view import QueueSnapshot
from kerrigan.testing.waiting import wait_until
from kerrigan.web.pages.queue import queue_rows
from tests.integration.github.conftest import OTHER_SHA, REPO, push_payload
from tests.integration.pages.conftest import READER, Site
from tests.integration.pages.test_session_page import deliver, reported_session, text

PIPELINE = """\
name: pipeline
on: {push: {branches: [main]}}
tasks:
  - id: build
    run: ./build.sh
    board: none
    requirements: {labels: {kerrigan.host: [lab-a-01, lab-b-02]}}
  - id: test
    run: ./test.sh
    needs: build
    requirements: {labels: {sdk: "2.2.0", form_factor: som}}
"""
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


async def test_the_session_queue_and_runners_pages_show_the_build_on_its_host_with_no_board(
    site: Site, browser: Callable[..., Any]
) -> None:
    async with site.database.sessions() as db, db.begin():  # what each host's agent reported
        for host in (await db.scalars(select(RunnerHostRow))).all():
            host.resources = {"vcpus": 16, "max_weight": 28}
    site.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/pipeline.yml": PIPELINE})
    await deliver(site, "push", push_payload(OTHER_SHA))
    session = await reported_session(site, "pipeline")

    async def leased() -> JobRow | None:  # the site's own dispatcher places it
        async with site.database.sessions() as db:
            return await db.scalar(select(JobRow).where(JobRow.task_id == "build", JobRow.state == "leased"))

    build = await wait_until(leased, timeout=30.0)
    assert (build.host, build.device_id) == ("lab-a-01", None)  # lab-b-02 is offline
    reader = await browser(READER)

    _, page = await reader.get(f"/sessions/{session.id}")
    words = text(page)
    assert "ready: waiting for dispatch (no board)" in words
    assert "No board: it holds no device and runs on a runner host" in words
    assert (
        "1/4 runner hosts available: 2 kerrigan.host expected one of [lab-a-01, lab-b-02], "
        "1 runner host lab-b-02 offline"
    ) in words
    assert "build leased 1 of 4 runner hosts (no board) host lab-a-01" in words
    rejected = text(page.split("Rejected runner hosts", 1)[1].split("</table>", 1)[0])
    assert "lab-b-02 runner host lab-b-02 offline not yet" in rejected
    jobs = page.split('<table class="jobs"', 1)[1].split("</table>", 1)[0]
    build_row = next(text(row) for row in re.findall(r"<tr>(.*?)</tr>", jobs, re.S) if "build" in row)
    assert build_row.startswith("build leased no board lab-a-01"), build_row

    _, queue = await reader.get("/queue")
    holding = text(queue.split('id="holding-table"', 1)[1].split("</table>", 1)[0])
    assert f"{build.pk} octo/firmware {session.id[:8]} build leased no board lab-a-01 2" in holding

    _, runners = await reader.get("/runners")
    host = runners.split('id="host-lab-a-01"', 1)[1]
    assert f"{build.pk} leased (2 vCPUs, no board)" in text(host.split("<h3>Devices</h3>", 1)[0])


def record(pk: int, task: str) -> QueuedJobRecord:
    return QueuedJobRecord(pk, task, f"s{pk}", "octo/firmware", "normal", 8, NOW, {}, 4, 300.0, 0.0, NOW)


def boardless(pk: int, hosts: tuple[str, ...]) -> QueuedJob:
    return QueuedJob(
        str(pk),
        "octo/firmware",
        f"s{pk}",
        Priority.NORMAL,
        NOW.timestamp(),
        (),
        8,
        pk,
        (),
        False,
        hosts,
        True,
    )


def test_the_queue_says_a_boardless_job_waits_for_a_runner_host_never_for_a_device() -> None:
    placed, full, nowhere = (
        boardless(1, ("lab-a-01",)),
        boardless(2, ("lab-a-01", "lab-b-01")),
        boardless(3, ()),
    )
    plan = DispatchPlan(
        (),
        {"2": Waiting(WaitKind.CAPACITY), "3": Waiting(WaitKind.HOST)},
        ("1", "2", "3"),
        placed=((placed, "lab-a-01"),),
    )
    snapshot = QueueSnapshot(
        NOW,
        (record(1, "build"), record(2, "lint"), record(3, "docs")),
        {1: placed, 2: full, 3: nowhere},
        plan,
        (),
        {},
        frozenset(),
        {},
        {"lab-a-01": 10, "lab-b-01": 4},
    )
    rows = {row.task_id: (row.kind, row.why) for row in queue_rows(snapshot)}
    assert rows == {
        "build": ("next", "runner host lab-a-01 has room: leased on the next round (no board)"),
        "lint": (
            "capacity",
            "host capacity (no board): it claims 8 vCPUs; lab-a-01 has 2 vCPUs left under max_weight, "
            "lab-b-01 has 4 vCPUs left under max_weight",
        ),
        "docs": ("host", "no board: no runner host it may run on is online and not paused now"),
    }
