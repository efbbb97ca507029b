"""A device page's Reserve form: a person reserves the board by hand, sees it reserved and in My
reservations; the pool's owner may release it, a stranger sees no Release button; a bad duration is shown
next to its field and reserves nothing."""

from __future__ import annotations

import asyncio
import html
import re
from collections.abc import Callable
from typing import Any

from kerrigan.core.reservations import ReservationState
from kerrigan.store.reservations import get_reservation, list_reservations, record_holder_settings
from tests.integration.pages.conftest import OTHER_OWNER, OWNER, READER, Browser, Site

REDBOX = "/devices/modalix-redbox"  # in octocat's pool sdk-2-2-som, on lab-a-02


def words(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def test_a_person_reserves_a_board_from_its_page_and_its_owner_releases_it(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.post(
        f"{REDBOX}/reserve", {"for": "2h", "note": "UART bring-up"}, csrf_from=REDBOX
    )
    assert status == 200
    assert "modalix-redbox is reserved for you as soon as it is free" in words(page)
    assert "My reservations" in page
    for _ in range(50):  # the dispatcher grants it within a round
        _, page = await rita.get(REDBOX)
        if 'id="reserved"' in page:
            break
        await asyncio.sleep(0.1)
    text = words(page)
    assert "Reserved by rita until " in text
    assert ": UART bring-up (no CI job takes it until then)" in text
    assert 'id="release-form"' in page  # her own
    _, runners = await rita.get("/runners")
    assert "device reserved by rita until " in words(runners)  # on its runner host's page too
    hubot: Browser = await browser(OTHER_OWNER)
    _, other = await hubot.get(REDBOX)
    assert 'id="release-form"' not in other  # not hubot's pool, not his reservation
    status, _ = await hubot.post(f"{REDBOX}/reserve", {"for": "30m"}, csrf_from=REDBOX)  # he waits for it
    assert status == 200
    _, queue = await hubot.get("/queue")
    assert "reservation for hubot, waiting for a device: none free to take work now" in words(queue)
    octocat: Browser = await browser(OWNER)
    _, owner_view = await octocat.get(REDBOX)
    action = re.search(r'action="(/devices/modalix-redbox/release/[0-9a-f-]{36})"', owner_view)
    assert action
    status, page = await octocat.post(action[1], {}, csrf_from=REDBOX)
    assert status == 200
    assert "The reservation of modalix-redbox is released." in words(page)
    assert "Not reserved." in words(page)


async def test_a_bad_duration_is_shown_next_to_its_field_and_reserves_nothing(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    status, page = await rita.post(f"{REDBOX}/reserve", {"for": "9h"}, csrf_from=REDBOX)
    assert status == 400
    assert "must be 1 to 28800 seconds" in words(page)
    status, page = await rita.post(f"{REDBOX}/reserve", {"for": "soon"}, csrf_from=REDBOX)
    assert status == 400
    assert "'soon' is not a duration" in words(page)
    assert "My reservations" not in page


async def test_my_reservations_shows_the_board_settings_its_host_reported_to_its_person_alone(
    site: Site, browser: Callable[..., Any]
) -> None:
    rita: Browser = await browser(READER)
    await rita.post(f"{REDBOX}/reserve", {"for": "1h"}, csrf_from=REDBOX)
    async with site.database.sessions() as session:
        [held] = await list_reservations(session, login=READER)
    for _ in range(50):  # the dispatcher grants it within a round
        async with site.database.sessions() as session:
            held = await get_reservation(session, held.id)
        if held.state is ReservationState.ACTIVE:
            break
        await asyncio.sleep(0.1)
    async with site.database.sessions() as session, session.begin():  # as lab-a-02's agent reports them
        assert await record_holder_settings(
            session, "lab-a-02", held.id, "modalix-redbox", {"KERRIGAN_SERIAL": "/dev/ttyUSB-redbox"}
        )
    _, page = await rita.get(REDBOX)
    mine = words(page).split("My reservations", 1)[1]
    assert "on runner host lab-a-02 KERRIGAN_SERIAL /dev/ttyUSB-redbox" in mine
    octocat: Browser = await browser(OWNER)  # the pool's owner sees the reservation, not its settings
    _, owner_view = await octocat.get(REDBOX)
    assert "Reserved by rita until " in words(owner_view)
    assert "/dev/ttyUSB-redbox" not in owner_view
