"""``POST /api/v1/explain`` on hostile manifests: its usual answer with the manifest's errors, never a 5xx.

Generated manifests (hypothesis) are posted too: YAML shaped like a manifest with hostile leaves.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from kerrigan.core.manifest import MAX_MANIFEST_BYTES
from kerrigan.web.api import explain as explain_api
from tests.integration.api.conftest import READER, Api
from tests.integration.held_calls import HeldCalls
from tests.unit.core.test_manifest_properties import manifests

HEAD = "name: hostile\non: push\ntasks:\n  - id: smoke\n    run: ./smoke.sh\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param(
            HEAD + "    vcpus: " + "9" * 5000 + "\n",
            6,
            "999…9 (5000 digits) is too large: at most 256",
            id="vcpus-5000-digits",
        ),
        pytest.param(
            "name: hostile\non: push\ntasks:\n  - id: smoke\n    run: {a: 1}\n",
            5,
            "must be a string, not a mapping",
            id="run-a-mapping",
        ),
        pytest.param(
            "name: hostile\non: push\ntasks: {smoke: 1}\n",
            3,
            "must be a list, not a mapping",
            id="tasks-a-mapping",
        ),
        pytest.param(
            "name: hostile\non: push\ntasks: &t [*t]\n",
            3,
            "this alias stands for a part of the manifest that holds it: no end to it",
            id="alias-loop",
        ),
    ],
)
@pytest.mark.parametrize("as_json", [True, False], ids=["json", "raw-yaml"])
async def test_a_hostile_manifest_is_answered_200_with_the_error_on_its_line(
    api: Api, text: str, line: int, message: str, as_json: bool
) -> None:
    if as_json:
        reply = await api.call("POST", "/explain", who=READER, json={"manifest": text, "path": "hostile.yml"})
    else:
        reply = await api.call(
            "POST", "/explain", who=READER, data=text.encode(), headers={"Content-Type": "application/yaml"}
        )
    assert reply.status == 200, reply.body
    assert reply.body["exit_code"] == 2
    assert [(e["line"], e["message"]) for e in reply.body["errors"]] == [(line, message)]


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    # One server for every example: the fixture's server is not reset between them, and need not be.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(text=manifests())
async def test_no_generated_manifest_gets_a_5xx(api: Api, text: str) -> None:
    reply = await api.call("POST", "/explain", who=READER, json={"manifest": text})
    assert reply.status < 500, reply.body
    body: Any = reply.body
    if reply.status == 200:
        assert body["exit_code"] in (0, 1, 2)
        assert (body["exit_code"] == 2) == bool(body["errors"])


async def test_a_json_body_with_a_lone_surrogate_is_a_400(api: Api) -> None:
    # Half a surrogate pair is no character: JSON's escape can spell one, no text can hold it.
    reply = await api.call("POST", "/explain", who=READER, json={"manifest": HEAD + "    type: \ud800\n"})
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_json"), reply.body
    assert "lone surrogate" in reply.body["error"]["message"]
    paired = await api.call(
        "POST", "/explain", who=READER, json={"manifest": HEAD + "    type: \U0001f527\n"}
    )
    assert paired.status == 200, paired.body


@pytest.mark.parametrize("body", [b"", b"  \n\t\n"])
async def test_a_post_without_a_manifest_is_a_400_naming_it(api: Api, body: bytes) -> None:
    reply = await api.call(
        "POST", "/explain", who=READER, data=body, headers={"Content-Type": "application/yaml"}
    )
    assert reply.status == 400, reply.body
    assert reply.body["error"]["field"] == "manifest"
    bare = await api.call("POST", "/explain", who=READER)  # no body, no content type
    assert (bare.status, bare.body["error"]["field"]) == (400, "manifest")


async def test_a_manifest_over_the_size_limit_is_one_error_unread(api: Api) -> None:
    text = HEAD + "#" * (MAX_MANIFEST_BYTES - len(HEAD)) + "\n"  # one byte over
    reply = await api.call("POST", "/explain", who=READER, json={"manifest": text, "path": "big.yml"})
    assert reply.status == 200, reply.body
    assert reply.body["exit_code"] == 2
    assert [(e["path"], e["line"], e["message"]) for e in reply.body["errors"]] == [
        (
            "big.yml",
            1,
            "the file is 256.0 KiB (262,145 bytes); a manifest is at most 256 KiB, so it was not read",
        )
    ]


async def test_explain_parses_and_resolves_off_the_event_loop_which_answers_meanwhile(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsing = HeldCalls(explain_api.parse_manifest)
    resolving = HeldCalls(explain_api.explain)
    monkeypatch.setattr(explain_api, "parse_manifest", parsing)
    monkeypatch.setattr(explain_api, "explain", resolving)
    posted = asyncio.ensure_future(api.call("POST", "/explain", who=READER, json={"manifest": HEAD}))
    for held in (parsing, resolving):
        await held.entered()
        async with api.client.get("/readyz") as ready:  # answered while the call is held
            assert ready.status == 200
        held.release()
    reply = await posted
    assert reply.status == 200, reply.body
    assert parsing.threads
    assert resolving.threads
    assert not parsing.on_the_loop
    assert not resolving.on_the_loop
