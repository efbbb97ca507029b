"""``PUT /api/v1/hosts/{id}/state`` (pause and resume, System Admins) and ``until`` on a device's state (its
pool's owners may set maintenance): who may, what is refused and what the answers say."""

from __future__ import annotations

from datetime import timedelta

from kerrigan.testing.clock import FakeClock
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api


def iso(clock: FakeClock, minutes: int) -> str:
    return (clock() + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_an_admin_pauses_a_host_with_a_reason_and_until_and_resumes_it(
    api: Api, clock: FakeClock
) -> None:
    paused = await api.call(
        "PUT",
        "/hosts/lab-a-01/state",
        json={"state": "paused", "reason": "kernel upgrade", "until": iso(clock, 90)},
    )
    assert paused.status == 200, paused.body
    pause = paused.body["pause"]
    assert (pause["reason"], pause["by"]) == ("kernel upgrade", ADMIN)
    assert pause["until"] == (clock() + timedelta(minutes=90)).replace(microsecond=0).isoformat()
    assert (await api.get("/hosts/lab-a-01")).body["pause"] == pause
    resumed = await api.call("PUT", "/hosts/lab-a-01/state", json={"state": "active"})
    assert (resumed.status, resumed.body["pause"]) == (200, None)


async def test_only_admins_pause_hosts_and_bad_bodies_name_their_field(api: Api, clock: FakeClock) -> None:
    before = await api.snapshot()
    for who in (OWNER_A, OWNER_B, READER):
        refused = await api.call("PUT", "/hosts/lab-a-01/state", json={"state": "paused"}, who=who)
        assert refused.status == 403, who
    for body, field in (
        ({"state": "asleep"}, "state"),
        ({"state": "paused", "until": "2020-01-01T00:00:00Z"}, "until"),
        ({"state": "paused", "until": "tomorrow"}, "until"),
        ({"state": "paused", "until": "2030-01-01T00:00:00"}, "until"),  # no offset
        ({"state": "active", "until": iso(clock, 5)}, "until"),
        ({"state": "paused", "reason": 7}, "reason"),
        ({"state": "paused", "colour": "red"}, "colour"),
        ({}, "state"),
    ):
        reply = await api.call("PUT", "/hosts/lab-a-01/state", json=body)
        assert reply.status == 400, body
        assert reply.body["error"]["field"] == field, body
    missing = await api.call("PUT", "/hosts/nope/state", json={"state": "paused"})
    assert missing.status == 404
    assert await api.snapshot() == before


async def test_an_owner_sets_maintenance_until_a_time_and_the_device_says_who_and_until(
    api: Api, clock: FakeClock
) -> None:
    reply = await api.call(
        "PUT",
        "/devices/dev-a1/state",
        json={"state": "maintenance", "reason": "reflashing", "until": iso(clock, 60)},
        who=OWNER_A,
    )
    assert reply.status == 200, reply.body
    assert (reply.body["state"], reply.body["state_reason"], reply.body["state_by"]) == (
        "maintenance",
        "reflashing",
        OWNER_A,
    )
    assert reply.body["state_until"] == (clock() + timedelta(minutes=60)).replace(microsecond=0).isoformat()
    assert reply.body["health"] == {"health": "unknown", "reason": "", "since": None, "job": None}
    for body, who, status, field in (
        ({"state": "retired"}, OWNER_A, 403, None),
        ({"state": "maintenance"}, OWNER_B, 403, None),
        ({"state": "offline", "until": iso(clock, 5)}, ADMIN, 400, "until"),
        ({"state": "maintenance", "until": "2020-01-01T00:00:00Z"}, OWNER_A, 400, "until"),
    ):
        refused = await api.call("PUT", "/devices/dev-a1/state", json=body, who=who)
        assert refused.status == status, body
        if field:
            assert refused.body["error"]["field"] == field


async def test_a_health_check_on_demand_is_for_admins_and_owners_and_never_queued_twice(api: Api) -> None:
    import dataclasses

    from kerrigan.core.health_checks import HealthCheck
    from kerrigan.store.audit import Change
    from kerrigan.store.inventory import get_device, save_device

    assert (await api.call("POST", "/devices/dev-a1/health-check")).status == 409  # it has none yet
    async with api.db.sessions() as session, session.begin():
        stored = await get_device(session, "dev-a1")
        check = HealthCheck("/opt/lab/health.sh")
        await save_device(
            session, dataclasses.replace(stored.device, health_check=check), Change("t", api.db.clock())
        )
    for who in (OWNER_B, READER):
        assert (await api.call("POST", "/devices/dev-a1/health-check", who=who)).status == 403, who
    first = await api.call("POST", "/devices/dev-a1/health-check", who=OWNER_A)
    assert first.status == 202, first.body
    assert first.body["queued"] is True
    again = await api.call("POST", "/devices/dev-a1/health-check")
    assert again.status == 202
    assert (again.body["queued"], again.body["job"]) == (False, first.body["job"])
    assert (await api.call("POST", "/devices/nope/health-check")).status == 404
