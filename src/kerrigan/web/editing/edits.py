"""An inventory edit on a person's behalf: the role first (``core.roles``: admins edit everything, pool owners
the labels, tags and health check of their pools and of the devices in them), then the label rules
(``core.labels``, the approved-key registry), saved through the store, which writes the audit log; and an
edit weighed against the tasks that ran lately before it is kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory import (
    DeviceState,
    Pool,
)
from kerrigan.core.label_impact import LostDevices, devices_lost
from kerrigan.core.labels import LabelError, validate_tag, validate_value
from kerrigan.core.roles import (
    OWNER_STATES,
    Principal,
    UnapprovedKeyError,
    check_label,
    may_administer,
    may_check_health,
    may_edit_labels,
    may_set_state,
)
from kerrigan.store.audit import Change
from kerrigan.store.health_checks.queueing import NoHealthCheckError, QueuedCheck, queue_check
from kerrigan.store.inventory import (
    StoredDevice,
    StoredPool,
    get_device,
    get_pool,
    load_inventory,
    save_device,
    save_pool,
    set_state,
)
from kerrigan.store.label_impact import asked_tasks
from kerrigan.store.label_keys import label_keys
from kerrigan.web.auth import forbidden
from kerrigan.web.editing.fields import device_from, pool_exists, pool_from
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.state import DATABASE, writing

OWNER_FIELDS = frozenset({"labels", "tags", "health_check"})
"""What pool owners may change; everything else is for System Admins."""


def change_by(request: web.Request, principal: Principal) -> Change:
    """Who makes this request's change, stamped with the database's clock."""
    return Change(principal.login, request.config_dict[DATABASE].clock())


# -- roles -----------------------------------------------------------------------------------------


def check_edit(principal: Principal, pool: Pool, fields: Iterable[str], what: str) -> None:
    """Owners of ``pool`` edit only the labels, tags and health check of ``what`` (the pool or one of its
    devices)."""
    fields = set(fields)
    if not may_edit_labels(principal, pool):
        raise forbidden(principal, f"edit {what}: only System Admins and owners of pool {pool.id} may")
    if fields - OWNER_FIELDS and not may_administer(principal):
        names = ", ".join(sorted(fields - OWNER_FIELDS))
        raise forbidden(
            principal,
            f"change {names} of {what}: owners edit only labels, tags and the health check; System Admins "
            f"edit {names}",
        )


def check_pool_edit(principal: Principal, pool: Pool, fields: Iterable[str]) -> None:
    """``check_edit`` for the pool itself."""
    check_edit(principal, pool, fields, f"pool {pool.id}")


def check_device_edit(principal: Principal, stored: StoredDevice, fields: Iterable[str]) -> None:
    """``check_edit`` for a device, decided by its pool's owners."""
    check_edit(principal, stored.pool, fields, f"device {stored.device.id}")


def check_state_edit(principal: Principal, stored: StoredDevice, state: str) -> None:
    """System Admins put devices in any state; their pool's owners in available or maintenance."""
    if not may_set_state(principal, stored.pool, state):
        who = (
            "System Admins"
            if state not in OWNER_STATES
            else f"System Admins and the owners of pool {stored.pool.id}"
        )
        raise forbidden(principal, f"put device {stored.device.id} in {state}: only {who} may")


# -- labels and tags -------------------------------------------------------------------------------


async def approved_check(
    session: AsyncSession,
    principal: Principal,
    before: Mapping[str, str],
    after: Mapping[str, str],
    field: str,
) -> None:
    """Keys added or changed must be approved once the registry has entries (admins excepted)."""
    approved = await label_keys(session)
    for key, value in after.items():
        if before.get(key) != value:
            try:
                check_label(key, value, approved=approved, principal=principal)
            except LabelError as exc:
                raise bad_request(str(exc), field=f"{field}.{key}", code="unapproved_key") from None


def edited_labels(
    labels: Mapping[str, str],
    key: str,
    value: str,
    approved: Mapping[str, str],
    principal: Principal,
    *,
    empty_removes: bool = True,
) -> dict[str, str]:
    """``labels`` with ``key`` set to ``value``; an empty value removes the label unless ``empty_removes``
    is off (a form that only adds labels), when it is the value rule's error. The error's field is
    ``key`` or ``value``."""
    try:
        normalised, checked = check_label(key, value, approved=approved, principal=principal)
        if checked is None and not empty_removes:
            validate_value(value, key=normalised)
    except LabelError as exc:
        code = "unapproved_key" if isinstance(exc, UnapprovedKeyError) else "invalid_label"
        raise bad_request(str(exc), field=exc.subject, code=code) from None
    edited = dict(labels)
    if checked is None:
        edited.pop(normalised, None)
    else:
        edited[normalised] = checked
    return edited


def edited_tags(tags: frozenset[str], tag: str, add: bool) -> frozenset[str]:
    """``tags`` with ``tag`` added or removed; the error's field is ``tag``."""
    try:
        checked = validate_tag(tag)
    except LabelError as exc:
        raise bad_request(str(exc), field="tag", code="invalid_tag") from None
    return tags | {checked} if add else tags - {checked}


# -- the edits -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Editor:
    """One person's edits in the caller's write transaction (``web.state.writing``). Each edit locks the
    row, checks the role and the rules, and saves (the store writes the audit log). ``if_match`` is the
    version the person read (the API's ``If-Match``); ``None`` edits whatever is current."""

    session: AsyncSession
    principal: Principal
    change: Change
    if_match: str | None = None

    async def update_pool(self, pool_id: str, body: Mapping[str, Any]) -> StoredPool:
        """Change a pool's name, owners, repositories, firmware (admins), labels or tags (admins and
        owners)."""
        stored = await get_pool(self.session, pool_id, lock=True)
        check_pool_edit(self.principal, stored.pool, body)
        pool = pool_from(body, stored.pool)
        await approved_check(self.session, self.principal, stored.pool.labels, pool.labels, "labels")
        return await save_pool(self.session, pool, self.change, self.if_match)

    async def set_pool_label(
        self, pool_id: str, key: str, value: str, *, empty_removes: bool = True
    ) -> StoredPool:
        """Set a pool label (an empty value removes it, see :func:`edited_labels`)."""
        stored = await get_pool(self.session, pool_id, lock=True)
        check_pool_edit(self.principal, stored.pool, ["labels"])
        approved = await label_keys(self.session)
        labels = edited_labels(
            stored.pool.labels, key, value, approved, self.principal, empty_removes=empty_removes
        )
        pool = dataclasses.replace(stored.pool, labels=labels)
        return await save_pool(self.session, pool, self.change, self.if_match)

    async def set_pool_tag(self, pool_id: str, tag: str, *, add: bool) -> StoredPool:
        """Add or remove a pool tag."""
        stored = await get_pool(self.session, pool_id, lock=True)
        check_pool_edit(self.principal, stored.pool, ["tags"])
        pool = dataclasses.replace(stored.pool, tags=edited_tags(stored.pool.tags, tag, add))
        return await save_pool(self.session, pool, self.change, self.if_match)

    async def update_device(self, device_id: str, body: Mapping[str, Any]) -> StoredDevice:
        """Change a device's pool, board, types, host (admins), labels or tags (admins and pool owners)."""
        stored = await get_device(self.session, device_id, lock=True)
        check_device_edit(self.principal, stored, body)
        device = device_from(body, stored.device)
        if device.pool_id != stored.device.pool_id:
            await pool_exists(self.session, device.pool_id)
        await approved_check(self.session, self.principal, stored.device.labels, device.labels, "labels")
        return await save_device(self.session, device, self.change, self.if_match)

    async def set_device_label(
        self, device_id: str, key: str, value: str, *, empty_removes: bool = True
    ) -> StoredDevice:
        """Set a device label (an empty value removes it, see :func:`edited_labels`)."""
        stored = await get_device(self.session, device_id, lock=True)
        check_device_edit(self.principal, stored, ["labels"])
        approved = await label_keys(self.session)
        labels = edited_labels(
            stored.device.labels, key, value, approved, self.principal, empty_removes=empty_removes
        )
        device = dataclasses.replace(stored.device, labels=labels)
        return await save_device(self.session, device, self.change, self.if_match)

    async def set_device_tag(self, device_id: str, tag: str, *, add: bool) -> StoredDevice:
        """Add or remove a device tag."""
        stored = await get_device(self.session, device_id, lock=True)
        check_device_edit(self.principal, stored, ["tags"])
        device = dataclasses.replace(stored.device, tags=edited_tags(stored.device.tags, tag, add))
        return await save_device(self.session, device, self.change, self.if_match)

    async def set_device_state(
        self, device_id: str, state: DeviceState, reason: str, until: datetime | None = None
    ) -> StoredDevice:
        """Change a device's state with a reason and, for maintenance, when it ends (admins; the pool's
        owners for available and maintenance); :func:`device_state` and :func:`state_until` check them
        first. Who and since are recorded beside them."""
        stored = await get_device(self.session, device_id, lock=True)
        check_state_edit(self.principal, stored, state.value)
        return await set_state(
            self.session, device_id, state, reason, until=until, change=self.change, if_match=self.if_match
        )

    async def check_health(self, device_id: str) -> QueuedCheck:
        """Queue the device's health check (admins and the pool's owners; 409 when it has none); while
        one is queued or running, that one."""
        stored = await get_device(self.session, device_id, lock=True)
        if not may_check_health(self.principal, stored.pool):
            raise forbidden(
                self.principal,
                f"check device {device_id}: only System Admins and owners of pool {stored.pool.id} may",
            )
        try:
            return await queue_check(
                self.session, device_id, self.change.at, why=f"asked by {self.principal.login}"
            )
        except NoHealthCheckError as exc:
            raise ApiError(409, "conflict", str(exc)) from None


def editor(request: web.Request, session: AsyncSession, principal: Principal, *, if_match: bool) -> Editor:
    """An :class:`Editor` for ``principal`` in ``session``, stamped with the database's clock; with
    ``if_match``, holding the request's ``If-Match`` header."""
    version = request.headers.get("If-Match") if if_match else None
    return Editor(session, principal, change_by(request, principal), version)


Edit = Callable[[Editor], Awaitable[object]]


@dataclass(frozen=True, slots=True)
class Weighed:
    """An edit and what it would take from the tasks that ran lately (:mod:`kerrigan.core.label_impact`)."""

    saved: object
    lost: tuple[LostDevices, ...]


class _Undone(Exception):  # noqa: N818 - not an error: it carries a dry run out of its transaction
    """Leaves a write transaction rolled back, carrying what the edit would have done."""

    def __init__(self, weighed: Weighed) -> None:
        super().__init__("rolled back")
        self.weighed = weighed


async def weigh(
    request: web.Request,
    principal: Principal,
    edit: Edit,
    *,
    keep: Callable[[Weighed], bool],
    if_match: bool,
) -> tuple[Weighed, bool]:
    """Make ``edit`` in one write transaction and weigh it against the tasks of the last
    :data:`~kerrigan.store.label_impact.WINDOW`; it is kept (committed) only when ``keep`` says so, else
    rolled back. What it did and would take, and whether it was kept. With ``if_match`` the edit holds the
    request's ``If-Match`` (the API's)."""
    try:
        async with writing(request) as session:
            chosen = editor(request, session, principal, if_match=if_match)
            before = await load_inventory(session)
            saved = await edit(chosen)
            after = await load_inventory(session)
            asked = await asked_tasks(session, chosen.change.at)
            weighed = Weighed(saved, devices_lost(before, after, asked))
            if not keep(weighed):
                raise _Undone(weighed)
    except _Undone as undone:
        return undone.weighed, False
    return weighed, True
