"""Each runner protocol call's typed request: read from the body's JSON object in one place, the first field
that is not right named (the protocol answers it 400), what is right kept as sent."""

from __future__ import annotations

from typing import Any

import pytest

from kerrigan.core.runner_fields import FieldError
from kerrigan.dispatch.protocol.requests import (
    Chunk,
    Finish,
    Heartbeat,
    HolderSettings,
    Refusal,
    Registration,
    Request,
    Start,
)


@pytest.mark.parametrize(
    ("kind", "body", "field"),
    [
        (Registration, {"protocol": "1"}, "protocol"),
        (Registration, {"protocol": [True]}, "protocol"),
        (Registration, {"protocol": [1], "capabilities": [""]}, "capabilities"),
        (Registration, {"protocol": [1], "resources": []}, "resources"),
        (Registration, {"protocol": [1], "resources": {"vcpus": 2**63}}, "resources.vcpus"),
        (Registration, {"protocol": [1], "devices": {"modalix-bluebox": "gone"}}, "devices"),
        (Heartbeat, {"waiting": {"12": -1}}, "waiting"),
        (Heartbeat, {"waiting": {"job-12": 5}}, "waiting"),
        (Heartbeat, {"health": []}, "health"),
        (Start, {"cpus": "two"}, "cpus"),
        (Start, {"cpus": 2}, "cpus"),
        (Refusal, {"reason": "bored"}, "reason"),
        (Refusal, {"reason": "runner_disk_full", "free_bytes": 1}, "free_bytes"),
        (Refusal, {"reason": "runner_disk_full", "free_bytes": 1, "floor_bytes": -1}, "floor_bytes"),
        (Refusal, {"reason": "runner_full", "detail": 7}, "detail"),
        (Refusal, {"reason": "runner_full", "retry": "no"}, "retry"),
        (Chunk, {"seq": 0, "offset": 0}, "seq"),
        (Chunk, {"seq": -1, "offset": 0, "data": ""}, "seq"),
        (Chunk, {"seq": 0, "offset": -1, "data": ""}, "offset"),
        (Chunk, {"seq": 0, "offset": 0, "data": "\x00"}, "data"),
        (Chunk, {"seq": 0, "offset": 0, "data": "", "truncated_before_seq": "1"}, "truncated_before_seq"),
        (Finish, {"exit_status": True}, "exit_status"),
        (Finish, {"exit_status": 256}, "exit_status"),
        (Finish, {"exit_status": 0, "accounting": []}, "accounting"),
        (Finish, {"exit_status": 0, "accounting": {"cpu_s": -1}}, "accounting.cpu_s"),
        (Finish, {"exit_status": 0, "outcome": "exploded"}, "outcome"),
        (HolderSettings, {"device": 3, "settings": {}}, "device"),
        (HolderSettings, {"device": "modalix-bluebox", "settings": {"1X": "a"}}, "settings"),
    ],
)
def test_a_field_that_is_not_right_is_named(kind: type[Request], body: dict[str, Any], field: str) -> None:
    with pytest.raises(FieldError) as raised:
        kind.of(body)
    assert raised.value.field == field


def test_what_is_right_is_kept_as_sent() -> None:
    assert Finish.of({"exit_status": -9, "accounting": {"wall_s": 1.5}}) == Finish(-9, {"wall_s": 1.5}, None)
    assert Refusal.of({"reason": "runner_disk_full", "free_bytes": 5, "floor_bytes": 9}) == Refusal(
        "runner_disk_full", "5 bytes free, floor 9 bytes", retry=True
    )
    assert Chunk.of({"seq": 3, "offset": 10, "data": "ok\n"}) == Chunk(3, 10, "ok\n", None)
    assert Start.of({}) == Start(None)
    assert Heartbeat.of({"waiting": {"12": 5}}).waiting == {"12": 5}
    registration = Registration.of({"protocol": [1, 2], "capabilities": ["withdraw"]})
    assert (registration.versions, registration.capabilities) == ((1, 2), ("withdraw",))


KINDS = (Registration, Heartbeat, Start, Refusal, Chunk, Finish, HolderSettings)


def test_only_start_may_come_without_a_body() -> None:
    assert [kind for kind in KINDS if kind.optional] == [Start]
