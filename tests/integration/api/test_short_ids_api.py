"""Ids Kerrigan prints short (a session's or a reservation's first 8 characters) are taken back short: a
unique prefix names its id; a prefix that begins several is a 400 listing them; none is a 404."""

from __future__ import annotations

from kerrigan.core.lifecycle import SessionState
from kerrigan.testing.clock import FakeClock
from tests.integration.api.conftest import ADMIN, READER, Api
from tests.integration.api.history_rows import Run, add_session

FIRST = "eba46059-0000-4000-8000-000000000001"
SECOND = "eba46059-0000-4000-8000-000000000002"
OTHER = "6ad4b94b-0000-4000-8000-000000000003"


async def _sessions(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        for session_id in (FIRST, SECOND, OTHER):
            await add_session(
                session,
                clock(),
                state=SessionState.QUEUED,
                conclusion=None,
                runs=(Run(device=None, state="queued"),),
                session_id=session_id,
            )


async def test_a_unique_prefix_reads_and_cancels_its_session(api: Api, clock: FakeClock) -> None:
    await _sessions(api, clock)
    read = await api.get("/sessions/6ad4b94b", who=READER)
    assert read.body["id"] == OTHER
    cancelled = await api.call("POST", "/sessions/6AD4B9/cancel", who=ADMIN)
    assert (cancelled.status, cancelled.body["session"]) == (200, OTHER)


async def test_a_prefix_of_several_is_a_400_naming_them_and_cancels_nothing(
    api: Api, clock: FakeClock
) -> None:
    await _sessions(api, clock)
    reply = await api.call("POST", "/sessions/eba46059/cancel", who=ADMIN)
    assert reply.status == 400
    assert reply.body["error"]["code"] == "ambiguous_id"
    assert reply.body["error"]["field"] == "session_id"
    assert FIRST in reply.body["error"]["message"]
    assert SECOND in reply.body["error"]["message"]
    for session_id in (FIRST, SECOND):
        assert (await api.get(f"/sessions/{session_id}")).body["state"] == "queued"


async def test_a_prefix_too_short_or_of_no_session_is_a_404(api: Api, clock: FakeClock) -> None:
    await _sessions(api, clock)
    for text in ("eba", "ffffffff", "eba4%", "not-an-id"):
        reply = await api.call("GET", f"/sessions/{text}")
        assert reply.status == 404, text


async def test_a_reservation_is_read_extended_and_released_by_its_short_id(api: Api) -> None:
    created = await api.call(
        "POST", "/reservations", who=READER, json={"labels": {"kerrigan.board": "modalix"}, "duration_s": 600}
    )
    assert created.status in (200, 201, 202), created.body
    whole = created.body["id"]
    short = whole[:8]
    assert (await api.get(f"/reservations/{short}", who=READER)).body["id"] == whole
    released = await api.call("DELETE", f"/reservations/{short}", who=READER)
    assert (released.status, released.body["id"]) == (200, whole)
