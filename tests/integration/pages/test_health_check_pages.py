"""A health check's job is a session of the lab's own (no repository, no check run): the session page,
``/sessions``, the device page and ``/health`` show it without tripping over what it lacks."""

from __future__ import annotations

import dataclasses
import html
import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from kerrigan.core.health_checks import HealthCheck
from kerrigan.store.audit import Change
from kerrigan.store.health_checks.queueing import queue_check
from kerrigan.store.inventory import get_device, get_pool, save_device, save_pool
from kerrigan.store.models import JobRow, SessionRow
from tests.integration.pages.conftest import OWNER, READER, Site


async def test_a_health_check_session_renders_on_every_page(site: Site, browser: Callable[..., Any]) -> None:
    db = site.database
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, "modalix-bluebox")
        check = HealthCheck("/opt/lab/health/modalix.sh")
        await save_device(
            session, dataclasses.replace(stored.device, health_check=check), Change("t", db.clock())
        )
    async with db.sessions() as session, session.begin():
        queued = await queue_check(session, "modalix-bluebox", db.clock(), why="asked")
        session_id = await session.scalar(
            select(SessionRow.id).where(SessionRow.health_check_device == "modalix-bluebox")
        )
    assert queued.queued
    reader = await browser(READER)
    for path in (f"/sessions/{session_id}", "/sessions", "/devices/modalix-bluebox", "/health", "/queue"):
        status, page = await reader.get(path)
        assert status == 200, (path, page[:500])
    _, page = await reader.get("/devices/modalix-bluebox")
    assert "/opt/lab/health/modalix.sh" in page
    owner = await browser(OWNER)
    _, page = await owner.get("/devices/modalix-bluebox")
    assert "/devices/modalix-bluebox/health-check" in page  # the owner's button


async def test_the_lab_health_page_lists_the_failed_health_checks(
    site: Site, browser: Callable[..., Any]
) -> None:
    db = site.database
    async with db.sessions() as session, session.begin():
        stored = await get_device(session, "modalix-redbox")
        check = HealthCheck("/opt/lab/health/modalix.sh")
        await save_device(
            session, dataclasses.replace(stored.device, health_check=check), Change("t", db.clock())
        )
    async with db.sessions() as session, session.begin():
        queued = await queue_check(session, "modalix-redbox", db.clock(), why="asked")
        job = await session.get(JobRow, queued.job_pk)
        assert job is not None
        job.state, job.started_at, job.finished_at, job.exit_status = "failed", db.clock(), db.clock(), 1
    _, page = await (await browser(READER)).get("/health")
    assert "1 ran in the last 7 days; 1 failed." in page
    failed = page.split('id="failed-checks"')[1].split("</ul>")[0]
    assert "modalix-redbox" in failed
    assert f"job {queued.job_pk}" in failed


async def test_a_broken_pool_check_is_on_the_health_page_and_the_pool_page(
    site: Site, browser: Callable[..., Any]
) -> None:
    db = site.database
    async with db.sessions() as session, session.begin():
        stored = await get_pool(session, "sdk-2-2-som")
        check = HealthCheck("/opt/lab/health/missing.sh")
        await save_pool(
            session, dataclasses.replace(stored.pool, health_check=check), Change("t", db.clock())
        )
    for device in ("modalix-bluebox", "modalix-redbox"):
        async with db.sessions() as session, session.begin():
            queued = await queue_check(session, device, db.clock(), why="asked")
            job = await session.get(JobRow, queued.job_pk)
            assert job is not None
            job.state, job.started_at, job.finished_at = "failed", db.clock(), db.clock()
            job.exit_status, job.reason = 127, "check_broken"
            run = await session.get(SessionRow, job.session_pk)
            assert run is not None
            run.state = "completed"
    line = (
        "health check /opt/lab/health/missing.sh broken since "
        f"{db.clock():%Y-%m-%d %H:%M:%S} UTC: exit 127 on modalix-bluebox, modalix-redbox "
        "(command not found) — boards keep their health. Owners: octocat."
    )
    reader = await browser(READER)
    _, page = await reader.get("/health")
    broken = page.split('id="broken-checks"')[1].split("</ul>")[0]
    assert line in " ".join(html.unescape(re.sub(r"<[^>]+>", "", broken)).split())
    assert "sdk-2-2-som" in broken
    _, page = await reader.get("/pools/sdk-2-2-som")
    shown = page.split('id="health-check"')[1].split("</section>")[0]
    assert line in " ".join(html.unescape(re.sub(r"<[^>]+>", "", shown)).split())
    _, page = await reader.get("/pools/sdk-2-1-som")
    assert "broken since" not in page
