"""A reservation request read and checked, field by field; who may end one; the reason a reserved device
gives."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from kerrigan.core.reservations import (
    RequestError,
    may_end,
    over_limit,
    read_request,
    reserved_text,
)
from kerrigan.core.roles import Principal


def test_a_request_is_read_into_requirements_a_duration_and_a_wait() -> None:
    request = read_request(
        {
            "labels": {"kerrigan.board": "modalix", "SDK": ["2.2.0", "2.1.1"]},
            "tags": ["uart-debug"],
            "duration_s": 7200,
            "wait_s": 1800,
            "note": " UART bring-up ",
        }
    )
    assert request.requirements.as_dict() == {
        "labels": {"kerrigan.board": ["modalix"], "sdk": ["2.2.0", "2.1.1"]},
        "tags": ["uart-debug"],
    }
    assert (request.duration_s, request.wait_s, request.device, request.note) == (
        7200,
        1800,
        None,
        "UART bring-up",
    )
    assert read_request({"device": "modalix-bluebox", "duration_s": 60}).device == "modalix-bluebox"


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ([], "body", "must be a JSON object"),
        ({"duration_s": 60, "colour": "red"}, "colour", "unknown field"),
        ({"duration_s": 60}, "labels", "must ask for something"),
        ({"labels": {"sdk": "2.2.0"}}, "duration_s", "is required"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": 0}, "duration_s", "must be 1 to 28800 seconds"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": -5}, "duration_s", "must be 1 to 28800 seconds"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": 28801}, "duration_s", "KERRIGAN_RESERVATION_MAX_S"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": "2h"}, "duration_s", "whole number of seconds"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": True}, "duration_s", "whole number of seconds"),
        ({"labels": {"sdk": "2.2.0"}, "duration_s": 60, "wait_s": -1}, "wait_s", "must be 0 to 86400"),
        ({"labels": {"sdk": []}, "duration_s": 60}, "labels.sdk", "non-empty list"),
        ({"labels": {"bad key": "x"}, "duration_s": 60}, "labels.bad key", ""),
        ({"labels": {"kerrigan.secret": "x"}, "duration_s": 60}, "labels.kerrigan.secret", ""),
        ({"labels": {"sdk": "a" * 300}, "duration_s": 60}, "labels.sdk", ""),
        ({"tags": ["ok", "Not Ok"], "duration_s": 60}, "tags[1]", ""),
        ({"device": "../etc", "duration_s": 60}, "device", "must be a device id"),
        ({"device": "d", "duration_s": 60, "note": "a\nb"}, "note", "printable characters on one line"),
    ],
)
def test_a_bad_request_names_its_field_and_queues_nothing(body: Any, field: str, says: str) -> None:
    with pytest.raises(RequestError) as raised:
        read_request(body)
    assert raised.value.field == field
    assert says in raised.value.message


def test_the_limit_on_duration_is_the_labs() -> None:
    assert read_request({"device": "d", "duration_s": 36_000}, max_s=36_000).duration_s == 36_000
    with pytest.raises(RequestError, match="must be 1 to 3600 seconds"):
        read_request({"device": "d", "duration_s": 3601}, max_s=3600)


def test_a_reserved_device_says_by_whom_until_when_and_why() -> None:
    until = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)
    assert reserved_text("hubot", until, "UART bring-up") == (
        "device reserved by hubot until 2026-12-01 12:30: UART bring-up"
    )
    assert reserved_text("hubot", until, "") == "device reserved by hubot until 2026-12-01 12:30"


def test_the_person_the_pools_owners_and_admins_may_end_a_reservation() -> None:
    owners = frozenset({"octocat"})
    assert may_end(Principal("Hubot"), "hubot", owners)
    assert may_end(Principal("OctoCat"), "hubot", owners)
    assert may_end(Principal("root", admin=True), "hubot", owners)
    assert not may_end(Principal("stranger"), "hubot", owners)


def test_a_person_holds_at_most_so_many_reservations() -> None:
    assert over_limit(1) is None
    assert over_limit(2) == (
        "you hold or wait for 2 reservations; at most 2 at once (KERRIGAN_RESERVATIONS_PER_USER): "
        "release one first"
    )
    assert over_limit(2, per_user=3) is None


def test_a_reserved_device_is_rejected_not_yet_with_who_holds_it_until_when() -> None:
    from kerrigan.core.device_status import DeviceReservation
    from kerrigan.core.inventory import Device, Inventory, Pool
    from kerrigan.core.matching import Outcome, resolve
    from kerrigan.core.requirements import Requirements

    held = DeviceReservation("hubot", datetime(2026, 12, 1, 12, 30, tzinfo=UTC), "UART bring-up")
    pool = Pool("lab", "Lab")
    devices = (
        Device("a", "lab", "modalix", "devkit", "linux", "h1", reserved=held),
        Device("b", "lab", "modalix", "devkit", "linux", "h1"),
    )
    resolution = resolve(Requirements(), Inventory((pool,), devices))
    assert [device.id for device in resolution.eligible] == ["b"]
    [verdict] = resolution.rejected
    assert [(r.text, r.permanent) for r in verdict.reasons] == [
        ("device reserved by hubot until 2026-12-01 12:30: UART bring-up", False)
    ]
    alone = resolve(Requirements(), Inventory((pool,), devices[:1]))
    assert alone.outcome is Outcome.WAITING  # not yet: the reservation ends
    assert alone.summary() == "0/1 devices available: 1 device reserved"
