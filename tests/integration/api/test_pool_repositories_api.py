"""A pool's ``repositories`` through ``/api/v1``: admins edit it, owners read it, every change is audited,
and ``POST /api/v1/explain`` applies it for the ``repository`` it is given."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from kerrigan.testing.clock import FakeClock
from tests.integration.api.conftest import ADMIN, OWNER_A, READER, Api
from tests.integration.api.test_errors_and_openapi import openapi, validate

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


async def restrict_pool_a(api: Api, *globs: str) -> dict[str, Any]:
    reply = await api.call("PATCH", "/pools/pool-a", json={"repositories": list(globs)})
    assert reply.status == 200, reply.body
    body: dict[str, Any] = reply.body
    return body


async def test_a_pool_lists_no_repositories_until_an_admin_sets_them(api: Api) -> None:
    assert (await api.get("/pools/pool-a", who=READER)).body["repositories"] == []
    body = await restrict_pool_a(api, "octo-lab/*", "octo-lab/firmware")
    assert body["repositories"] == ["octo-lab/*", "octo-lab/firmware"]
    read = await api.get("/pools/pool-a", who=OWNER_A)  # the owner reads what they may not change
    assert read.body["repositories"] == ["octo-lab/*", "octo-lab/firmware"]
    listed = {pool["id"]: pool for pool in (await api.get("/pools", who=READER)).body["pools"]}
    assert listed["pool-a"]["repositories"] == ["octo-lab/*", "octo-lab/firmware"]
    assert listed["pool-b"]["repositories"] == []


async def test_an_admin_creates_a_pool_with_repositories(api: Api) -> None:
    created = await api.call("POST", "/pools", json={"id": "pool-c", "repositories": ["octo-lab/*"]})
    assert created.status == 201, created.body
    assert created.body["repositories"] == ["octo-lab/*"]


async def test_the_same_glob_in_another_case_is_kept_once(api: Api) -> None:
    body = await restrict_pool_a(api, "Octo-Lab/Firmware", "octo-lab/firmware")
    assert body["repositories"] == ["Octo-Lab/Firmware"]


async def test_a_change_of_repositories_is_audited_with_before_after_and_actor(
    api: Api, clock: FakeClock
) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    clock.advance(60)
    await restrict_pool_a(api, "octo-lab/firmware")
    entries = (await api.get("/audit?pool=pool-a&limit=2", who=READER)).body["entries"]
    assert [(e["actor"], e["field"], e["before"], e["after"]) for e in entries] == [
        (ADMIN, "repositories", ["octo-lab/*"], ["octo-lab/firmware"]),
        (ADMIN, "repositories", [], ["octo-lab/*"]),
    ]


async def test_the_same_list_again_writes_no_audit_row(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    before = await api.snapshot()
    await restrict_pool_a(api, "octo-lab/*")
    assert await api.snapshot() == before


async def test_an_owner_may_not_change_repositories_and_is_told_who_may(api: Api) -> None:
    before = await api.snapshot()
    reply = await api.call("PATCH", "/pools/pool-a", who=OWNER_A, json={"repositories": ["olga/*"]})
    assert reply.status == 403
    message = reply.body["error"]["message"]
    assert "repositories of pool pool-a" in message
    assert "System Admins edit repositories" in message
    assert await api.snapshot() == before


@pytest.mark.parametrize(
    ("repositories", "field", "words"),
    [
        (
            ["octo-lab/*", "octo lab/firmware"],
            "repositories[1]",
            "'octo lab/firmware' is not a repository glob",
        ),
        (["octo-lab/*", 7], "repositories[1]", "must be a string"),
        (["octo-lab"], "repositories[0]", "is not a repository glob: owner/name"),
        ("octo-lab/*", "repositories", "must be a list of owner/name globs"),
        ([f"octo/r{n}" for n in range(101)], "repositories", "at most 100"),
    ],
)
async def test_a_bad_repositories_list_is_a_400_naming_the_entry_and_changes_nothing(
    api: Api, repositories: object, field: str, words: str
) -> None:
    before = await api.snapshot()
    reply = await api.call("PATCH", "/pools/pool-a", json={"repositories": repositories})
    assert reply.status == 400
    assert reply.body["error"]["field"] == field
    assert words in reply.body["error"]["message"]
    created = await api.call("POST", "/pools", json={"id": "pool-c", "repositories": repositories})
    assert (created.status, created.body["error"]["field"]) == (400, field)
    assert await api.snapshot() == before


async def test_if_match_is_honoured_for_repositories(api: Api) -> None:
    etag = (await api.get("/pools/pool-a")).headers["ETag"]
    await restrict_pool_a(api, "octo-lab/*")
    before = await api.snapshot()
    stale = await api.call(
        "PATCH", "/pools/pool-a", json={"repositories": ["x/y"]}, headers={"If-Match": etag}
    )
    assert stale.status == 412
    assert await api.snapshot() == before
    current = (await api.get("/pools/pool-a")).headers["ETag"]
    fresh = await api.call(
        "PATCH", "/pools/pool-a", json={"repositories": ["x/y"]}, headers={"If-Match": current}
    )
    assert (fresh.status, fresh.body["repositories"]) == (200, ["x/y"])


async def test_pool_replies_with_repositories_match_the_openapi_document(api: Api) -> None:
    document = await openapi(api)
    assert "repositories" in document["components"]["schemas"]["Pool"]["required"]
    assert "repositories" in document["components"]["schemas"]["PoolPatch"]["properties"]
    assert "repository" in document["components"]["schemas"]["ExplainRequest"]["properties"]
    patched = await api.call("PATCH", "/pools/pool-a", json={"repositories": ["octo-lab/*"]})
    validate(document, "/pools/{pool_id}", "patch", patched)
    validate(document, "/pools", "get", await api.get("/pools"))
    explained = await api.call("POST", "/explain", json={"manifest": MANIFEST, "repository": "octo/other"})
    validate(document, "/explain", "post", explained)


# -- explain ---------------------------------------------------------------------------------------


async def test_explain_for_a_repository_the_pool_does_not_admit_gives_the_never_reason(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    reply = await api.call(
        "POST", "/explain", who=READER, json={"manifest": MANIFEST, "repository": "octo/other"}
    )
    assert reply.status == 200
    document = reply.body
    assert (document["repository"], document["exit_code"]) == ("octo/other", 1)
    [task] = document["tasks"]
    assert task["outcome"] == "unschedulable"
    assert {"pool": "pool-a", "reasons": ["repository octo/other may not use pool pool-a"]} in task[
        "rejected_pools"
    ]
    refused = {v["device"]: v for v in task["rejected_devices"]}
    assert refused["dev-a2"]["reasons"] == ["repository octo/other may not use pool pool-a"]
    assert refused["dev-a2"]["never"] is True


async def test_explain_for_an_admitted_repository_matches_as_before(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    reply = await api.call("POST", "/explain", json={"manifest": MANIFEST, "repository": "Octo-Lab/Firmware"})
    [task] = reply.body["tasks"]
    assert (reply.body["exit_code"], task["eligible_devices"]) == (0, ["dev-a2"])


async def test_explain_of_a_raw_yaml_body_takes_the_repository_from_the_query(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    reply = await api.call(
        "POST",
        "/explain?repository=octo/other",
        data=MANIFEST.encode(),
        headers={"Content-Type": "application/yaml"},
    )
    assert (reply.status, reply.body["repository"], reply.body["exit_code"]) == (200, "octo/other", 1)


async def test_explain_without_a_repository_says_which_lists_it_did_not_apply(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    reply = await api.call("POST", "/explain", json={"manifest": MANIFEST})
    assert (reply.body["repository"], reply.body["repositories_not_checked"]) == (None, ["pool-a"])
    assert reply.body["exit_code"] == 0


@pytest.mark.parametrize("repository", ["octo/*", "octo", 42, ""])
async def test_explain_with_a_malformed_repository_is_a_400_naming_the_field(
    api: Api, repository: object
) -> None:
    reply = await api.call("POST", "/explain", json={"manifest": MANIFEST, "repository": repository})
    assert reply.status == 400
    assert reply.body["error"]["field"] == "repository"


async def test_explain_checks_a_query_repository_beside_a_json_body_whose_own_wins(api: Api) -> None:
    await restrict_pool_a(api, "octo-lab/*")
    long = "octo/" + "x" * 300
    for body in ({}, {"repository": "octo-lab/firmware"}):  # the query is checked though the body is JSON
        reply = await api.call(
            "POST", f"/explain?{urlencode({'repository': long})}", json={"manifest": MANIFEST, **body}
        )
        assert reply.status == 400, reply.body
        assert reply.body["error"]["field"] == "repository"
        assert "is not a repository" in reply.body["error"]["message"]
    both = await api.call(
        "POST",
        "/explain?repository=octo/other",
        json={"manifest": MANIFEST, "repository": "octo-lab/firmware"},
    )
    assert (both.status, both.body["repository"], both.body["exit_code"]) == (200, "octo-lab/firmware", 0)
