"""Who may write what through the API, exactly as the seed says.

System Admins edit everything; pool owners edit labels and tags of their own pools and of the devices in
them, and nothing else; everyone else reads. Nobody writes a ``kerrigan.`` label. A refused write changes
nothing: not the inventory, not the key registry, not the audit log.

The role matrix is {admin, owner of pool-a, owner of pool-b, reader, anonymous} x every write endpoint.
Its rows are grouped by what they write (pools, devices, approved keys); the rows of a group run in order
on one lab, and a row may rely on an earlier row's allowed write (``delete pool`` removes the pool that
``create pool`` made).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from kerrigan.store.tokens import create_token, revoke_tokens
from tests.integration.api.conftest import ADMIN, ANONYMOUS, OWNER_A, OWNER_B, READER, Api, Reply

ROLES = (ADMIN, OWNER_A, OWNER_B, READER, ANONYMOUS)
ADMINS = frozenset({ADMIN})
POOL_A_EDITORS = frozenset({ADMIN, OWNER_A})
POOL_B_EDITORS = frozenset({ADMIN, OWNER_B})


@dataclass(frozen=True)
class Write:
    """One write request, who may make it, and the status it answers when allowed."""

    name: str
    method: str
    path: str
    body: Any
    allowed: frozenset[str]
    success: int = 200

    async def send(self, api: Api, who: str | None) -> Reply:
        return await api.call(self.method, self.path, who=who, json=self.body)


POOL_WRITES = (
    Write("create pool", "POST", "/pools", {"id": "pool-c", "owners": [OWNER_A]}, ADMINS, 201),
    Write("rename pool", "PATCH", "/pools/pool-a", {"name": "Pool A prime"}, ADMINS),
    Write("change pool owners", "PATCH", "/pools/pool-a", {"owners": [OWNER_A, "carol"]}, ADMINS),
    Write(
        "change pool firmware",
        "PATCH",
        "/pools/pool-a",
        {"firmware": {"channel": "beta", "base_version": "2.3.0"}},
        ADMINS,
    ),
    Write(
        "patch pool labels",
        "PATCH",
        "/pools/pool-a",
        {"labels": {"sdk": "2.3.0", "form_factor": "som"}},
        POOL_A_EDITORS,
    ),
    Write("patch pool tags", "PATCH", "/pools/pool-a", {"tags": ["som-devkits", "nightly"]}, POOL_A_EDITORS),
    Write(
        "patch pool labels and name together",
        "PATCH",
        "/pools/pool-a",
        {"labels": {"sdk": "2.4.0", "form_factor": "som"}, "name": "Pool A second"},
        ADMINS,
    ),
    Write("set pool label", "PUT", "/pools/pool-a/labels/purpose", {"value": "ci"}, POOL_A_EDITORS),
    Write("set label of pool b", "PUT", "/pools/pool-b/labels/purpose", {"value": "ci"}, POOL_B_EDITORS),
    Write("remove pool label", "DELETE", "/pools/pool-a/labels/form_factor", None, POOL_A_EDITORS),
    Write("add pool tag", "PUT", "/pools/pool-a/tags/ga-firmware", None, POOL_A_EDITORS),
    Write("remove pool tag", "DELETE", "/pools/pool-a/tags/som-devkits", None, POOL_A_EDITORS),
    Write("delete pool", "DELETE", "/pools/pool-c", None, ADMINS, 204),
)
DEVICE_WRITES = (
    Write(
        "create device",
        "POST",
        "/devices",
        {"id": "dev-a3", "pool": "pool-a", "board": "modalix", "host": "lab-a-03"},
        ADMINS,
        201,
    ),
    Write("change device board", "PATCH", "/devices/dev-a1", {"board": "davinci"}, ADMINS),
    Write("change device host", "PATCH", "/devices/dev-a1", {"host": "lab-a-09"}, ADMINS),
    Write("move device to another pool", "PATCH", "/devices/dev-a3", {"pool": "pool-b"}, ADMINS),
    Write(
        "patch device labels",
        "PATCH",
        "/devices/dev-a1",
        {"labels": {"uart": "off", "sdk": "2.2.1"}},
        POOL_A_EDITORS,
    ),
    Write("patch device tags", "PATCH", "/devices/dev-a1", {"tags": ["uart-debug", "jtag"]}, POOL_A_EDITORS),
    Write("set device label", "PUT", "/devices/dev-a1/labels/uart", {"value": "on"}, POOL_A_EDITORS),
    Write(
        "set label of device in pool b", "PUT", "/devices/dev-b1/labels/uart", {"value": "on"}, POOL_B_EDITORS
    ),
    Write("remove device label", "DELETE", "/devices/dev-a1/labels/sdk", None, POOL_A_EDITORS),
    Write("add device tag", "PUT", "/devices/dev-a1/tags/swd", None, POOL_A_EDITORS),
    Write("remove device tag", "DELETE", "/devices/dev-a1/tags/jtag", None, POOL_A_EDITORS),
    Write(  # a pool's owners take their boards out for a fix and back (issue 13)
        "put a device into maintenance",
        "PUT",
        "/devices/dev-a1/state",
        {"state": "maintenance", "reason": "reflashing"},
        POOL_A_EDITORS,
    ),
    Write(
        "retire a device",
        "PUT",
        "/devices/dev-a1/state",
        {"state": "retired", "reason": "broken UART"},
        ADMINS,
    ),
    Write("delete device", "DELETE", "/devices/dev-a3", None, ADMINS, 204),
)
LABEL_KEY_WRITES = (
    Write("approve label key", "PUT", "/label-keys/purpose", {"description": "what it is for"}, ADMINS, 201),
    Write("withdraw label key", "DELETE", "/label-keys/purpose", None, ADMINS, 204),
)


def _role(who: str | None) -> str:
    return who or "anonymous"


async def _outcome(api: Api, write: Write, who: str | None, before: object) -> tuple[str, object]:
    """What happened, in the matrix's words (the status, and whether anything stored changed since
    ``before``), and what is stored now."""
    reply = await write.send(api, who)
    after = await api.snapshot()
    changed = after != before
    if reply.status < 400:
        outcome = f"{reply.status}, changed" if changed else f"{reply.status}, nothing to change"
    else:
        outcome = f"{reply.status} {reply.body['error']['code']}" + (", BUT CHANGED" if changed else "")
    return outcome, after


def _expected(write: Write) -> dict[str, str]:
    expected = {
        _role(who): "401 unauthenticated" if who is None else "403 forbidden"
        for who in ROLES
        if who not in write.allowed
    }
    owners = sorted(write.allowed - ADMINS)
    for who in owners:
        expected[who] = f"{write.success}, changed"
    expected[ADMIN] = f"{write.success}, nothing to change" if owners else f"{write.success}, changed"
    return expected


@pytest.mark.parametrize(
    "writes", [POOL_WRITES, DEVICE_WRITES, LABEL_KEY_WRITES], ids=["pools", "devices", "label keys"]
)
async def test_only_the_roles_the_seed_names_may_make_each_write(
    api: Api, subtests: pytest.Subtests, writes: tuple[Write, ...]
) -> None:
    """Each row: the refused roles first, each leaving everything as it was; then the owner (for a label or
    tag write) makes the change; then the admin, who repeats an owner's write (changing nothing more) or
    makes an admin-only one."""
    stored = await api.snapshot()
    for write in writes:
        with subtests.test(msg=write.name):
            outcomes = {}
            for who in sorted(ROLES, key=lambda who: (who in write.allowed, who == ADMIN)):
                outcomes[_role(who)], stored = await _outcome(api, write, who, stored)
            assert outcomes == _expected(write)


async def test_owner_rights_follow_a_device_to_its_new_pool(api: Api) -> None:
    await api.call("PATCH", "/devices/dev-a1", json={"pool": "pool-b"})
    statuses = {
        who: (await api.call("PUT", "/devices/dev-a1/tags/moved", who=who)).status
        for who in (OWNER_A, OWNER_B)
    }
    assert statuses == {OWNER_A: 403, OWNER_B: 200}


async def test_forbidden_message_says_who_was_refused_and_who_may(api: Api) -> None:
    reply = await api.call("DELETE", "/devices/dev-a1", who=OWNER_A)
    assert reply.status == 403
    assert reply.body["error"]["message"] == "olga may not delete devices: only System Admins may"


# -- reads -----------------------------------------------------------------------------------------

READS = (
    ("GET", "/pools"),
    ("GET", "/pools/pool-a"),
    ("GET", "/devices"),
    ("GET", "/devices/dev-a1"),
    ("GET", "/label-keys"),
    ("GET", "/audit"),
    ("POST", "/explain"),
)
EXPLAIN_BODY = {"manifest": "name: w\non: [push]\ntasks:\n  - id: t\n    run: ./t.sh\n"}


async def test_everyone_signed_in_may_read_and_anonymous_callers_may_not(api: Api) -> None:
    statuses = {
        (_role(who), f"{method} {path}"): (
            await api.call(method, path, who=who, json=EXPLAIN_BODY if method == "POST" else None)
        ).status
        for who in ROLES
        for method, path in READS
    }
    assert statuses == {
        (_role(who), f"{method} {path}"): 200 if who else 401 for who in ROLES for method, path in READS
    }


# -- the reserved prefix ---------------------------------------------------------------------------

_DEVICE = {"id": "dev-a3", "pool": "pool-a", "board": "modalix", "host": "lab-a-03"}
RESERVED_LABEL_EDITS = (
    ("PUT", "/pools/pool-a/labels/kerrigan.pool_id", {"value": "pool-z"}, "key"),
    ("PUT", "/pools/pool-a/labels/Kerrigan.Firmware_Channel", {"value": "beta"}, "key"),
    ("PUT", "/pools/pool-a/labels/kerrigan.custom", {"value": "x"}, "key"),
    ("PUT", "/pools/pool-a/labels/kerrigan.pool_id", {"value": ""}, "key"),
    ("DELETE", "/pools/pool-a/labels/kerrigan.pool_id", None, "key"),
    ("PUT", "/devices/dev-a1/labels/kerrigan.board", {"value": "davinci"}, "key"),
    ("DELETE", "/devices/dev-a1/labels/kerrigan.target_id", None, "key"),
    ("PATCH", "/pools/pool-a", {"labels": {"kerrigan.pool_name": "x"}}, "labels.kerrigan.pool_name"),
    ("PATCH", "/devices/dev-a1", {"labels": {"kerrigan.host": "x"}}, "labels.kerrigan.host"),
)
RESERVED_ADMIN_WRITES = (
    ("POST", "/pools", {"id": "pool-c", "labels": {"kerrigan.pool_id": "x"}}, "labels.kerrigan.pool_id"),
    ("POST", "/devices", {**_DEVICE, "labels": {"kerrigan.board": "x"}}, "labels.kerrigan.board"),
    ("PUT", "/label-keys/kerrigan.pool_id", {"description": "the pool"}, "key"),
)
RESERVED = [(ADMIN, edit) for edit in RESERVED_LABEL_EDITS + RESERVED_ADMIN_WRITES] + [
    (OWNER_A, edit) for edit in RESERVED_LABEL_EDITS
]


async def test_nobody_writes_a_kerrigan_label_not_even_an_admin(api: Api, subtests: pytest.Subtests) -> None:
    before = await api.snapshot()
    for who, (method, path, body, field_name) in RESERVED:
        with subtests.test(msg=f"{who}: {method} {path} {body}"):
            reply = await api.call(method, path, who=who, json=body)
            assert (reply.status, reply.body["error"]["field"]) == (400, field_name)
            assert "reserved prefix 'kerrigan.'" in reply.body["error"]["message"]
            assert await api.snapshot() == before


# -- forged credentials ----------------------------------------------------------------------------

FORGED: Mapping[str, Callable[[str], str]] = {
    "unknown token": lambda token: "Bearer kgn_" + "A" * 43,
    "token with its last letter changed": lambda token: (
        f"Bearer {token[:-1]}{'B' if token[-1] != 'B' else 'C'}"
    ),
    "basic scheme": lambda token: "Basic YWxpY2U6aHVudGVyMg==",
    "token scheme": lambda token: f"Token {token}",
    "no scheme": lambda token: token,
    "bearer without a token": lambda token: "Bearer ",
    "bearer alone": lambda token: "Bearer",
    "empty header": lambda token: "",
}


async def test_forged_authorization_is_401_and_changes_nothing(api: Api, subtests: pytest.Subtests) -> None:
    """Forged from the admin's own token, on a write and on a read."""
    before = await api.snapshot()
    for name, forge in FORGED.items():
        headers = {"Authorization": forge(api.tokens[ADMIN])}
        for method, path in (("PUT", "/pools/pool-a/tags/nightly"), ("GET", "/pools/pool-a")):
            with subtests.test(msg=f"{name}: {method} {path}"):
                reply = await api.call(method, path, who=ANONYMOUS, headers=headers)
                assert (reply.status, reply.body["error"]["code"]) == (401, "unauthenticated")
                assert reply.headers["WWW-Authenticate"] == 'Bearer realm="kerrigan"'
                assert await api.snapshot() == before


async def test_revoked_token_is_401(api: Api) -> None:
    async with api.db.sessions() as session, session.begin():
        await revoke_tokens(session, OWNER_A, api.db.clock())
    reply = await api.call("PUT", "/pools/pool-a/tags/nightly", who=OWNER_A)
    assert reply.status == 401
    assert "revoked" in reply.body["error"]["message"]


async def test_admin_role_comes_from_the_login_so_every_token_of_an_admin_works(
    api: Api,
) -> None:
    async with api.db.sessions() as session, session.begin():
        second = await create_token(session, ADMIN, api.db.clock())
    headers = {"Authorization": f"Bearer {second}"}
    reply = await api.call("DELETE", "/devices/dev-a1", who=ANONYMOUS, headers=headers)
    assert reply.status == 204
