"""The device page's power buttons without JavaScript: the holder's form post reaches the board's agent,
switches the PDU's outlet and comes back to the page with the state in a notice and as the page's power
state; a System Admin's page asks nothing of the agent as it opens."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from kerrigan.runner.agent import Agent
from kerrigan.store.models import DeviceRequestRow
from kerrigan.testing.pdu import GudePdu
from tests.integration.api.test_device_power import OUTLET
from tests.integration.pages.conftest import ADMIN, READER, Browser, Site
from tests.integration.pages.test_browser_device_console import DEVICE, agent, board, pdu
from tests.integration.pages.test_device_hands import reserved_by

pytest.importorskip("labgrid", reason="labgrid is an optional extra: pip install -e '.[labgrid]'")

__all__ = ["agent", "board", "pdu"]

PAGE = f"/devices/{DEVICE}"


def words(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def test_the_holders_power_form_switches_the_board_and_the_page_says_its_state(
    site: Site, browser: Callable[..., Any], agent: Agent, pdu: GudePdu
) -> None:
    admin: Browser = await browser(ADMIN)
    _, page = await admin.get(PAGE)
    assert "Power: unknown (not read yet)" in words(page)
    assert "As a System Admin you may switch it" in words(page)
    rita: Browser = await browser(READER)
    await reserved_by(rita)
    status, page = await rita.post(f"{PAGE}/power", {"action": "on"}, csrf_from=PAGE)
    assert status == 200
    assert f"on of {DEVICE} done: its power is on." in words(page)
    assert "Power: on (as its switch last read it, " in words(page)
    assert "You hold this board" in words(page)
    assert pdu.switches == [(OUTLET, True)]
    async with site.database.sessions() as session:
        asked = await session.scalar(select(func.count()).select_from(DeviceRequestRow))
    assert asked == 1  # her switch alone: no page view asked the agent anything
