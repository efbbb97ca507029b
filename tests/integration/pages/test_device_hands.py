"""The device page's power state and live console (issue 30), as the server renders them for each person:
the holder of the board's reservation and System Admins get the power buttons and a console they may type
on, the pool's owners a read-only console and no buttons, anyone else the power state alone (no console, no
word or address of it). The power state is what the store knows: the agent's last answer and when, or
``unknown`` saying why. The console WebSocket takes a signed-in browser's cookie from this site's pages
only; the page's power form posts with the CSRF token."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
from sqlalchemy import func, select, update

from kerrigan.core.device_power import PowerAction, PowerFailure, PowerState
from kerrigan.store.audit import list_audit
from kerrigan.store.device_requests import PowerAnswer, answer, ask_power
from kerrigan.store.models import DeviceRequestRow, RunnerHostRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.waiting import wait_until
from tests.integration.pages.conftest import ADMIN, OTHER_OWNER, OWNER, READER, Browser, Site

DEVICE = "modalix-redbox"  # in octocat's pool sdk-2-2-som, on lab-a-02
PAGE = f"/devices/{DEVICE}"
SOCKET = f"/api/v1/devices/{DEVICE}/console"


def words(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def register(site: Site, host: str, capabilities: list[str]) -> None:
    """``host``'s agent registered, speaking ``capabilities``."""
    async with site.database.sessions() as session, session.begin():
        token = await create_runner_token(session, host, site.database.clock())
    registration = {"protocol": [1], "capabilities": capabilities, "resources": {"vcpus": 8}, "devices": {}}
    async with (
        aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http,
        http.post(f"{site.base}/api/runner/v1/register", json=registration) as response,
    ):
        assert response.status == 200, await response.text()


async def reserved_by(browser: Browser, device: str = DEVICE) -> None:
    """``browser``'s person reserves ``device`` from its page, and the dispatcher grants it."""
    status, _ = await browser.post(
        f"/devices/{device}/reserve", {"for": "1h"}, csrf_from=f"/devices/{device}"
    )
    assert status == 200

    async def granted() -> bool:
        _, page = await browser.get(f"/devices/{device}")
        return 'id="reserved"' in page

    await wait_until(granted, timeout=15)


async def offline(site: Site, host: str) -> None:
    async with site.database.sessions() as session, session.begin():
        await session.execute(update(RunnerHostRow).where(RunnerHostRow.id == host).values(online=False))


async def agent_said(site: Site, device: str, host: str, power: PowerState | None) -> None:
    """The device's agent answered a status: ``power``, or (None) that the device has no power wiring."""
    async with site.database.sessions() as session, session.begin():
        asked = await ask_power(
            session, device, host, login=READER, action=PowerAction.STATUS, now=site.database.clock()
        )
        said = (
            PowerAnswer(power) if power is not None else PowerAnswer(None, PowerFailure.NO_POWER, "no power")
        )
        assert await answer(session, host, asked, said, site.database.clock())


async def test_the_holder_and_admins_switch_and_type_the_owner_watches_a_stranger_sees_the_power_alone(
    site: Site, browser: Callable[..., Any]
) -> None:
    await register(site, "lab-a-02", ["device_power", "device_console"])
    rita: Browser = await browser(READER)
    await reserved_by(rita)
    await agent_said(site, DEVICE, "lab-a-02", PowerState.ON)

    _, holder = await rita.get(PAGE)
    assert "Power: on (as its switch last read it, " in words(holder)
    assert 'id="power-buttons"' in holder
    for action in ("status", "cycle", "on", "off"):
        assert f'data-power="{action}"' in holder
    assert 'data-ask-now="status"' in holder  # her page reads the state as it opens
    assert f'data-console="{SOCKET}" data-read-only="false"' in holder
    assert "You may type" in words(holder)
    assert "device.js" in holder

    admin: Browser = await browser(ADMIN)
    _, admins = await admin.get(PAGE)
    assert 'id="power-buttons"' in admins
    assert "data-ask-now" not in admins  # an admin asks with the button: a visit switches nothing
    assert f'data-console="{SOCKET}" data-read-only="false"' in admins

    octocat: Browser = await browser(OWNER)  # owns the board's pool
    _, owners = await octocat.get(PAGE)
    assert "Power: on" in words(owners)
    assert 'id="power-buttons"' not in owners
    assert "data-power=" not in owners
    assert f'data-console="{SOCKET}" data-read-only="true"' in owners
    assert "Read-only: you watch as an owner of pool sdk-2-2-som; what you type is not sent." in words(owners)

    hubot: Browser = await browser(OTHER_OWNER)  # owns another pool: a stranger to this board
    _, strangers = await hubot.get(PAGE)
    assert "Power: on" in words(strangers)
    assert "The person holding its reservation and System Admins switch its power." in words(strangers)
    for leak in ('id="console"', "data-console", "/console", "console-screen", "device.js", "data-power="):
        assert leak not in strangers, leak
    assert "Console" not in words(strangers)


async def test_the_power_state_is_unknown_saying_why_and_the_page_never_asks_the_agent(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    await offline(site, "lab-a-02")
    _, page = await rita.get(PAGE)
    assert "Power: unknown (runner host lab-a-02 is offline)" in words(page)

    await register(site, "lab-a-02", ["device_power", "device_console"])
    _, page = await rita.get(PAGE)
    assert "Power: unknown (not read yet)" in words(page)
    await agent_said(site, DEVICE, "lab-a-02", None)
    _, page = await rita.get(PAGE)
    assert "Power: unknown (its runner host's devices file gives it no power wiring, " in words(page)
    await agent_said(site, DEVICE, "lab-a-02", PowerState.OFF)
    _, page = await rita.get(PAGE)
    assert "Power: off (as its switch last read it, " in words(page)

    # modalix-greenbox's host (lab-a-01) went silent: its last state is said, as of when, with why.
    await agent_said(site, "modalix-greenbox", "lab-a-01", PowerState.ON)
    await offline(site, "lab-a-01")
    _, page = await rita.get("/devices/modalix-greenbox")
    assert re.search(r"Power: unknown \(runner host lab-a-01 is offline; last read on, \d{4}-", words(page))

    # Her reservation on a host too old to be asked: no buttons, no console to open, and why.
    await register(site, "lab-a-02", ["log_pages"])
    await reserved_by(rita)
    _, page = await rita.get(PAGE)
    old = "the agent of lab-a-02 is too old to be asked: upgrade it."
    assert f"Its power cannot be switched now: {old}" in words(page)
    assert f"The console cannot be opened now: {old}" in words(page)
    assert 'id="power-buttons"' not in page
    assert "data-console=" not in page
    async with site.database.sessions() as session:
        asked = await session.scalar(select(func.count()).select_from(DeviceRequestRow))
    assert asked == 3  # the three answers above: no page view asked anything of an agent


async def test_the_power_form_needs_its_csrf_token_and_the_right_and_says_why_as_json(
    site: Site, browser: Callable[..., Any]
) -> None:
    await register(site, "lab-a-02", ["device_power", "device_console"])
    rita: Browser = await browser(READER)
    await reserved_by(rita)
    hubot: Browser = await browser(OTHER_OWNER)
    token = await hubot.csrf(PAGE)  # the page's Reserve form: his session's token
    json_answer = {"Accept": "application/json"}
    async with hubot.http.post(
        site.base + f"{PAGE}/power", data={"action": "cycle", "csrf": token}, headers=json_answer
    ) as response:
        assert response.status == 403
        body = await response.json()
    assert body["error"]["message"] == (
        f"hubot may not switch the power of {DEVICE}: you do not hold a reservation of {DEVICE} "
        "(the person holding its reservation and System Admins may)"
    )
    status, page = await hubot.post(f"{PAGE}/power", {"action": "cycle"}, csrf_from=PAGE)
    assert status == 403
    assert "hubot may not switch the power" in words(page)

    # rita holds it; a post without her session's token, or naming no action, is refused.
    async with rita.http.post(
        site.base + f"{PAGE}/power", data={"action": "off", "csrf": "forged"}, headers=json_answer
    ) as response:
        assert response.status == 403
        assert (
            "the form is stale or was not sent from this site" in (await response.json())["error"]["message"]
        )
    token = await rita.csrf(PAGE)
    async with rita.http.post(
        site.base + f"{PAGE}/power", data={"action": "explode", "csrf": token}, headers=json_answer
    ) as response:
        assert response.status == 400
        error = (await response.json())["error"]
    assert error["field"] == "action"
    assert error["message"] == "action must be one of cycle, on, off, status"
    async with site.database.sessions() as session:
        assert await session.scalar(select(func.count()).select_from(DeviceRequestRow)) == 0


async def test_the_console_websocket_takes_a_browsers_sign_in_from_this_sites_pages_only(
    site: Site, browser: Callable[..., Any]
) -> None:
    await register(site, "lab-a-02", ["device_power", "device_console"])
    rita: Browser = await browser(READER)
    await reserved_by(rita)
    url = site.base + SOCKET

    async def refused(http: aiohttp.ClientSession, origin: str | None) -> tuple[int, str]:
        headers = {"Origin": origin} if origin is not None else {}
        with pytest.raises(aiohttp.WSServerHandshakeError) as caught:
            await http.ws_connect(url, headers=headers)
        async with http.get(url, headers=headers) as response:  # the same check, read as JSON
            message = (await response.json())["error"]["message"]
        assert response.status == caught.value.status
        return caught.value.status, message

    # Her cookie from another site's page (cross-site WebSocket hijacking), or with no Origin at all.
    status, message = await refused(rita.http, "http://evil.example")
    assert status == 403
    assert "opens this WebSocket from this site's pages only (Origin: 'http://evil.example')" in message
    assert (await refused(rita.http, None))[0] == 403

    hubot: Browser = await browser(OTHER_OWNER)
    status, message = await refused(hubot.http, site.base)
    assert status == 403
    assert message.startswith(f"hubot may not use the console of {DEVICE}: you do not hold a reservation")

    async with aiohttp.ClientSession() as anonymous:
        status, message = await refused(anonymous, site.base)
    assert status == 401

    # From this site's page: her sign-in opens it, as the person who may type.
    async with rita.http.ws_connect(url, headers={"Origin": site.base}) as socket:
        opened = json.loads((await socket.receive(timeout=10)).data)
        assert opened == {"type": "open", "device": DEVICE, "read_only": False}

    async def audited() -> list[Any]:
        async with site.database.sessions() as session:
            found = await list_audit(session, device_id=DEVICE)
        return [entry for entry in found if entry.field == "console"]

    await wait_until(audited, timeout=15)  # written as her WebSocket closed
    [use] = await audited()  # the refused ones opened nothing
    assert (use.actor, use.before["access"]) == (READER, "read-write")
