"""Pool owners set their pool's and devices' health checks through the API, as admins do.

The lab is the API tests' (``conftest.py``): olga owns pool-a (devices dev-a1, dev-a2), bob owns pool-b,
rita reads.
"""

from __future__ import annotations

import pytest

from kerrigan.store.audit import list_audit
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api

CHECK = {"run": "/opt/lab/health/modalix.sh", "every": "12h", "timeout_s": 300, "vcpus": 1}


async def test_an_owner_sets_the_pool_health_check_and_the_devices_inherit_it(api: Api) -> None:
    reply = await api.call("PATCH", "/pools/pool-a", who=OWNER_A, json={"health_check": CHECK})
    assert reply.status == 200, reply.body
    assert reply.body["health_check"] == CHECK
    device = (await api.get("/devices/dev-a2")).body
    assert device["health_check"] is None
    assert device["effective_health_check"] == CHECK
    async with api.db.sessions() as session:
        [entry] = await list_audit(session, pool_id="pool-a", limit=1)
    assert (entry.actor, entry.field) == (OWNER_A, "health_check")


async def test_an_owner_gives_a_device_its_own_check_and_removes_it_with_null(api: Api) -> None:
    own = {"run": "./check.sh"}
    reply = await api.call("PATCH", "/devices/dev-a1", who=OWNER_A, json={"health_check": own})
    assert reply.status == 200, reply.body
    assert reply.body["health_check"] == {"run": "./check.sh", "timeout_s": 600, "vcpus": 1}
    reply = await api.call("PATCH", "/devices/dev-a1", who=OWNER_A, json={"health_check": None})
    assert reply.status == 200
    assert reply.body["health_check"] is None


async def test_only_admins_and_the_pool_owners_set_it(api: Api) -> None:
    before = await api.snapshot()
    for who in (READER, OWNER_B):
        reply = await api.call("PATCH", "/pools/pool-a", who=who, json={"health_check": CHECK})
        assert reply.status == 403, who
    assert await api.snapshot() == before
    assert (await api.call("PATCH", "/pools/pool-b", who=ADMIN, json={"health_check": CHECK})).status == 200


async def test_an_owner_still_may_not_change_what_admins_change_beside_it(api: Api) -> None:
    reply = await api.call(
        "PATCH", "/pools/pool-a", who=OWNER_A, json={"health_check": CHECK, "name": "Renamed"}
    )
    assert reply.status == 403
    assert "owners edit only labels, tags and the health check" in reply.body["error"]["message"]


@pytest.mark.parametrize(
    ("check", "field"),
    [
        ({"every": "24h"}, "health_check.run"),
        ({"run": "   "}, "health_check.run"),
        ({"run": "x\u0000y"}, "health_check.run"),
        ({"run": "x", "every": "1m"}, "health_check.every"),
        ({"run": "x", "every": "often"}, "health_check.every"),
        ({"run": "x", "timeout_s": 0}, "health_check.timeout_s"),
        ({"run": "x", "timeout_s": "600"}, "health_check.timeout_s"),
        ({"run": "x", "vcpus": 1000}, "health_check.vcpus"),
        ({"run": "x", "command": "y"}, "health_check.command"),
        ("./check.sh", "health_check"),
    ],
)
async def test_a_bad_health_check_is_a_400_naming_its_key_and_changes_nothing(
    api: Api, check: object, field: str
) -> None:
    before = await api.snapshot()
    reply = await api.call("PATCH", "/pools/pool-a", who=OWNER_A, json={"health_check": check})
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == field
    assert await api.snapshot() == before


async def test_a_pool_or_device_may_be_created_with_a_health_check(api: Api) -> None:
    reply = await api.call("POST", "/pools", json={"id": "pool-c", "health_check": CHECK})
    assert (reply.status, reply.body["health_check"]) == (201, CHECK)
    reply = await api.call(
        "POST",
        "/devices",
        json={"id": "dev-c1", "pool": "pool-c", "board": "modalix", "host": "lab-c", "health_check": CHECK},
    )
    assert (reply.status, reply.body["health_check"]) == (201, CHECK)


async def test_a_whole_number_written_with_a_fraction_is_that_number(api: Api) -> None:
    reply = await api.call(
        "PATCH", "/pools/pool-a", who=OWNER_A, json={"health_check": {"run": "x", "timeout_s": 600.0}}
    )
    assert (reply.status, reply.body["health_check"]["timeout_s"]) == (200, 600)
    reply = await api.call(
        "PATCH", "/pools/pool-a", who=OWNER_A, json={"health_check": {"run": "x", "timeout_s": 600.5}}
    )
    assert (reply.status, reply.body["error"]["field"]) == (400, "health_check.timeout_s")
