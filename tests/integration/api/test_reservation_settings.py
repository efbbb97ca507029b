"""The private settings a runner host's devices file gives a reserved board reach the person holding it,
and nobody else: the host is asked for them (in its long poll) while the reservation holds the board, and
they are erased when it ends. The reservations list pages with cursors bound to its filters."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kerrigan.store.models import ReservationRow
from kerrigan.store.runners import create_runner_token
from tests.integration.api.conftest import ADMIN, OWNER_B, READER, Api

SERIAL = {"KERRIGAN_SERIAL": "/dev/serial/by-id/usb-FTDI_A50285BI-if00-port0", "POWER_OUTLET": "pdu-3:7"}


async def runner(api: Api, host: str, capabilities: list[str]) -> dict[str, str]:
    """The headers of ``host``'s runner, registered with ``capabilities``."""
    async with api.db.sessions() as session, session.begin():
        token = await create_runner_token(session, host, api.db.clock())
    headers = {"Authorization": f"Bearer {token}"}
    body = {"protocol": [1], "capabilities": capabilities}
    async with api.client.post("/api/runner/v1/register", json=body, headers=headers) as answer:
        assert answer.status == 200, await answer.text()
    return headers


async def poll(api: Api, headers: dict[str, str], wait: int = 5) -> dict[str, Any]:
    async with api.client.get(f"/api/runner/v1/poll?wait={wait}", headers=headers) as answer:
        assert answer.status == 200, await answer.text()
        return dict(await answer.json())


async def report(
    api: Api, headers: dict[str, str], reservation: str, body: object
) -> tuple[int, dict[str, Any]]:
    path = f"/api/runner/v1/reservations/{reservation}/settings"
    async with api.client.post(path, json=body, headers=headers) as answer:
        return answer.status, dict(await answer.json())


async def test_the_person_holding_a_board_alone_is_shown_its_hosts_settings_until_it_ends(api: Api) -> None:
    host = await runner(api, "lab-b-01", ["holder_settings"])
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600})
    assert made.body["state"] == "active", made.body
    reservation = made.body["id"]
    assert made.body["settings"] is None  # granted; the host has not said yet

    asked = await poll(api, host)
    assert asked["settings_for"] == [{"reservation": reservation, "device": "dev-b1"}]
    assert await report(api, host, reservation, {"device": "dev-b1", "settings": SERIAL}) == (
        200,
        {"recorded": True},
    )
    assert (await poll(api, host, wait=0))["settings_for"] == []  # asked once it has them

    mine = await api.get(f"/reservations/{reservation}", who=READER)
    assert mine.body["settings"] == SERIAL
    for other in (ADMIN, OWNER_B):  # an admin and the board's pool owner see the reservation, not these
        assert "settings" not in (await api.get(f"/reservations/{reservation}", who=other)).body
        listed = (await api.get("/reservations", who=other)).body["items"]
        assert listed
        assert all("settings" not in item for item in listed)
    [own] = (await api.get("/reservations", who=READER)).body["items"]
    assert own["settings"] == SERIAL

    released = await api.call("DELETE", f"/reservations/{reservation}", who=READER)
    assert released.status == 200, released.body
    assert "settings" not in released.body
    async with api.db.sessions() as session:
        row = await session.scalar(select(ReservationRow).where(ReservationRow.id == reservation))
        assert row is not None
        assert row.holder_settings is None  # erased with the end
    # A late report for a reservation that ended keeps nothing.
    assert await report(api, host, reservation, {"device": "dev-b1", "settings": SERIAL}) == (
        200,
        {"recorded": False},
    )
    async with api.db.sessions() as session:
        row = await session.scalar(select(ReservationRow).where(ReservationRow.id == reservation))
        assert row is not None
        assert row.holder_settings is None


async def test_a_host_that_did_not_announce_holder_settings_is_never_asked(api: Api) -> None:
    host = await runner(api, "lab-b-01", [])
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600})
    assert made.body["state"] == "active", made.body
    assert "settings_for" not in await poll(api, host, wait=0)


async def test_a_host_reports_settings_only_for_its_own_reserved_device_and_bad_ones_are_400s(
    api: Api,
) -> None:
    mine = await runner(api, "lab-b-01", ["holder_settings"])
    stranger = await runner(api, "lab-a-01", ["holder_settings"])
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600})
    reservation = made.body["id"]
    good = {"device": "dev-b1", "settings": {"A": "1"}}
    assert await report(api, stranger, reservation, good) == (200, {"recorded": False})  # not its board
    assert await report(api, mine, reservation, {**good, "device": "dev-a1"}) == (200, {"recorded": False})
    for body, field in [
        ({"device": "dev-b1", "settings": {"1BAD": "x"}}, "settings"),
        ({"device": "dev-b1", "settings": {"A": 5}}, "settings.A"),
        ({"device": "dev-b1", "settings": {"A": "x" * 2001}}, "settings.A"),
        ({"device": "dev-b1", "settings": ["A"]}, "settings"),
        ({"device": 7, "settings": {}}, "device"),
        ({"settings": {}}, "device"),
    ]:
        status, answer = await report(api, mine, reservation, body)
        assert (status, answer["error"]["field"]) == (400, field), (body, answer)
    assert (await api.get(f"/reservations/{reservation}", who=READER)).body["settings"] is None
    status, _ = await report(api, mine, "not-a-reservation", good)
    assert status == 404


async def test_the_reservations_list_pages_with_a_cursor_bound_to_its_filters(api: Api) -> None:
    made = []
    for _ in range(3):
        body = {"device": "dev-b1", "duration_s": 60}
        reply = await api.call("POST", "/reservations", who=READER, json=body)
        made.append(reply.body["id"])
        assert (await api.call("DELETE", f"/reservations/{reply.body['id']}", who=READER)).status == 200
    first = await api.get(f"/reservations?ended=true&login={READER}&limit=2")
    assert [item["id"] for item in first.body["items"]] == made[:0:-1]  # newest first
    cursor = first.body["next_cursor"]
    assert isinstance(cursor, str)
    second = await api.get(f"/reservations?ended=true&login={READER}&limit=2&cursor={cursor}")
    assert [item["id"] for item in second.body["items"]] == made[:1]
    assert second.body["next_cursor"] is None
    for query in (f"ended=false&login={READER}&cursor={cursor}", "ended=true&cursor=bm90LW91cnM"):
        refused = await api.call("GET", f"/reservations?{query}")
        assert (refused.status, refused.body["error"]["field"]) == (400, "cursor"), refused.body
