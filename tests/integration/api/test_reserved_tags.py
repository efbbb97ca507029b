"""Tags under ``kerrigan.`` are refused through the API like label keys: a 400 naming the field, nothing
changed."""

from __future__ import annotations

import pytest

from tests.integration.api.conftest import ADMIN, OWNER_A, Api

NEW_POOL = {"id": "pool-c", "name": "Pool C", "owners": [OWNER_A], "tags": ["nightly", "kerrigan.x"]}
NEW_DEVICE = {
    "id": "dev-a3",
    "pool": "pool-a",
    "board": "modalix",
    "host": "lab-a-03",
    "tags": ["kerrigan.x"],
}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/pools/pool-a/tags/kerrigan.x", None, "tag"),
        ("PUT", "/pools/pool-a/tags/Kerrigan.Pool_Id", None, "tag"),
        ("PUT", "/devices/dev-a1/tags/kerrigan.x", None, "tag"),
        ("POST", "/pools", NEW_POOL, "tags[1]"),
        ("POST", "/devices", NEW_DEVICE, "tags[0]"),
        ("PATCH", "/pools/pool-a", {"tags": ["kerrigan.x"]}, "tags[0]"),
        ("PATCH", "/devices/dev-a1", {"tags": ["uart-debug", "KERRIGAN.board"]}, "tags[1]"),
    ],
)
async def test_a_tag_under_the_reserved_prefix_is_refused_naming_the_field(
    api: Api, method: str, path: str, body: object, field: str
) -> None:
    before = await api.snapshot()
    reply = await api.call(method, path, who=ADMIN, json=body)
    assert reply.status == 400, reply.body
    error = reply.body["error"]
    assert error["field"] == field
    assert error["code"] == "invalid_tag"
    assert "uses the reserved prefix 'kerrigan.'" in error["message"]
    assert await api.snapshot() == before


async def test_a_tag_that_only_resembles_the_reserved_prefix_is_accepted(api: Api) -> None:
    reply = await api.call("PUT", "/pools/pool-a/tags/kerrigan-lab", who=OWNER_A)
    assert reply.status == 200, reply.body
    assert "kerrigan-lab" in reply.body["tags"]
