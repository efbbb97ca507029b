"""``/api/v1/reservations``: a person reserves a board, sees it granted with its host and labels, and
releases it; bad input is a 400 naming the field with nothing queued; a stranger's release is a 403."""

from __future__ import annotations

from tests.integration.api.conftest import ADMIN, OWNER_B, READER, Api


async def test_a_free_board_is_granted_at_once_with_its_host_and_labels(api: Api) -> None:
    reply = await api.call(
        "POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600, "note": "UART"}
    )
    assert reply.status == 201, reply.body
    body = reply.body
    assert (body["state"], body["login"], body["note"], body["position"]) == ("active", READER, "UART", None)
    assert body["device"]["id"] == "dev-b1"
    assert body["device"]["host"] == "lab-b-01"
    assert body["device"]["labels"]["sdk"] == "2.1.1"
    assert body["ends_at"] is not None
    listed = await api.get(f"/reservations?login={READER}")
    assert [item["id"] for item in listed.body["items"]] == [body["id"]]
    assert listed.body["next_cursor"] is None
    assert (await api.get(f"/reservations/{body['id']}")).body["state"] == "active"


async def test_bad_input_is_a_400_naming_the_field_and_queues_nothing(api: Api) -> None:
    cases = [
        ({"device": "dev-b1", "duration_s": 0}, "duration_s"),
        ({"device": "dev-b1", "duration_s": 8 * 3600 + 1}, "duration_s"),
        ({"device": "dev-b1", "duration_s": -60}, "duration_s"),
        ({"device": "Not An Id", "duration_s": 60}, "device"),
        ({"device": "dev-b1", "duration_s": 60.5}, "duration_s"),
        ({"labels": {"Bad Key": "x"}, "duration_s": 60}, "labels.Bad Key"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": 60, "colour": "red"}, "colour"),
    ]
    for body, field in cases:
        reply = await api.call("POST", "/reservations", who=READER, json=body)
        assert reply.status == 400, (body, reply.body)
        assert reply.body["error"]["field"] == field, reply.body
    assert (await api.get("/reservations?ended=true")).body["items"] == []


async def test_a_device_there_is_not_is_a_422_and_a_whole_float_is_whole(api: Api) -> None:
    missing = await api.call("POST", "/reservations", who=READER, json={"device": "nope", "duration_s": 60})
    assert (missing.status, missing.body["error"]["code"], missing.body["error"]["field"]) == (
        422,
        "unknown_device",
        "device",
    ), missing.body
    assert (await api.get("/reservations?ended=true")).body["items"] == []
    # JSON Schema's integer holds 60.0, and so does the server.
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 60.0})
    assert (made.status, made.body["duration_s"]) == (201, 60), made.body


async def test_a_request_nothing_can_ever_match_is_a_422_with_every_reason(api: Api) -> None:
    reply = await api.call(
        "POST", "/reservations", who=READER, json={"labels": {"form_factor": "pcie"}, "duration_s": 60}
    )
    assert reply.status == 422, reply.body
    assert reply.body["error"]["code"] == "unschedulable"
    assert reply.body["resolution"]["outcome"] == "unschedulable"
    assert "form_factor expected pcie" in reply.body["error"]["message"]


async def test_only_the_person_its_pools_owners_and_admins_release_it(api: Api) -> None:
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600})
    path = f"/reservations/{made.body['id']}"
    refused = await api.call("DELETE", path, who="olga")  # pool-a's owner: not dev-b1's pool
    assert refused.status == 403, refused.body
    released = await api.call("DELETE", path, who=OWNER_B)
    assert released.status == 200, released.body
    assert (released.body["state"], released.body["end_reason"], released.body["ended_by"]) == (
        "ended",
        "released",
        OWNER_B,
    )
    again = await api.call("POST", "/reservations", who=ADMIN, json={"device": "dev-b1", "duration_s": 60})
    assert again.body["state"] == "active"  # the board was free again at once
    assert (await api.call("DELETE", "/reservations/" + "0" * 36, who=ADMIN)).status == 404


async def test_an_active_reservation_is_extended_while_nobody_waits_for_its_board(api: Api) -> None:
    made = await api.call("POST", "/reservations", who=READER, json={"device": "dev-b1", "duration_s": 600})
    path = f"/reservations/{made.body['id']}"
    extended = await api.call("PATCH", path, who=READER, json={"extend_s": 1800})
    assert extended.status == 200, extended.body
    assert extended.body["ends_at"] > made.body["ends_at"]
    too_long = await api.call("PATCH", path, who=READER, json={"extend_s": 8 * 3600})
    assert (too_long.status, too_long.body["error"]["field"]) == (400, "extend_s")
    assert "KERRIGAN_RESERVATION_MAX_S" in too_long.body["error"]["message"]
    # Someone else now waits for dev-b1: no more extensions.
    waiting = await api.call(
        "POST", "/reservations", who=ADMIN, json={"device": "dev-b1", "duration_s": 60, "wait_s": 600}
    )
    assert waiting.body["state"] == "waiting"
    refused = await api.call("PATCH", path, who=READER, json={"extend_s": 60})
    assert refused.status == 400
    assert "1 queued job(s) or reservation(s) wait for dev-b1" in refused.body["error"]["message"]
    assert (await api.call("PATCH", path, who="olga", json={"extend_s": 60})).status == 403
    assert (await api.call("PATCH", path, who=READER, json={"extend_s": "1h"})).status == 400
    await api.call("DELETE", path, who=READER)
    ended = await api.call("PATCH", path, who=READER, json={"extend_s": 60})
    assert (ended.status, ended.body["error"]["code"], ended.body["error"]["field"]) == (
        409,
        "not_active",
        "state",
    )


async def test_a_client_may_name_its_request_to_withdraw_it_whatever_happens(api: Api) -> None:
    mine = "6f9e2a3c-1b4d-4e5f-8a7b-9c0d1e2f3a4b"
    made = await api.call(
        "POST", "/reservations", who=READER, json={"id": mine, "device": "dev-b1", "duration_s": 60}
    )
    assert (made.status, made.body["id"]) == (201, mine)
    again = await api.call(
        "POST", "/reservations", who=READER, json={"id": mine, "device": "dev-a1", "duration_s": 60}
    )
    assert (again.status, again.body["error"]["code"], again.body["error"]["field"]) == (409, "exists", "id")
    for bad in ("not-a-uuid", mine.upper(), 7):
        reply = await api.call(
            "POST", "/reservations", who=READER, json={"id": bad, "device": "dev-a1", "duration_s": 60}
        )
        assert (reply.status, reply.body["error"]["field"]) == (400, "id"), bad
    assert (await api.call("DELETE", f"/reservations/{mine}", who=READER)).body["state"] == "ended"
    note = await api.call(
        "POST", "/reservations", who=READER, json={"device": "dev-a1", "duration_s": 60, "note": 0}
    )
    assert (note.status, note.body["error"]["field"]) == (400, "note")
