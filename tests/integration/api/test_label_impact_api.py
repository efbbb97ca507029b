"""``?dry_run=true`` on a change of labels or tags: which tasks of the last 30 days would lose devices.

The lab is the API tests' (``conftest.py``): pool-a (``form_factor=som``, devices dev-a1 with
``uart=enabled`` and dev-a2), pool-b (``form_factor=som``, dev-b1). Sessions are stored as rows with the
requirements their jobs recorded, at times of the test's clock.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tests.integration.api.conftest import ADMIN, OWNER_A, READER, Api
from tests.integration.api.history_rows import Run, add_session


async def _ran(api: Api, requirements: dict[str, Any], *, task: str = "smoke", days_ago: float = 1) -> None:
    """A session of octo/firmware with one job of ``task`` that recorded ``requirements``."""
    async with api.db.sessions() as session, session.begin():
        at = api.db.clock() - timedelta(days=days_ago)
        await add_session(session, at, runs=[Run(task, requirements=requirements)])


UART = {"labels": {"uart": ["enabled"]}, "tags": []}
SOM = {"labels": {"form_factor": ["som"]}, "tags": []}


async def test_dry_run_of_a_device_label_change_lists_the_tasks_it_strands_and_changes_nothing(
    api: Api,
) -> None:
    await _ran(api, UART)
    before = await api.snapshot()
    reply = await api.call(
        "PUT", "/devices/dev-a1/labels/uart?dry_run=true", who=OWNER_A, json={"value": "off"}
    )
    assert reply.status == 200, reply.body
    assert reply.body["dry_run"] is True
    assert reply.body["would_be"]["labels"]["explicit"]["uart"] == "off"
    assert reply.body["window_days"] == 30
    assert reply.body["lost"] == [
        {
            "repository": "octo/firmware",
            "workflow": "hil",
            "task": "smoke",
            "role": None,
            "devices_before": 1,
            "devices_after": 0,
            "lost": ["dev-a1"],
        }
    ]
    assert await api.snapshot() == before
    current = await api.get("/devices/dev-a1")
    assert reply.headers["ETag"] == current.headers["ETag"], "the ETag of the version it weighed"


async def test_dry_run_of_a_pool_change_counts_what_is_left(api: Api) -> None:
    await _ran(api, SOM)
    reply = await api.call(
        "PATCH", "/pools/pool-a?dry_run=true", who=OWNER_A, json={"labels": {"form_factor": "module"}}
    )
    assert reply.status == 200, reply.body
    [lost] = reply.body["lost"]
    assert (lost["devices_before"], lost["devices_after"], lost["lost"]) == (3, 1, ["dev-a1", "dev-a2"])


async def test_dry_run_of_a_tag_removal_and_of_a_harmless_change(api: Api) -> None:
    await _ran(api, {"labels": {}, "tags": ["uart-debug"]}, task="tagged")
    removed = await api.call("DELETE", "/devices/dev-a1/tags/uart-debug?dry_run=true", who=OWNER_A)
    assert [item["task"] for item in removed.body["lost"]] == ["tagged"]
    added = await api.call("PUT", "/pools/pool-a/tags/extra?dry_run=true", who=OWNER_A)
    assert added.status == 200
    assert added.body["lost"] == []


async def test_sessions_older_than_30_days_are_not_weighed(api: Api) -> None:
    await _ran(api, UART, days_ago=31)
    reply = await api.call(
        "PUT", "/devices/dev-a1/labels/uart?dry_run=true", who=OWNER_A, json={"value": "off"}
    )
    assert reply.body["lost"] == []


async def test_a_gang_role_is_weighed_on_its_own(api: Api) -> None:
    await _ran(api, {"roles": [{"role": "dut", **UART}, {"role": "peer", **SOM}]}, task="link")
    reply = await api.call(
        "PUT", "/devices/dev-a1/labels/uart?dry_run=true", who=ADMIN, json={"value": "off"}
    )
    assert [(item["task"], item["role"]) for item in reply.body["lost"]] == [("link", "dut")]


async def test_without_dry_run_the_change_is_made_as_before(api: Api) -> None:
    await _ran(api, UART)
    reply = await api.call(
        "PUT", "/devices/dev-a1/labels/uart?dry_run=false", who=OWNER_A, json={"value": "off"}
    )
    assert reply.status == 200
    assert "dry_run" not in reply.body
    assert reply.headers["ETag"]
    assert (await api.get("/devices/dev-a1")).body["labels"]["explicit"]["uart"] == "off"


async def test_a_dry_run_checks_roles_and_values_as_the_change_would(api: Api) -> None:
    before = await api.snapshot()
    refused = await api.call(
        "PUT", "/devices/dev-a1/labels/uart?dry_run=true", who=READER, json={"value": "x"}
    )
    assert refused.status == 403
    bad = await api.call("PUT", "/devices/dev-a1/labels/uart?dry_run=maybe", who=OWNER_A, json={"value": "x"})
    assert (bad.status, bad.body["error"]["field"]) == (400, "dry_run")
    assert await api.snapshot() == before
