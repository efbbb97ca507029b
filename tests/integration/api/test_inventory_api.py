"""Pools, devices, labels, tags and states through ``/api/v1``: what each request does to the inventory.

The lab is the one ``conftest.py`` seeds. A table of requests that leave the lab as it was (reads, and
writes that are refused) shares one lab through ``subtests``; a request that changes it gets a test of its
own.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kerrigan.testing.clock import FakeClock
from tests.integration.api.conftest import ADMIN, OWNER_A, READER, Api

MANIFEST = """\
name: smoke
on:
  push: {branches: [main]}
scheduling:
  labels:
    sdk: "2.2.0"
    form_factor: som
tasks:
  - id: smoke-som
    run: ./scripts/smoke.sh
"""


def effective(body: dict[str, Any]) -> dict[str, tuple[str, str, str | None]]:
    """A pool's or device's effective labels as ``key: (value, source, overrides)``."""
    return {
        label["key"]: (label["value"], label["source"], label.get("overrides"))
        for label in body["labels"]["effective"]
    }


# -- create and read -------------------------------------------------------------------------------

NEW_POOL = {
    "id": "pool-c",
    "name": "SDK 2.3 SoM",
    "owners": [OWNER_A],
    "firmware": {"channel": "beta", "base_version": "2.3.0"},
    "labels": {"sdk": "2.3.0"},
    "tags": ["nightly"],
}
NEW_DEVICE = {"id": "dev-a3", "pool": "pool-a", "board": "modalix", "host": "lab-a-03"}


async def test_creating_a_pool_answers_201_with_its_location_etag_and_the_pool_as_given(api: Api) -> None:
    created = await api.call("POST", "/pools", json=NEW_POOL)
    assert created.status == 201
    assert created.headers["Location"] == "/api/v1/pools/pool-c"
    body = created.body
    assert (body["name"], body["owners"], body["firmware"], body["labels"]["explicit"], body["tags"]) == (
        "SDK 2.3 SoM",
        [OWNER_A],
        {"channel": "beta", "base_version": "2.3.0"},
        {"sdk": "2.3.0"},
        ["nightly"],
    )
    read = await api.get("/pools/pool-c")
    assert read.headers["ETag"] == created.headers["ETag"]
    assert read.body == {**created.body, "device_states": {}}


async def test_creating_a_device_answers_201_with_its_location_and_the_etag_a_read_gives(api: Api) -> None:
    created = await api.call("POST", "/devices", json=NEW_DEVICE)
    assert created.status == 201
    assert created.headers["Location"] == "/api/v1/devices/dev-a3"
    read = await api.get("/devices/dev-a3")
    assert read.headers["ETag"] == created.headers["ETag"]
    assert (read.body["target_type"], read.body["os_type"], read.body["state"]) == (
        "devkit",
        "linux",
        "available",
    )


async def test_pool_read_shows_explicit_implicit_and_effective_labels(api: Api) -> None:
    labels = (await api.get("/pools/pool-a")).body["labels"]
    assert labels["explicit"] == {"form_factor": "som", "sdk": "2.2.0"}
    assert labels["implicit"] == {
        "kerrigan.pool_id": "pool-a",
        "kerrigan.pool_name": "pool-a",
        "kerrigan.firmware_channel": "ga",
        "kerrigan.firmware_base_version": "2.2.0",
    }
    assert [(label["key"], label["source"]) for label in labels["effective"]] == [
        ("form_factor", "pool"),
        ("kerrigan.firmware_base_version", "implicit"),
        ("kerrigan.firmware_channel", "implicit"),
        ("kerrigan.pool_id", "implicit"),
        ("kerrigan.pool_name", "implicit"),
        ("sdk", "pool"),
    ]


async def test_device_read_says_where_each_label_and_tag_comes_from(api: Api) -> None:
    body = (await api.get("/devices/dev-a1")).body
    assert body["tags"] == {
        "pool": ["som-devkits"],
        "device": ["uart-debug"],
        "effective": ["som-devkits", "uart-debug"],
    }
    assert body["labels"]["explicit"] == {"sdk": "2.2.1", "uart": "enabled"}
    assert effective(body) == {
        "form_factor": ("som", "pool", None),
        "sdk": ("2.2.1", "device override", "2.2.0"),
        "uart": ("enabled", "device", None),
        "kerrigan.pool_id": ("pool-a", "implicit", None),
        "kerrigan.pool_name": ("pool-a", "implicit", None),
        "kerrigan.firmware_channel": ("ga", "implicit", None),
        "kerrigan.firmware_base_version": ("2.2.0", "implicit", None),
        "kerrigan.target_id": ("dev-a1", "implicit", None),
        "kerrigan.board": ("modalix", "implicit", None),
        "kerrigan.target_type": ("devkit", "implicit", None),
        "kerrigan.os_type": ("linux", "implicit", None),
        "kerrigan.host": ("lab-a-01", "implicit", None),
    }


async def test_pool_read_counts_its_devices_by_state(api: Api) -> None:
    await api.call("PUT", "/devices/dev-a2/state", json={"state": "offline", "reason": "unplugged"})
    body = (await api.get("/pools/pool-a")).body
    assert (body["devices"], body["device_states"]) == (2, {"available": 1, "offline": 1})


# -- labels and tags -------------------------------------------------------------------------------


async def test_put_label_sets_it_under_its_lowercase_key(api: Api) -> None:
    reply = await api.call(
        "PUT", "/devices/dev-a1/labels/Owner_Team", who=OWNER_A, json={"value": "Platform"}
    )
    assert reply.status == 200
    assert (await api.get("/devices/dev-a1")).body["labels"]["explicit"] == {
        "owner_team": "Platform",
        "sdk": "2.2.1",
        "uart": "enabled",
    }


async def test_put_label_with_an_empty_value_removes_it(api: Api) -> None:
    reply = await api.call("PUT", "/pools/pool-a/labels/sdk", who=OWNER_A, json={"value": ""})
    assert reply.status == 200
    assert (await api.get("/pools/pool-a")).body["labels"]["explicit"] == {"form_factor": "som"}


async def test_delete_label_removes_it(api: Api) -> None:
    reply = await api.call("DELETE", "/devices/dev-a1/labels/uart", who=OWNER_A)
    assert reply.status == 200
    assert (await api.get("/devices/dev-a1")).body["labels"]["explicit"] == {"sdk": "2.2.1"}


async def test_removing_a_device_override_brings_back_the_pool_value(api: Api) -> None:
    await api.call("DELETE", "/devices/dev-a1/labels/sdk", who=OWNER_A)
    assert effective((await api.get("/devices/dev-a1")).body)["sdk"] == ("2.2.0", "pool", None)


async def test_pool_labels_and_tags_reach_its_devices(api: Api) -> None:
    await api.call("PUT", "/pools/pool-a/labels/form_factor", json={"value": "module"})
    await api.call("PUT", "/pools/pool-a/tags/ga-firmware")
    device = (await api.get("/devices/dev-a2")).body
    assert effective(device)["form_factor"] == ("module", "pool", None)
    assert device["tags"]["effective"] == ["ga-firmware", "som-devkits"]


async def test_patch_labels_replaces_the_whole_set(api: Api) -> None:
    reply = await api.call("PATCH", "/pools/pool-a", who=OWNER_A, json={"labels": {"purpose": "ci"}})
    assert reply.status == 200
    assert reply.body["labels"]["explicit"] == {"purpose": "ci"}


async def test_put_tag_adds_it_and_delete_tag_removes_it(api: Api) -> None:
    added = await api.call("PUT", "/devices/dev-a1/tags/JTAG", who=OWNER_A)
    assert added.body["tags"]["device"] == ["jtag", "uart-debug"]
    removed = await api.call("DELETE", "/devices/dev-a1/tags/uart-debug", who=OWNER_A)
    assert removed.body["tags"]["device"] == ["jtag"]


# -- states ----------------------------------------------------------------------------------------


async def test_state_change_keeps_the_reason_and_the_time_from_the_clock(api: Api, clock: FakeClock) -> None:
    clock.advance(90)
    reply = await api.call(
        "PUT", "/devices/dev-a1/state", json={"state": "maintenance", "reason": "reflashing"}
    )
    assert reply.status == 200
    assert (reply.body["state"], reply.body["state_reason"]) == ("maintenance", "reflashing")
    assert reply.body["state_changed_at"] == "2026-11-29T12:01:30+00:00"
    assert (await api.get("/devices/dev-a1")).body["state_changed_at"] == clock.now.isoformat()


async def test_state_changed_at_stays_when_only_labels_change(api: Api, clock: FakeClock) -> None:
    clock.advance(90)
    reply = await api.call("PUT", "/devices/dev-a1/labels/uart", json={"value": "disabled"})
    assert reply.body["state_changed_at"] == "2026-11-29T12:00:00+00:00"


# -- filters ---------------------------------------------------------------------------------------

DEVICE_FILTERS = {
    "?label=sdk=2.2.0": ["dev-a2"],  # dev-a1 overrides sdk with 2.2.1
    "?label=sdk=2.2.1": ["dev-a1"],
    "?label=uart=enabled": ["dev-a1"],
    "?label=kerrigan.pool_id=pool-b": ["dev-b1"],
    "?label=kerrigan.board=modalix": ["dev-a1", "dev-a2"],
    "?label=form_factor=som&label=sdk=2.1.1": ["dev-b1"],
    "?tag=som-devkits": ["dev-a1", "dev-a2"],  # the pool's tag
    "?tag=uart-debug": ["dev-a1"],
    "?tag=som-devkits&tag=legacy": [],
    "?label=form_factor=som&tag=legacy": ["dev-b1"],
    "?label=missing=x": [],
    "?pool=pool-a": ["dev-a1", "dev-a2"],
    "?state=available": ["dev-a1", "dev-a2", "dev-b1"],
    "?state=offline": [],
}
POOL_FILTERS = {
    "?label=sdk=2.1.1": ["pool-b"],
    "?label=form_factor=som": ["pool-a", "pool-b"],
    "?label=kerrigan.firmware_channel=ga": ["pool-a"],
    "?label=uart=enabled": [],  # a device's label is not its pool's
    "?tag=legacy": ["pool-b"],
    "?tag=uart-debug": [],
}


async def test_device_list_filters_on_effective_labels_and_tags(api: Api, subtests: pytest.Subtests) -> None:
    for query, expected in DEVICE_FILTERS.items():
        with subtests.test(msg=query):
            devices = (await api.get(f"/devices{query}", who=READER)).body["devices"]
            assert [device["id"] for device in devices] == expected


async def test_pool_list_filters_on_effective_pool_labels_and_tags(
    api: Api, subtests: pytest.Subtests
) -> None:
    for query, expected in POOL_FILTERS.items():
        with subtests.test(msg=query):
            pools = (await api.get(f"/pools{query}", who=READER)).body["pools"]
            assert [pool["id"] for pool in pools] == expected


# -- conflicts and missing things ------------------------------------------------------------------


async def test_deleting_a_pool_that_has_devices_is_409_and_keeps_it(api: Api) -> None:
    reply = await api.call("DELETE", "/pools/pool-a")
    assert (reply.status, reply.body["error"]["code"]) == (409, "conflict")
    assert "2 device(s)" in reply.body["error"]["message"]
    assert (await api.get("/pools/pool-a")).body["devices"] == 2


async def test_creating_an_id_that_exists_is_409_and_changes_nothing(
    api: Api, subtests: pytest.Subtests
) -> None:
    before = await api.snapshot()
    for path, body in (("/pools", {"id": "pool-b"}), ("/devices", {**NEW_DEVICE, "id": "dev-b1"})):
        with subtests.test(msg=path):
            reply = await api.call("POST", path, json=body)
            assert (reply.status, reply.body["error"]["code"]) == (409, "conflict")
            assert "already exists" in reply.body["error"]["message"]
            assert await api.snapshot() == before


UNKNOWN = (
    ("GET", "/pools/nope", None),
    ("PATCH", "/pools/nope", {"name": "x"}),
    ("DELETE", "/pools/nope", None),
    ("PUT", "/pools/nope/labels/sdk", {"value": "1"}),
    ("DELETE", "/pools/nope/labels/sdk", None),
    ("PUT", "/pools/nope/tags/t", None),
    ("DELETE", "/pools/nope/tags/t", None),
    ("GET", "/devices/nope", None),
    ("PATCH", "/devices/nope", {"board": "x"}),
    ("DELETE", "/devices/nope", None),
    ("PUT", "/devices/nope/labels/sdk", {"value": "1"}),
    ("DELETE", "/devices/nope/labels/sdk", None),
    ("PUT", "/devices/nope/tags/t", None),
    ("DELETE", "/devices/nope/tags/t", None),
    ("PUT", "/devices/nope/state", {"state": "offline"}),
    ("GET", "/devices?pool=nope", None),
    ("DELETE", "/label-keys/nope", None),
)


async def test_unknown_pool_device_or_key_is_404(api: Api, subtests: pytest.Subtests) -> None:
    for method, path, body in UNKNOWN:
        with subtests.test(msg=f"{method} {path}"):
            reply = await api.call(method, path, json=body)
            assert (reply.status, reply.body["error"]["code"]) == (404, "not_found")
            assert "'nope'" in reply.body["error"]["message"]


# -- ETag and If-Match -----------------------------------------------------------------------------


async def test_a_write_answers_a_new_etag_that_the_next_read_gives(api: Api) -> None:
    first = (await api.get("/devices/dev-a1")).headers["ETag"]
    written = await api.call("PUT", "/devices/dev-a1/tags/nightly", who=OWNER_A)
    assert written.headers["ETag"] != first
    assert (await api.get("/devices/dev-a1")).headers["ETag"] == written.headers["ETag"]


async def test_write_with_the_current_etag_succeeds(api: Api) -> None:
    etag = (await api.get("/pools/pool-a")).headers["ETag"]
    reply = await api.call(
        "PUT", "/pools/pool-a/labels/sdk", json={"value": "2.3.0"}, headers={"If-Match": etag}
    )
    assert reply.status == 200


async def test_device_etag_changes_when_its_pools_labels_change(api: Api) -> None:
    before = (await api.get("/devices/dev-a2")).headers["ETag"]
    await api.call("PUT", "/pools/pool-a/labels/form_factor", who=OWNER_A, json={"value": "module"})
    assert (await api.get("/devices/dev-a2")).headers["ETag"] != before


IF_MATCH_WRITES = (
    ("PATCH", "/pools/pool-a", {"name": "Pool A prime"}),
    ("DELETE", "/pools/pool-a", None),
    ("PUT", "/pools/pool-a/labels/purpose", {"value": "ci"}),
    ("DELETE", "/pools/pool-a/labels/sdk", None),
    ("PUT", "/pools/pool-a/tags/nightly", None),
    ("DELETE", "/pools/pool-a/tags/som-devkits", None),
    ("PATCH", "/devices/dev-a1", {"board": "davinci"}),
    ("DELETE", "/devices/dev-a1", None),
    ("PUT", "/devices/dev-a1/labels/purpose", {"value": "ci"}),
    ("DELETE", "/devices/dev-a1/labels/uart", None),
    ("PUT", "/devices/dev-a1/tags/jtag", None),
    ("DELETE", "/devices/dev-a1/tags/uart-debug", None),
    ("PUT", "/devices/dev-a1/state", {"state": "offline", "reason": "unplugged"}),
)


async def test_write_with_a_stale_etag_is_412_with_the_current_etag_and_changes_nothing(
    api: Api, subtests: pytest.Subtests
) -> None:
    """The ETags are read, then someone changes the pool: the pool's and its devices' ETags are stale."""
    stale = {
        subject: (await api.get(subject)).headers["ETag"] for subject in ("/pools/pool-a", "/devices/dev-a1")
    }
    await api.call("PUT", "/pools/pool-a/labels/sdk", json={"value": "2.3.0"})
    current = {subject: (await api.get(subject)).headers["ETag"] for subject in stale}
    before = await api.snapshot()
    for method, path, body in IF_MATCH_WRITES:
        subject = "/".join(path.split("/")[:3])
        with subtests.test(msg=f"{method} {path}"):
            headers = {"If-Match": stale[subject]}
            reply = await api.call(method, path, json=body, headers=headers)
            assert (reply.status, reply.body["error"]["code"]) == (412, "precondition_failed")
            assert reply.headers["ETag"] == current[subject]
            assert await api.snapshot() == before


# -- the registry of approved label keys -----------------------------------------------------------


async def approve(api: Api, *keys: str) -> None:
    for key in keys:
        reply = await api.call("PUT", f"/label-keys/{key}", json={"description": f"the {key} label"})
        assert reply.status == 201


async def test_owner_may_use_any_valid_key_while_the_registry_is_empty(api: Api) -> None:
    reply = await api.call("PUT", "/pools/pool-a/labels/rack", who=OWNER_A, json={"value": "r12"})
    assert reply.status == 200


async def test_owner_may_use_an_approved_key(api: Api) -> None:
    await approve(api, "purpose", "sdk")
    reply = await api.call("PUT", "/devices/dev-a1/labels/purpose", who=OWNER_A, json={"value": "ci"})
    assert reply.status == 200


UNAPPROVED = (
    ("PUT", "/pools/pool-a/labels/rack", {"value": "r12"}, "key"),
    ("PUT", "/devices/dev-a1/labels/rack", {"value": "r12"}, "key"),
    ("PATCH", "/pools/pool-a", {"labels": {"sdk": "2.2.0", "rack": "r12"}}, "labels.rack"),
    ("PATCH", "/devices/dev-a1", {"labels": {"rack": "r12"}}, "labels.rack"),
    ("PUT", "/pools/pool-a/labels/form_factor", {"value": "module"}, "key"),  # in use, but not approved
)


async def test_owner_may_not_use_an_unapproved_key_and_the_error_lists_the_approved_ones(
    api: Api, subtests: pytest.Subtests
) -> None:
    await approve(api, "sdk", "purpose")
    before = await api.snapshot()
    for method, path, body, field in UNAPPROVED:
        with subtests.test(msg=f"{method} {path} {body}"):
            reply = await api.call(method, path, who=OWNER_A, json=body)
            assert (reply.status, reply.body["error"]["code"], reply.body["error"]["field"]) == (
                400,
                "unapproved_key",
                field,
            )
            assert reply.body["error"]["message"].endswith("approved keys: purpose, sdk")
            assert await api.snapshot() == before


async def test_admin_may_use_a_key_the_registry_does_not_list(api: Api) -> None:
    await approve(api, "sdk")
    reply = await api.call("PUT", "/pools/pool-a/labels/rack", who=ADMIN, json={"value": "r12"})
    assert reply.status == 200


async def test_owner_may_remove_a_label_whose_key_is_not_approved(api: Api) -> None:
    await approve(api, "sdk")
    reply = await api.call("DELETE", "/pools/pool-a/labels/form_factor", who=OWNER_A)
    assert (reply.status, reply.body["labels"]["explicit"]) == (200, {"sdk": "2.2.0"})


async def test_owner_patch_may_keep_labels_whose_keys_are_not_approved(api: Api) -> None:
    await approve(api, "purpose")
    labels = {"sdk": "2.2.0", "form_factor": "som", "purpose": "ci"}
    reply = await api.call("PATCH", "/pools/pool-a", who=OWNER_A, json={"labels": labels})
    assert (reply.status, reply.body["labels"]["explicit"]) == (200, labels)


async def test_withdrawing_a_key_keeps_the_labels_that_use_it(api: Api) -> None:
    await approve(api, "purpose", "sdk")
    await api.call("PUT", "/pools/pool-a/labels/purpose", who=OWNER_A, json={"value": "ci"})
    assert (await api.call("DELETE", "/label-keys/purpose")).status == 204
    assert (await api.get("/pools/pool-a")).body["labels"]["explicit"]["purpose"] == "ci"


async def test_withdrawn_key_is_no_longer_approved(api: Api) -> None:
    await approve(api, "purpose", "sdk")
    await api.call("DELETE", "/label-keys/purpose")
    reply = await api.call("PUT", "/pools/pool-a/labels/purpose", who=OWNER_A, json={"value": "ci"})
    assert (reply.status, reply.body["error"]["message"]) == (
        400,
        "label key 'purpose' is not an approved key; approved keys: sdk",
    )


async def test_registry_lists_keys_with_descriptions_and_put_changes_a_description(api: Api) -> None:
    await approve(api, "sdk", "form_factor")
    changed = await api.call("PUT", "/label-keys/sdk", json={"description": "the SDK release"})
    assert (changed.status, changed.body) == (200, {"key": "sdk", "description": "the SDK release"})
    assert (await api.get("/label-keys", who=READER)).body == {
        "label_keys": [
            {"key": "form_factor", "description": "the form_factor label"},
            {"key": "sdk", "description": "the SDK release"},
        ]
    }


# -- the audit log ---------------------------------------------------------------------------------


async def test_audit_records_who_when_before_and_after_of_a_label_change(api: Api, clock: FakeClock) -> None:
    clock.advance(3600)
    await api.call("PUT", "/pools/pool-a/labels/sdk", who=OWNER_A, json={"value": "2.3.0"})
    [entry] = (await api.get("/audit?pool=pool-a&limit=1", who=READER)).body["entries"]
    assert entry.pop("at") == clock.now.isoformat()
    assert entry == {
        "actor": OWNER_A,
        "action": "change",
        "subject_type": "pool",
        "subject_id": "pool-a",
        "pool": "pool-a",
        "field": "labels.sdk",
        "before": "2.2.0",
        "after": "2.3.0",
    }


async def test_audit_records_a_state_change_and_its_reason(api: Api, clock: FakeClock) -> None:
    clock.advance(60)
    await api.call("PUT", "/devices/dev-a1/state", json={"state": "maintenance", "reason": "reflashing"})
    entries = (await api.get("/audit?device=dev-a1&limit=2")).body["entries"]
    assert {(e["actor"], e["field"], e["before"], e["after"]) for e in entries} == {
        (ADMIN, "state", "available", "maintenance"),
        (ADMIN, "state_reason", "", "reflashing"),
    }
    assert {e["at"] for e in entries} == {clock.now.isoformat()}


async def test_audit_lists_newest_first_and_filters_by_actor(api: Api, clock: FakeClock) -> None:
    for value in ("a", "b"):
        clock.advance(1)
        await api.call("PUT", "/devices/dev-a1/labels/rack", who=OWNER_A, json={"value": value})
    await api.call("PUT", "/devices/dev-a1/labels/rack", json={"value": "c"})
    entries = (await api.get(f"/audit?actor={OWNER_A}")).body["entries"]
    assert [(e["actor"], e["after"]) for e in entries] == [(OWNER_A, "b"), (OWNER_A, "a")]


# -- explain ---------------------------------------------------------------------------------------


async def test_explain_resolves_a_json_manifest_against_the_stored_inventory(api: Api) -> None:
    reply = await api.call("POST", "/explain", who=READER, json={"manifest": MANIFEST, "path": "smoke.yml"})
    assert reply.status == 200
    [task] = reply.body["tasks"]
    assert (reply.body["workflow"], reply.body["file"], reply.body["exit_code"]) == ("smoke", "smoke.yml", 0)
    assert (task["eligible_devices"], task["selected"]) == (["dev-a2"], ["dev-a2"])
    rejected = {verdict["device"]: verdict["reasons"] for verdict in task["rejected_devices"]}
    assert rejected == {
        "dev-a1": ["sdk expected 2.2.0, got 2.2.1"],
        "dev-b1": ["sdk expected 2.2.0, got 2.1.1"],
    }


async def test_explain_takes_the_manifest_as_the_raw_yaml_body_too(api: Api) -> None:
    as_json = await api.call("POST", "/explain", json={"manifest": MANIFEST})
    as_yaml = await api.call(
        "POST", "/explain", data=MANIFEST.encode(), headers={"Content-Type": "application/yaml"}
    )
    assert as_yaml.status == 200
    assert as_yaml.body == as_json.body


async def test_explain_sees_the_stored_inventory_as_it_is_now(api: Api) -> None:
    await api.call("PUT", "/devices/dev-a2/state", json={"state": "maintenance", "reason": "reflashing"})
    reply = await api.call("POST", "/explain", json={"manifest": MANIFEST})
    [task] = reply.body["tasks"]
    assert (task["eligible_devices"], reply.body["exit_code"]) == ([], 1)


async def test_explain_gives_the_registry_descriptions_of_the_requested_keys(api: Api) -> None:
    await api.call("PUT", "/label-keys/sdk", json={"description": "the SDK release on the device"})
    await api.call("PUT", "/label-keys/purpose", json={"description": "what the device is for"})
    [task] = (await api.call("POST", "/explain", json={"manifest": MANIFEST})).body["tasks"]
    assert task["descriptions"] == {"sdk": "the SDK release on the device"}


async def test_explain_of_an_invalid_manifest_is_200_with_its_errors_and_exit_code_2(api: Api) -> None:
    reply = await api.call("POST", "/explain", json={"manifest": MANIFEST.replace("on:", "when:")})
    assert (reply.status, reply.body["exit_code"], reply.body["tasks"]) == (200, 2, [])
    assert [(error["field"], error["line"]) for error in reply.body["errors"]] == [("on", 1), ("when", 2)]


async def test_simultaneous_label_edits_without_if_match_all_apply(api: Api) -> None:
    replies = await asyncio.gather(
        *(api.call("PUT", f"/pools/pool-a/labels/k{n}", json={"value": "v"}) for n in range(12))
    )
    assert [reply.status for reply in replies] == [200] * 12
    labels = (await api.get("/pools/pool-a")).body["labels"]["explicit"]
    assert {f"k{n}" for n in range(12)} <= set(labels)


async def test_owners_and_admins_are_matched_whatever_the_case_of_their_login(api: Api) -> None:
    assert (await api.call("PATCH", "/pools/pool-a", json={"owners": ["OLGA"]})).status == 200
    reply = await api.call("PUT", "/pools/pool-a/labels/uart", who=OWNER_A, json={"value": "enabled"})
    assert reply.status == 200
