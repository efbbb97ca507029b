"""Bad input is a 400 naming the field, never a 500; and ``/api/v1/openapi.json`` says what the server does.

Refused requests leave the lab as it was, so each table of them shares one lab through ``subtests``.
"""

from __future__ import annotations

import io
from datetime import datetime
from typing import Any, Final

import pytest
from aiohttp import web
from jsonschema import Draft202012Validator, FormatChecker
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from tests.integration.api.conftest import ADMIN, ANONYMOUS, OWNER_A, READER, Api, Reply

HTTP_METHODS: Final = frozenset({"get", "put", "post", "patch", "delete"})
DOCUMENT_URI: Final = "urn:kerrigan:api:v1:openapi.json"
LONG: Final = 64  # one more than a key, value, tag or id may hold

_DEVICE = {"id": "dev-a3", "pool": "pool-a", "board": "modalix", "host": "lab-a-03"}
_STATE = "/devices/dev-a1/state"
_LABEL = "/pools/pool-a/labels/sdk"


def _pool(**fields: Any) -> dict[str, Any]:
    return {"id": "pool-c", **fields}


def _device(**fields: Any) -> dict[str, Any]:
    return {**_DEVICE, **fields}


# Each case: method, path, body (a JSON value, or raw ``bytes`` sent as application/json, or ``None`` for no
# body), and the ``field`` the 400 must name (``None`` when the body as a whole is wrong).
MALFORMED: Final[dict[str, list[tuple[str, str, Any, str | None]]]] = {
    "not a JSON object": [
        ("POST", "/pools", b"not json", None),
        ("POST", "/pools", b"", None),
        ("POST", "/pools", b"{", None),
        ("POST", "/pools", b"[1, 2]", None),
        ("POST", "/pools", b'"pool-c"', None),
        ("POST", "/pools", b"null", None),
        ("PATCH", "/pools/pool-a", b"[]", None),
        ("PUT", _LABEL, b"{'value': 'x'}", None),
        ("PUT", _STATE, b"[]", None),
        ("PUT", "/label-keys/sdk", b"42", None),
        ("POST", "/explain", b"[]", None),
    ],
    "unknown fields": [
        ("POST", "/pools", _pool(colour="red"), "colour"),
        ("PATCH", "/pools/pool-a", {"id": "pool-z"}, "id"),
        ("PATCH", "/devices/dev-a1", {"state": "offline"}, "state"),
        ("POST", "/devices", _device(labelz={}), "labelz"),
        ("PUT", _LABEL, {"value": "1", "note": "x"}, "note"),
        ("PUT", _STATE, {"state": "offline", "why": "x"}, "why"),
        ("PUT", "/label-keys/sdk", {"description": "x", "owner": "y"}, "owner"),
        ("POST", "/explain", {"manifest": "name: x", "format": "text"}, "format"),
    ],
    "wrong types": [
        ("POST", "/pools", {"id": 7}, "id"),
        ("POST", "/pools", {"name": "no id"}, "id"),
        ("POST", "/pools", _pool(name=7), "name"),
        ("POST", "/pools", _pool(owners=OWNER_A), "owners"),
        ("POST", "/pools", _pool(owners=[7]), "owners"),
        ("POST", "/pools", _pool(firmware="ga"), "firmware"),
        ("POST", "/pools", _pool(firmware={"track": "ga"}), "firmware"),
        ("POST", "/pools", _pool(firmware={"channel": 1}), "firmware.channel"),
        ("POST", "/pools", _pool(labels=["sdk=2.2.0"]), "labels"),
        ("POST", "/pools", _pool(labels={"sdk": 2.2}), "labels.sdk"),
        ("POST", "/pools", _pool(tags="nightly"), "tags"),
        ("POST", "/pools", _pool(tags=["nightly", 3]), "tags[1]"),
        ("PATCH", "/pools/pool-a", {"labels": None}, "labels"),
        ("PUT", _LABEL, {"value": 5}, "value"),
        ("PUT", _LABEL, {"value": None}, "value"),
        ("PUT", _LABEL, {}, "value"),
        ("PUT", _STATE, {"state": 1}, "state"),
        ("PUT", _STATE, {}, "state"),
        ("PUT", _STATE, {"state": "offline", "reason": 5}, "reason"),
        ("POST", "/devices", {"id": "dev-a3", "pool": "pool-a", "host": "lab-a-03"}, "board"),
        ("POST", "/devices", {"id": "dev-a3", "board": "modalix", "host": "lab-a-03"}, "pool"),
        ("POST", "/devices", _device(board=5), "board"),
        ("POST", "/devices", _device(state_reason=["x"]), "state_reason"),
        ("PUT", "/label-keys/sdk", {}, "description"),
        ("PUT", "/label-keys/sdk", {"description": 5}, "description"),
        ("POST", "/explain", {}, "manifest"),
        ("POST", "/explain", {"manifest": 5}, "manifest"),
        ("POST", "/explain", {"manifest": "name: x", "path": 5}, "path"),
    ],
    "too long": [
        ("POST", "/pools", {"id": "p" * LONG}, "id"),
        ("POST", "/pools", _pool(name="n" * 201), "name"),
        ("POST", "/pools", _pool(owners=["o" * 40]), "owners[0]"),
        ("POST", "/pools", _pool(labels={"sdk": "v" * LONG}), "labels.sdk"),
        ("POST", "/pools", _pool(labels={"k" * LONG: "v"}), f"labels.{'k' * LONG}"),
        ("POST", "/pools", _pool(tags=["t" * LONG]), "tags[0]"),
        ("POST", "/pools", _pool(firmware={"channel": "c" * LONG}), "firmware.channel"),
        ("PUT", _LABEL, {"value": "v" * LONG}, "value"),
        ("PUT", f"/pools/pool-a/labels/{'k' * LONG}", {"value": "v"}, "key"),
        ("PUT", f"/devices/dev-a1/tags/{'t' * LONG}", None, "tag"),
        ("PUT", _STATE, {"state": "offline", "reason": "r" * 501}, "reason"),
        ("PUT", "/label-keys/sdk", {"description": "d" * 501}, "description"),
        ("PUT", f"/label-keys/{'k' * LONG}", {"description": "d"}, "key"),
    ],
    "reserved keys": [
        ("POST", "/pools", _pool(labels={"kerrigan.pool_id": "x"}), "labels.kerrigan.pool_id"),
        ("POST", "/devices", _device(labels={"Kerrigan.Board": "x"}), "labels.Kerrigan.Board"),
        ("PATCH", "/devices/dev-a1", {"labels": {"kerrigan.host": "x"}}, "labels.kerrigan.host"),
        ("PUT", "/devices/dev-a1/labels/kerrigan.board", {"value": "x"}, "key"),
        ("DELETE", "/pools/pool-a/labels/kerrigan.pool_id", None, "key"),
        ("PUT", "/label-keys/kerrigan.board", {"description": "d"}, "key"),
    ],
    "invalid labels": [
        ("POST", "/pools", _pool(labels={"bad key": "x"}), "labels.bad key"),
        ("POST", "/pools", _pool(labels={"sdk": ""}), "labels.sdk"),
        ("POST", "/pools", _pool(labels={"SDK": "1", "sdk": "2"}), "labels.sdk"),
        ("POST", "/pools", _pool(labels={"sdk": "2.2\t0"}), "labels.sdk"),
        ("PATCH", "/devices/dev-a1", {"labels": {"uart": "on\noff"}}, "labels.uart"),
        ("PUT", _LABEL, {"value": "line\nbreak"}, "value"),
        ("PUT", "/pools/pool-a/labels/bad%20key", {"value": "x"}, "key"),
        ("PUT", "/pools/pool-a/labels/s%C3%BCd", {"value": "x"}, "key"),
        ("PUT", "/devices/dev-a1/labels/a:b", {"value": "x"}, "key"),
    ],
    "invalid tags": [
        ("PUT", "/pools/pool-a/tags/Bad%20Tag", None, "tag"),
        ("PUT", "/devices/dev-a1/tags/uart+debug", None, "tag"),
        ("DELETE", "/devices/dev-a1/tags/%C3%A9", None, "tag"),
        ("POST", "/pools", _pool(tags=["bad tag"]), "tags[0]"),
        ("POST", "/pools", _pool(tags=[""]), "tags[0]"),
        ("PATCH", "/devices/dev-a1", {"tags": ["jtag", "no!"]}, "tags[1]"),
    ],
    "bad states": [
        ("PUT", _STATE, {"state": "broken"}, "state"),
        ("PUT", _STATE, {"state": "Available"}, "state"),
        ("PUT", _STATE, {"state": ""}, "state"),
        ("POST", "/devices", _device(state="gone"), "state"),
    ],
    "bad ids": [
        ("POST", "/pools", {"id": "Pool A"}, "id"),
        ("POST", "/pools", {"id": ""}, "id"),
        ("POST", "/pools", {"id": "pool/c"}, "id"),
        ("POST", "/pools", _pool(owners=["not a login!"]), "owners[0]"),
        ("POST", "/pools", _pool(owners=[""]), "owners[0]"),
        ("POST", "/devices", _device(id="Dev A3"), "id"),
        ("POST", "/devices", _device(host="lab a 03"), "host"),
        ("POST", "/devices", _device(pool="Pool A"), "pool"),
        ("PATCH", "/devices/dev-a1", {"host": ""}, "host"),
    ],
    "bad queries": [
        ("GET", "/pools?label=sdk", None, "label"),
        ("GET", "/pools?label==2.2.0", None, "label"),
        ("GET", "/devices?label=sdk=", None, "label"),
        ("GET", "/devices?tag=Bad%20Tag", None, "tag"),
        ("GET", "/devices?state=broken", None, "state"),
        ("GET", "/audit?limit=0", None, "limit"),
        ("GET", "/audit?limit=1001", None, "limit"),
        ("GET", "/audit?limit=ten", None, "limit"),
        ("GET", "/audit?limit=-1", None, "limit"),
    ],
}


async def send(api: Api, method: str, path: str, body: Any, *, who: str | None = ADMIN) -> Reply:
    """``body`` as JSON (``None``: no body), or raw bytes labelled as JSON."""
    if isinstance(body, bytes):
        return await api.call(method, path, who=who, data=body, headers={"Content-Type": "application/json"})
    return await api.call(method, path, who=who, json=body)


def assert_error_shape(reply: Reply) -> None:
    assert reply.headers["Content-Type"].startswith("application/json")
    assert list(reply.body) == ["error"]
    assert set(reply.body["error"]) == {"code", "message", "field"}
    assert reply.body["error"]["message"]


@pytest.mark.parametrize("kind", MALFORMED)
async def test_malformed_input_is_a_400_naming_the_field_and_changes_nothing(
    api: Api, subtests: pytest.Subtests, kind: str
) -> None:
    before = await api.snapshot()
    for method, path, body, field in MALFORMED[kind]:
        with subtests.test(msg=f"{method} {path} {body!r:.80}"):
            reply = await send(api, method, path, body)
            assert (reply.status, reply.body["error"]["field"]) == (400, field), reply.body
            assert_error_shape(reply)
            assert await api.snapshot() == before


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [("POST", "/devices", _device(pool="nope")), ("PATCH", "/devices/dev-a1", {"pool": "nope"})],
)
async def test_a_body_naming_a_pool_there_is_not_is_a_422_and_changes_nothing(
    api: Api, method: str, path: str, body: Any
) -> None:
    # Well formed, so not a 400: the lab holds no such pool (the document lists the 422).
    before = await api.snapshot()
    reply = await send(api, method, path, body)
    assert (reply.status, reply.body["error"]["code"], reply.body["error"]["field"]) == (
        422,
        "unknown_pool",
        "pool",
    ), reply.body
    assert reply.body["error"]["message"] == "there is no pool 'nope'"
    assert await api.snapshot() == before


async def test_error_message_names_the_rule_that_was_broken(api: Api) -> None:
    reply = await api.call("PUT", "/pools/pool-a/labels/bad%20key", json={"value": "x"})
    assert reply.body["error"] == {
        "code": "invalid_label",
        "message": "label key 'bad key' contains ' '; "
        "only lowercase letters, digits, '.', '_' and '-' are allowed",
        "field": "key",
    }


async def test_owner_sending_bad_input_to_a_write_they_may_make_gets_the_400(api: Api) -> None:
    reply = await api.call("PUT", "/devices/dev-a1/labels/uart", who=OWNER_A, json={"value": 1})
    assert (reply.status, reply.body["error"]["field"]) == (400, "value")


async def test_body_over_a_mebibyte_is_413(api: Api) -> None:
    body = io.BytesIO(b"{" + b" " * (1024 * 1024) + b"}")
    reply = await api.call("POST", "/pools", data=body, headers={"Content-Type": "application/json"})
    assert (reply.status, reply.body["error"]["code"]) == (413, "too_large")


# -- the OpenAPI document --------------------------------------------------------------------------


async def openapi(api: Api) -> dict[str, Any]:
    """The document, fetched without a token: it is open to everyone."""
    reply = await api.call("GET", "/openapi.json", who=ANONYMOUS)
    assert reply.status == 200
    document: dict[str, Any] = reply.body
    return document


async def test_openapi_document_is_openapi_3_1_0(api: Api) -> None:
    document = await openapi(api)
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": "/api/v1"}]


async def test_openapi_component_schemas_are_valid_json_schema_2020_12(api: Api) -> None:
    for schema in (await openapi(api))["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


def routed_operations(app: web.Application) -> set[tuple[str, str]]:
    """Every (path, method) the application routes under ``/api/v1``, HEAD aside (aiohttp adds it)."""
    [api_app] = [
        resource.get_info()["app"]
        for resource in app.router.resources()
        if resource.get_info().get("prefix") == "/api/v1"
    ]
    return {
        (route.resource.canonical.removeprefix("/api/v1"), route.method.lower())
        for route in api_app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }


async def test_openapi_documents_exactly_the_routes_the_app_serves_under_api_v1(api: Api) -> None:
    documented = {
        (path, method)
        for path, item in (await openapi(api))["paths"].items()
        for method in item
        if method in HTTP_METHODS
    }
    assert documented == routed_operations(api.client.app)


FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value: object) -> bool:
    """RFC 3339: a date, a time and an offset."""
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


def validate(document: dict[str, Any], template: str, method: str, reply: Reply) -> None:
    """``reply`` is one of the responses the document lists for the operation, with the body it describes."""
    responses = document["paths"][template][method]["responses"]
    assert str(reply.status) in responses, f"{method.upper()} {template} does not document {reply.status}"
    documented = responses[str(reply.status)]
    for header in documented.get("headers", {}):
        assert header in reply.headers
    if "content" not in documented:
        assert reply.body == ""
        return
    assert reply.headers["Content-Type"].startswith("application/json")
    ref = documented["content"]["application/json"]["schema"]["$ref"]
    registry = Registry().with_resource(DOCUMENT_URI, DRAFT202012.create_resource(document))
    validator = Draft202012Validator({"$ref": DOCUMENT_URI + ref}, registry=registry, format_checker=FORMATS)
    errors = [
        f"{'/'.join(map(str, error.absolute_path))}: {error.message}"
        for error in validator.iter_errors(reply.body)
    ]
    assert errors == []


TYPO_MANIFEST = """\
name: typo
on: [push]
scheduling:
  labels: {sdk: "2.2.0", form_facter: som}
  tags: [uart-debug]
tasks:
  - id: smoke
    run: ./smoke.sh
"""
GOOD_MANIFEST = TYPO_MANIFEST.replace("form_facter", "form_factor").replace("name: typo", "name: good")

# Each sample: the request (method, path, who, body, extra headers), and the documented operation it is.
SAMPLES: Final[list[tuple[str, str, str | None, Any, dict[str, str], str]]] = [
    ("GET", "/pools", READER, None, {}, "/pools"),
    ("GET", "/pools?label=sdk=2.2.0&tag=som-devkits", READER, None, {}, "/pools"),
    ("GET", "/pools/pool-a", READER, None, {}, "/pools/{pool_id}"),
    ("GET", "/devices", READER, None, {}, "/devices"),
    ("GET", "/devices?pool=pool-b&state=available", READER, None, {}, "/devices"),
    ("GET", "/devices/dev-a1", READER, None, {}, "/devices/{device_id}"),
    ("GET", "/label-keys", READER, None, {}, "/label-keys"),
    ("PUT", "/label-keys/sdk", ADMIN, {"description": "the SDK"}, {}, "/label-keys/{key}"),
    ("PUT", "/label-keys/sdk", ADMIN, {"description": "the SDK release"}, {}, "/label-keys/{key}"),
    ("PUT", "/label-keys/purpose", ADMIN, {"description": "what for"}, {}, "/label-keys/{key}"),
    ("GET", "/label-keys", READER, None, {}, "/label-keys"),
    ("POST", "/pools", ADMIN, {"id": "pool-c", "name": "C", "firmware": {"channel": "ga"}}, {}, "/pools"),
    ("POST", "/devices", ADMIN, _DEVICE, {}, "/devices"),
    (
        "PATCH",
        "/pools/pool-a",
        OWNER_A,
        {"labels": {"sdk": "2.2.0", "purpose": "ci"}},
        {},
        "/pools/{pool_id}",
    ),
    ("PUT", "/pools/pool-a/labels/sdk", OWNER_A, {"value": "2.2.0"}, {}, "/pools/{pool_id}/labels/{key}"),
    ("DELETE", "/pools/pool-a/labels/purpose", OWNER_A, None, {}, "/pools/{pool_id}/labels/{key}"),
    ("PUT", "/pools/pool-a/tags/nightly", OWNER_A, None, {}, "/pools/{pool_id}/tags/{tag}"),
    ("DELETE", "/pools/pool-a/tags/nightly", OWNER_A, None, {}, "/pools/{pool_id}/tags/{tag}"),
    ("PATCH", "/devices/dev-a1", ADMIN, {"board": "modalix-2", "tags": ["jtag"]}, {}, "/devices/{device_id}"),
    ("PUT", "/devices/dev-a1/labels/uart", OWNER_A, {"value": ""}, {}, "/devices/{device_id}/labels/{key}"),
    ("DELETE", "/devices/dev-a1/labels/sdk", OWNER_A, None, {}, "/devices/{device_id}/labels/{key}"),
    ("PUT", "/devices/dev-a1/tags/uart-debug", OWNER_A, None, {}, "/devices/{device_id}/tags/{tag}"),
    ("DELETE", "/devices/dev-a1/tags/jtag", OWNER_A, None, {}, "/devices/{device_id}/tags/{tag}"),
    (
        "PUT",
        _STATE,
        ADMIN,
        {"state": "maintenance", "reason": "reflashing"},
        {},
        "/devices/{device_id}/state",
    ),
    ("DELETE", "/devices/dev-a3", ADMIN, None, {}, "/devices/{device_id}"),
    ("DELETE", "/pools/pool-c", ADMIN, None, {}, "/pools/{pool_id}"),
    ("DELETE", "/label-keys/purpose", ADMIN, None, {}, "/label-keys/{key}"),
    ("GET", "/audit", READER, None, {}, "/audit"),
    ("GET", "/hosts", READER, None, {}, "/hosts"),
    ("GET", "/hosts/lab-a-01", READER, None, {}, "/hosts/{host_id}"),
    ("GET", "/hosts/nope", READER, None, {}, "/hosts/{host_id}"),
    ("GET", "/audit?device=dev-a1&actor=olga&limit=3", READER, None, {}, "/audit"),
    ("POST", "/explain", READER, {"manifest": GOOD_MANIFEST}, {}, "/explain"),
    ("POST", "/explain", READER, {"manifest": TYPO_MANIFEST, "path": "typo.yml"}, {}, "/explain"),
    ("POST", "/explain", READER, {"manifest": "name: [unclosed"}, {}, "/explain"),
    # errors
    ("POST", "/pools", ADMIN, {"id": "Pool A"}, {}, "/pools"),
    (
        "PUT",
        "/pools/pool-a/labels/kerrigan.pool_id",
        ADMIN,
        {"value": "x"},
        {},
        "/pools/{pool_id}/labels/{key}",
    ),
    ("PUT", "/pools/pool-a/labels/rack", OWNER_A, {"value": "r1"}, {}, "/pools/{pool_id}/labels/{key}"),
    ("GET", "/pools", ANONYMOUS, None, {}, "/pools"),
    ("POST", "/explain", ANONYMOUS, {"manifest": GOOD_MANIFEST}, {}, "/explain"),
    ("DELETE", "/devices/dev-a1", READER, None, {}, "/devices/{device_id}"),
    ("PATCH", "/pools/pool-a", OWNER_A, {"name": "mine"}, {}, "/pools/{pool_id}"),
    ("GET", "/pools/nope", READER, None, {}, "/pools/{pool_id}"),
    ("GET", "/devices/nope", READER, None, {}, "/devices/{device_id}"),
    ("DELETE", "/label-keys/nope", ADMIN, None, {}, "/label-keys/{key}"),
    ("POST", "/pools", ADMIN, {"id": "pool-a"}, {}, "/pools"),
    ("DELETE", "/pools/pool-a", ADMIN, None, {}, "/pools/{pool_id}"),
    (
        "PUT",
        "/pools/pool-a/tags/x",
        ADMIN,
        None,
        {"If-Match": '"pool-pool-a-v1"'},
        "/pools/{pool_id}/tags/{tag}",
    ),
    (
        "PUT",
        _STATE,
        ADMIN,
        {"state": "offline"},
        {"If-Match": '"device-dev-a1-v1-p1"'},
        "/devices/{device_id}/state",
    ),
]


async def test_real_responses_match_the_schemas_the_openapi_document_gives(
    api: Api, subtests: pytest.Subtests
) -> None:
    """A session of requests, each answer checked against the response its operation documents."""
    document = await openapi(api)
    statuses = []
    for method, path, who, body, headers, template in SAMPLES:
        reply = await api.call(method, path, who=who, json=body, headers=headers)
        statuses.append(reply.status)
        with subtests.test(msg=f"{method} {path} as {who or 'anonymous'}: {reply.status}"):
            validate(document, template, method.lower(), reply)
    # the sample covers every kind of answer
    assert {200, 201, 204, 400, 401, 403, 404, 409, 412} <= set(statuses)


# -- input that used to reach a 500 ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/nope", None, 404, "not_found"),
        ("PUT", "/pools", None, 405, "method_not_allowed"),
        ("POST", "/pools", b'{"id": "\xff"}', 400, "invalid_encoding"),
        ("POST", "/pools", b"[" * 100_000, 400, "invalid_json"),
        ("POST", "/pools", b'{"id": ' + b"1" * 5000 + b"}", 400, "invalid_json"),
        ("GET", "/audit?limit=%C2%B2", None, 400, "invalid"),
        ("GET", "/pools/a%00b", None, 400, "invalid"),
        ("GET", "/devices?pool=a%00b", None, 400, "invalid"),
        ("PUT", "/pools/pool-a/labels/approved", {"value": "x" * 64}, 400, "invalid_label"),
    ],
)
async def test_input_that_once_crashed_the_server_is_a_json_error(
    api: Api, method: str, path: str, body: Any, status: int, code: str
) -> None:
    before = await api.snapshot()
    reply = await send(api, method, path, body)
    assert (reply.status, reply.body["error"]["code"]) == (status, code), reply.body
    assert_error_shape(reply)
    assert await api.snapshot() == before


async def test_method_not_allowed_names_the_allowed_methods(api: Api) -> None:
    reply = await send(api, "PUT", "/pools", None)
    assert "POST" in reply.headers["Allow"]


async def test_raw_yaml_explain_body_that_is_not_utf8_is_a_400(api: Api) -> None:
    reply = await api.call(
        "POST", "/explain", data=b"name: \xff", headers={"Content-Type": "application/yaml"}
    )
    assert (reply.status, reply.body["error"]["code"]) == (400, "invalid_encoding")


async def test_a_weak_etag_never_satisfies_if_match(api: Api) -> None:
    read = await api.get("/pools/pool-a")
    reply = await api.call(
        "PUT", _LABEL, json={"value": "2.3.0"}, headers={"If-Match": "W/" + read.headers["ETag"]}
    )
    assert reply.status == 412
