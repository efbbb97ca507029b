"""A health check's job is a session of the lab's own (no repository, no check run): the session page,
``/sessions``, the device page and ``/health`` show it without tripping over what it lacks."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from kerrigan.core.health_checks import HealthCheck
from kerrigan.store.audit import Change
from kerrigan.store.health_checks import queue_check
from kerrigan.store.inventory import get_device, save_device
from kerrigan.store.models import SessionRow
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
