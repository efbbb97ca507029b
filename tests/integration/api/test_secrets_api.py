"""``/api/v1/repositories/{owner}/{repo}/secrets`` through the whole application over loopback: who may,
what each answer looks like (checked against the served OpenAPI document), and that no answer or log line
ever holds a value."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Final

import pytest
from cryptography.fernet import Fernet

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.store.database import Database
from kerrigan.store.installations import add_repositories, upsert_installation
from kerrigan.store.secrets import Keyring, secrets_for
from kerrigan.store.tokens import create_token
from kerrigan.testing.clock import FakeClock
from kerrigan.web.state import DATABASE
from kerrigan.web.writers import REPOSITORY_WRITERS, RepositoryWriters
from tests.integration.api.conftest import ADMIN, ANONYMOUS, Api, Reply
from tests.integration.api.test_errors_and_openapi import assert_error_shape, openapi, validate

WRITER: Final = "walt"  # GitHub says: write
STRANGER: Final = "rita"  # GitHub says: read
BROKEN: Final = "gus"  # asking GitHub about gus fails
REPO: Final = "Octo/Firmware"
INSTALLATION: Final = 77
SECRETS: Final = "/repositories/octo/firmware/secrets"
VALUE: Final = "vpn-key-5f2b9c1e7d-not-in-any-answer"
KEY: Final = Fernet.generate_key().decode()


class FakeGitHubPermissions:
    """GitHub's answer to "may this login write to the repository?", and the questions asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, str, str]] = []

    async def __call__(self, installation_id: int, repository: str, login: str) -> tuple[bool, str]:
        self.asked.append((installation_id, repository, login))
        if login == BROKEN:
            raise OSError("connection reset")
        return (True, "write") if login == WRITER else (False, "read")


async def _seed(db: Database) -> dict[str, str]:
    async with db.sessions() as session, session.begin():
        installation = await upsert_installation(session, INSTALLATION, "octo", db.clock())
        await add_repositories(session, installation, [(4242, REPO)])
        return {
            login: await create_token(session, login, db.clock())
            for login in (ADMIN, WRITER, STRANGER, BROKEN)
        }


@pytest.fixture
def permissions() -> FakeGitHubPermissions:
    return FakeGitHubPermissions()


async def _api(aiohttp_client: Any, settings: Settings, clock: FakeClock, ask: Any) -> Api:
    app = create_app(settings, clock=clock)
    app[REPOSITORY_WRITERS] = RepositoryWriters(ask)
    client = await aiohttp_client(app)
    database = client.app[DATABASE]
    return Api(client, await _seed(database), database)


@pytest.fixture
async def api(
    aiohttp_client: Any, database_url: str, db: Database, clock: FakeClock, permissions: FakeGitHubPermissions
) -> Api:
    """The server with one installed repository, octo/firmware, alice its System Admin, walt a writer."""
    settings = Settings(database_url=database_url, admins=frozenset({ADMIN}), secrets_keys=(KEY,))
    return await _api(aiohttp_client, settings, clock, permissions)


@pytest.fixture
def every_log_line(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.DEBUG)
    yield caplog
    assert VALUE not in caplog.text


async def _put(api: Api, name: str = "LAB_VPN_KEY", value: Any = VALUE, who: str | None = ADMIN) -> Reply:
    return await api.call("PUT", f"{SECRETS}/{name}", who=who, json={"value": value})


async def _stored(api: Api, *names: str) -> dict[str, str]:
    async with api.db.sessions() as session:
        return await secrets_for(session, REPO, names, keys=Keyring((KEY,)))


async def test_an_admin_sets_replaces_lists_and_deletes_a_secret_as_the_document_says(
    api: Api, every_log_line: pytest.LogCaptureFixture, clock: FakeClock
) -> None:
    document = await openapi(api)
    item, collection = (
        f"{SECRETS.replace('octo/firmware', '{owner}/{repo}')}/{{name}}",
        "/repositories/{owner}/{repo}/secrets",
    )
    replies: list[tuple[str, str, Reply]] = []

    async def call(method: str, path: str, template: str, **options: Any) -> Reply:
        reply = await api.call(method, path, **options)
        replies.append((template, method.lower(), reply))
        return reply

    created = await call("PUT", f"{SECRETS}/lab_vpn_key", item, json={"value": VALUE})
    assert (created.status, created.body) == (
        201,
        {"name": "LAB_VPN_KEY", "set_by": ADMIN, "set_at": clock.now.isoformat()},
    )
    replaced = await call("PUT", f"{SECRETS}/LAB_VPN_KEY", item, json={"value": VALUE + "-2"})
    assert (replaced.status, replaced.body) == (204, "")
    listed = await call("GET", SECRETS, collection)
    assert listed.body == {
        "items": [{"name": "LAB_VPN_KEY", "set_by": ADMIN, "set_at": clock.now.isoformat()}],
        "next_cursor": None,
    }
    assert await _stored(api, "LAB_VPN_KEY") == {"LAB_VPN_KEY": VALUE + "-2"}
    deleted = await call("DELETE", f"{SECRETS}/lab_vpn_key", item)
    assert deleted.status == 204
    again = await call("DELETE", f"{SECRETS}/lab_vpn_key", item)
    assert (again.status, again.body["error"]["code"]) == (404, "not_found")
    audit = await api.get("/audit")
    validate(document, "/audit", "get", audit)
    entries = [e for e in audit.body["entries"] if e["subject_type"] != "api_token"]  # the fixture's tokens
    assert [(e["action"], e["subject_type"], e["subject_id"], e["field"]) for e in entries] == [
        ("remove", "secret", REPO, "LAB_VPN_KEY"),
        ("change", "secret", REPO, "LAB_VPN_KEY"),
        ("add", "secret", REPO, "LAB_VPN_KEY"),
    ]
    for template, method, reply in replies:
        validate(document, template, method, reply)
    assert VALUE not in repr([reply for *_, reply in replies]) + repr(audit)


async def test_a_writer_on_github_manages_secrets_through_a_token(
    api: Api, permissions: FakeGitHubPermissions
) -> None:
    assert (await _put(api, who=WRITER)).status == 201
    assert (await api.call("GET", SECRETS, who=WRITER)).status == 200
    assert (await api.call("DELETE", f"{SECRETS}/LAB_VPN_KEY", who=WRITER)).status == 204
    # GitHub is asked as the repository's installation, with the name as GitHub spells it.
    assert set(permissions.asked) == {(INSTALLATION, REPO, WRITER)}


async def test_an_admin_is_never_asked_about_on_github(api: Api, permissions: FakeGitHubPermissions) -> None:
    assert (await _put(api)).status == 201
    assert permissions.asked == []


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", SECRETS, None),
        ("PUT", f"{SECRETS}/TOKEN", {"value": VALUE}),
        ("DELETE", f"{SECRETS}/TOKEN", None),
    ],
)
async def test_a_login_without_write_on_github_is_forbidden_and_told_its_role(
    api: Api, method: str, path: str, body: Any
) -> None:
    reply = await api.call(method, path, who=STRANGER, json=body)
    assert (reply.status, reply.body["error"]["code"]) == (403, "forbidden")
    assert reply.body["error"]["message"] == (
        "rita may not manage the secrets of Octo/Firmware: System Admins and its writers may (you have read)"
    )
    assert await _stored(api, "TOKEN") == {}
    validate(
        await openapi(api),
        "/repositories/{owner}/{repo}/secrets" + ("/{name}" if "TOKEN" in path else ""),
        method.lower(),
        reply,
    )


async def test_without_a_way_to_ask_github_only_system_admins_may(api: Api) -> None:
    api.client.app[REPOSITORY_WRITERS].ask = None
    reply = await _put(api, who=WRITER)
    assert reply.status == 403
    assert "only System Admins may" in reply.body["error"]["message"]
    assert (await _put(api)).status == 201


async def test_github_failing_to_answer_is_a_503_and_changes_nothing(
    api: Api, every_log_line: pytest.LogCaptureFixture
) -> None:
    reply = await _put(api, who=BROKEN)
    assert (reply.status, reply.body["error"]["code"]) == (503, "github_unavailable")
    assert await _stored(api, "LAB_VPN_KEY") == {}
    assert "cannot ask GitHub who writes to Octo/Firmware: OSError" in every_log_line.text
    validate(await openapi(api), "/repositories/{owner}/{repo}/secrets/{name}", "put", reply)


async def test_without_a_token_it_is_401(api: Api) -> None:
    assert (await api.call("GET", SECRETS, who=ANONYMOUS)).status == 401


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("PUT", f"{SECRETS}/1ST", {"value": VALUE}, 400, "name"),
        ("PUT", f"{SECRETS}/GITHUB_TOKEN", {"value": VALUE}, 400, "name"),
        ("PUT", f"{SECRETS}/KERRIGAN_JOB_ID", {"value": VALUE}, 400, "name"),
        ("PUT", f"{SECRETS}/{'N' * 101}", {"value": VALUE}, 400, "name"),
        ("DELETE", f"{SECRETS}/BAD-NAME", None, 400, "name"),
        ("PUT", f"{SECRETS}/TOKEN", {"value": "q7z!k"}, 400, "value"),
        ("PUT", f"{SECRETS}/TOKEN", {"value": "v" * (48 * 1024 + 1)}, 400, "value"),
        ("PUT", f"{SECRETS}/TOKEN", {"value": 12345678}, 400, "value"),
        ("PUT", f"{SECRETS}/TOKEN", {}, 400, "value"),
        ("PUT", f"{SECRETS}/TOKEN", {"value": VALUE, "visibility": "all"}, 400, "visibility"),
        ("PUT", "/repositories/oc~to/firmware/secrets/TOKEN", {"value": VALUE}, 400, "repository"),
        ("GET", "/repositories/octo/fir%20mware/secrets", None, 400, "repository"),
        ("GET", f"{SECRETS}?limit=0", None, 400, "limit"),
        ("GET", f"{SECRETS}?limit=501", None, 400, "limit"),
        ("GET", f"{SECRETS}?cursor=%%%", None, 400, "cursor"),
        ("GET", f"{SECRETS}?state=set", None, 400, "state"),
        ("PUT", "/repositories/octo/other/secrets/TOKEN", {"value": VALUE}, 404, None),
        ("GET", "/repositories/octo/other/secrets", None, 404, None),
    ],
)
async def test_bad_input_is_a_json_error_naming_the_field_and_never_echoes_the_value(
    api: Api,
    every_log_line: pytest.LogCaptureFixture,
    method: str,
    path: str,
    body: Any,
    status: int,
    field: str | None,
) -> None:
    reply = await api.call(method, path, json=body)
    assert (reply.status, reply.body["error"]["field"]) == (status, field), reply.body
    assert_error_shape(reply)
    assert VALUE not in repr(reply.body)
    assert "q7z!k" not in repr(reply.body)
    assert await _stored(api, "TOKEN") == {}


async def test_a_long_list_pages_by_name(api: Api) -> None:
    for name in ("GAMMA", "ALPHA", "BETA"):
        assert (await _put(api, name)).status == 201
    first = await api.get(f"{SECRETS}?limit=2")
    assert [item["name"] for item in first.body["items"]] == ["ALPHA", "BETA"]
    second = await api.get(f"{SECRETS}?limit=2&cursor={first.body['next_cursor']}")
    assert ([item["name"] for item in second.body["items"]], second.body["next_cursor"]) == (["GAMMA"], None)
    validate(await openapi(api), "/repositories/{owner}/{repo}/secrets", "get", first)


async def test_without_kerrigan_secrets_key_setting_is_refused_saying_to_set_it(
    aiohttp_client: Any, database_url: str, db: Database, clock: FakeClock, permissions: FakeGitHubPermissions
) -> None:
    settings = Settings(database_url=database_url, admins=frozenset({ADMIN}))
    api = await _api(aiohttp_client, settings, clock, permissions)
    reply = await _put(api)
    assert (reply.status, reply.body["error"]["code"]) == (503, "secrets_key_unset")
    assert "set it to a Fernet key" in reply.body["error"]["message"]
    validate(await openapi(api), "/repositories/{owner}/{repo}/secrets/{name}", "put", reply)
    assert (await api.get(SECRETS)).body["items"] == []  # names need no key
