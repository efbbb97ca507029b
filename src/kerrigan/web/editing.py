"""Changing the inventory on a person's behalf: the one implementation behind the REST API's writes
(``web/api/inventory.py``) and the forms of the pool and device pages (``web/pages/pools.py``,
``devices.py``).

Every edit here checks the role first (``core.roles``: admins edit everything, pool owners the labels and
tags of their pools and of the devices in them), then the label rules (``core.labels``, the approved-key
registry), and saves through the store, which writes the audit log. A rule broken is an :class:`ApiError`:
400 naming the field and the rule, 403 saying who may. The API turns it into JSON, a page into the message
next to the field it belongs to; either way nothing has changed, because the caller's transaction is rolled
back.

The list filters (``?label=key=value``, ``?tag=``) of ``/api/v1/pools``, ``/api/v1/devices`` and ``/pools``
live here too, so the page and the API filter alike; and so does what the pages' forms share: reading a
posted form (sign-in, CSRF), re-rendering it with the error next to its field, and the notice shown once
after the redirect that follows a change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.health_checks import (
    HEALTH_CHECK_KEYS,
    HealthCheck,
    HealthCheckError,
    health_check_from_document,
)
from kerrigan.core.instants import EXAMPLE as TIME_EXAMPLE
from kerrigan.core.instants import TimeError, read_time
from kerrigan.core.inventory import (
    MAX_POOL_REPOSITORIES,
    Device,
    DeviceState,
    Firmware,
    Pool,
    RepositoryGlobError,
    validate_repository_glob,
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
from kerrigan.store.health_checks import NoHealthCheckError, QueuedCheck, queue_check
from kerrigan.store.inventory import (
    NotFoundError,
    StoredDevice,
    StoredPool,
    get_device,
    get_pool,
    load_inventory,
    save_device,
    save_pool,
    set_state,
)
from kerrigan.store.label_impact import WINDOW, asked_tasks
from kerrigan.store.label_keys import label_keys
from kerrigan.web import bodies
from kerrigan.web.auth import forbidden
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.signin import check_csrf, get_session, page_writer, redirect
from kerrigan.web.state import DATABASE, writing

OWNER_FIELDS = frozenset({"labels", "tags", "health_check"})
"""What pool owners may change; everything else is for System Admins."""

POOL_PATCH_FIELDS = ("name", "owners", "repositories", "firmware", "labels", "tags", "health_check")
DEVICE_PATCH_FIELDS = (
    "pool",
    "board",
    "target_type",
    "os_type",
    "host",
    "labels",
    "tags",
    "health_check",
)


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


# -- whole fields from a body ----------------------------------------------------------------------


def repository_globs(value: Any, field: str) -> tuple[str, ...]:
    """A pool's ``repositories``: a list of globs on ``owner/name``, each kept once (ignoring case); the
    error's field is the list or the entry (``repositories[1]``)."""
    if not isinstance(value, list):
        raise bad_request(f"{field} must be a list of owner/name globs", field=field)
    if len(value) > MAX_POOL_REPOSITORIES:
        raise bad_request(f"{field} has {len(value)} globs; at most {MAX_POOL_REPOSITORIES}", field=field)
    kept: dict[str, str] = {}
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise bad_request(f"{field}[{index}] must be a string", field=f"{field}[{index}]")
        try:
            kept.setdefault(validate_repository_glob(item).lower(), item)
        except RepositoryGlobError as exc:
            raise bad_request(str(exc), field=f"{field}[{index}]", code="invalid_repository") from None
    return tuple(kept.values())


def pool_from(body: Mapping[str, Any], pool: Pool) -> Pool:
    """``pool`` with the fields ``body`` gives (the API's JSON, or what a page's form stands for)."""
    changes: dict[str, Any] = {}
    if "name" in body:
        changes["name"] = bodies.string(body["name"], "name")
    if "owners" in body:
        changes["owners"] = bodies.logins(body["owners"], "owners")
    if "repositories" in body:
        changes["repositories"] = repository_globs(body["repositories"], "repositories")
    if "firmware" in body:
        firmware = body["firmware"]
        if not isinstance(firmware, dict) or set(firmware) - {"channel", "base_version"}:
            raise bad_request("firmware must be an object with channel and base_version", field="firmware")
        values = {
            name: None
            if firmware.get(name) is None
            else bodies.label_value(firmware[name], f"firmware.{name}", f"firmware {name}")
            for name in ("channel", "base_version")
        }
        changes["firmware"] = Firmware(values["channel"], values["base_version"])
    if "labels" in body:
        changes["labels"] = bodies.labels(body["labels"], "labels")
    if "tags" in body:
        changes["tags"] = bodies.tags(body["tags"], "tags")
    if "health_check" in body:
        changes["health_check"] = health_check(body["health_check"], "health_check")
    return dataclasses.replace(pool, **changes)


def health_check(value: Any, field: str) -> HealthCheck | None:
    """A pool's or a device's ``health_check``: ``{"run", "every", "timeout_s", "vcpus"}`` (only ``run``
    required), or ``null`` for none; a 400 naming the key that breaks its rule."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request(
            f'{field} must be an object such as {{"run": "/opt/lab/health.sh", "every": "24h"}}, '
            "or null for none",
            field=field,
        )
    # JSON has one kind of number: 600.0 is the integer 600 to a client (and to JSON Schema).
    value = {
        key: int(item) if isinstance(item, float) and item.is_integer() and key != "run" else item
        for key, item in value.items()
    }
    unknown = sorted(set(value) - set(HEALTH_CHECK_KEYS))
    if unknown:
        keys = ", ".join(HEALTH_CHECK_KEYS)
        raise bad_request(
            f"{field} has no key {unknown[0]!r}: it takes {keys}", field=f"{field}.{unknown[0]}"
        )
    if "run" not in value:
        raise bad_request(
            f"{field}.run is required: the command that checks the device", field=f"{field}.run"
        )
    for key in HEALTH_CHECK_KEYS:  # each key alone, so the error names the one that is wrong
        alone = {"run": value["run"]} if key == "run" else {"run": "true", key: value.get(key)}
        if key in value:
            try:
                health_check_from_document(alone)
            except HealthCheckError as exc:
                raise bad_request(f"{field}.{key}: {exc}", field=f"{field}.{key}") from None
    try:
        return health_check_from_document(value)
    except HealthCheckError as exc:
        raise bad_request(f"{field}: {exc}", field=field) from None


def device_from(body: Mapping[str, Any], device: Device) -> Device:
    """``device`` with the fields ``body`` gives."""
    changes: dict[str, Any] = {}
    if "pool" in body:
        changes["pool_id"] = bodies.identifier(body["pool"], "pool")
    for name in ("board", "target_type", "os_type"):
        if name in body:
            changes[name] = bodies.label_value(body[name], name, name)
    if "host" in body:
        changes["host"] = bodies.identifier(body["host"], "host")
    if "state" in body:
        changes["state"] = bodies.state(body["state"], "state")
    if "state_reason" in body:
        reason = body["state_reason"]
        changes["state_reason"] = (
            "" if reason == "" else bodies.string(reason, "state_reason", max_length=500)
        )
    if "labels" in body:
        changes["labels"] = bodies.labels(body["labels"], "labels")
    if "tags" in body:
        changes["tags"] = bodies.tags(body["tags"], "tags")
    if "health_check" in body:
        changes["health_check"] = health_check(body["health_check"], "health_check")
    return dataclasses.replace(device, **changes)


def device_state(state: Any, reason: Any) -> tuple[DeviceState, str]:
    """A state change's state and reason (an empty reason is allowed), checked before anything is read."""
    checked = bodies.state(state, "state")
    if reason != "":
        reason = bodies.string(reason, "reason", max_length=500)
    return checked, reason


def state_until(value: Any, state: DeviceState, now: datetime) -> datetime | None:
    """When a maintenance ends by itself: an ISO 8601 time with its offset (``2026-12-01T18:00:00Z``), in
    the future, and only for maintenance; ``None``/empty for none. A 400 naming ``until`` otherwise."""
    if value is None or value == "":
        return None
    if state is not DeviceState.MAINTENANCE:
        raise bad_request(
            "until is for maintenance only: another state lasts until it is changed", field="until"
        )
    return future_time(value, now, "until")


def future_time(value: Any, now: datetime, field: str) -> datetime:
    """An ISO 8601 time with its offset, later than ``now``; a 400 naming ``field`` otherwise."""
    if not isinstance(value, str):
        raise bad_request(f"{field} must be an ISO 8601 time such as {TIME_EXAMPLE}", field=field)
    try:
        at = read_time(value)
    except TimeError as exc:
        raise bad_request(f"{field} {exc}", field=field) from None
    if at <= now:
        raise bad_request(f"{field} {value[:40]!r} is not in the future", field=field)
    return at


async def pool_exists(session: AsyncSession, pool_id: str) -> None:
    """A pool named in a body must exist: its absence is a 422 naming ``pool`` (the body is well formed but
    names what the lab does not have), not a missing page."""
    try:
        await get_pool(session, pool_id)
    except NotFoundError:
        raise ApiError(422, "unknown_pool", f"there is no pool {pool_id!r}", "pool") from None


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


# -- list filters ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filters:
    """Labels every listed item must carry (effective, ``key=value``) and tags it must have."""

    labels: Mapping[str, str]
    tags: frozenset[str]

    def matches(self, labels: Mapping[str, str], tags: Iterable[str]) -> bool:
        """Whether an item with these effective labels and tags passes."""
        return all(labels.get(k) == v for k, v in self.labels.items()) and self.tags <= frozenset(tags)


def parse_filters(labels: Iterable[str], tags: Iterable[str]) -> Filters:
    """``label`` filters as ``key=value`` (keys compared lowercase) and ``tag`` filters; a malformed one is a
    400 naming the field ``label`` or ``tag``."""
    wanted: dict[str, str] = {}
    for item in labels:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise bad_request(f"label filter {item!r} must look like key=value", field="label")
        wanted[key.lower()] = value
    try:
        checked = frozenset(validate_tag(tag) for tag in tags)
    except LabelError as exc:
        raise bad_request(str(exc), field="tag") from None
    return Filters(wanted, checked)


# -- the pages' forms ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FormError:
    """A form a page re-renders (status 400) with the rule that failed next to the field, and what was
    typed kept in the inputs.

    ``form`` names the form on the page (``label-add``, ``label:sdk``, ``tag-add``, ``firmware``, ...),
    ``field`` the input the message belongs to.
    """

    form: str
    field: str
    message: str
    typed: Mapping[str, str]
    # A change of labels held back because it takes devices from tasks that ran lately: those tasks, and
    # where the form posts again to make the change anyway.
    lost: tuple[LostDevices, ...] = ()
    action: str = ""

    @property
    def status(self) -> int:
        """The status of the page that shows it: 409 for a change held back, else 400."""
        return 409 if self.lost else 400

    def at(self, form: str, field: str) -> bool:
        """Whether the message belongs next to ``field`` of ``form`` (a held-back change is shown above the
        forms, not next to a field)."""
        return not self.lost and (form, field) == (self.form, self.field)

    def typed_value(self, form: str, name: str, default: str = "") -> str:
        """What was typed into ``name`` of ``form``, or ``default`` for another form."""
        return self.typed.get(name, default) if form == self.form else default


def form_error(error: ApiError, form: str, typed: Mapping[str, str], fields: Mapping[str, str]) -> FormError:
    """The page's form error for a refused edit. ``fields`` maps the error's field to the input it belongs
    to, by its whole name or its first part (``firmware.channel``, then ``firmware``; ``owners[1]``, then
    ``owners``); an unknown field goes to the form's first input."""
    raw = error.field or ""
    field = fields.get(raw) or fields.get(raw.split(".")[0].split("[")[0]) or next(iter(fields.values()))
    return FormError(form, field, error.message, dict(typed))


def not_found(error: NotFoundError) -> ApiError:
    """A missing pool or device, as the pages' error page shows it (404)."""
    return ApiError(404, "not_found", str(error))


@dataclass(frozen=True, slots=True)
class PostedForm:
    """A page's POST: the signed-in user and the form's fields, its CSRF token checked."""

    principal: Principal
    fields: Mapping[str, Any]

    @classmethod
    async def read(cls, request: web.Request) -> PostedForm:
        """Sign-in first (else to /login), then the CSRF token (else a 403 page)."""
        principal = await page_writer(request)
        fields = await request.post()
        await check_csrf(request, fields)
        return cls(principal, fields)

    def text(self, name: str) -> str:
        """A text field as sent, or ``""`` when it is missing (or a file)."""
        value = self.fields.get(name)
        return value if isinstance(value, str) else ""


Edit = Callable[[Editor], Awaitable[object]]
Rerender = Callable[[FormError], Awaitable[web.Response]]
CONFIRM = "yes"
"""The value of a form's ``confirm`` field that makes a change held back by :func:`weigh` anyway."""


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


def held_back_message(lost: tuple[LostDevices, ...]) -> str:
    """Why a page's change of labels waits for a second click."""
    days = WINDOW.days
    stranded = sum(1 for item in lost if item.unschedulable)
    text = f"This change takes devices from {len(lost)} task(s) that ran in the last {days} days"
    if stranded:
        text += f"; {stranded} of them would have none left and fail at once"
    return text + ". Change it anyway, or keep the labels as they are."


async def edit_from_page(
    request: web.Request,
    posted: PostedForm,
    edit: Edit,
    *,
    form: str,
    typed: Mapping[str, str],
    fields: Mapping[str, str],
    rerender: Rerender,
    done: str,
    notice: str,
    weighed: bool = False,
) -> web.Response:
    """Make a page's edit in one write transaction. A broken rule (400) rolls it back and re-renders the
    page with the message next to the field; a refusal (403) or a missing pool or device (404) is the error
    page; success redirects to ``done`` with ``notice`` shown there once.

    A ``weighed`` edit (of labels or tags) that takes devices from tasks that ran lately is rolled back
    too, and the page lists those tasks with a button that posts the form again with ``confirm=yes``."""
    try:
        if weighed and posted.text("confirm") != CONFIRM:
            found, kept = await weigh(
                request, posted.principal, edit, keep=lambda w: not w.lost, if_match=False
            )
            if not kept:
                message = held_back_message(found.lost)
                held = FormError(form, "", message, dict(typed), lost=found.lost, action=request.path)
                return await rerender(held)
        else:
            async with writing(request) as session:
                await edit(editor(request, session, posted.principal, if_match=False))
    except NotFoundError as exc:
        raise not_found(exc) from None
    except ApiError as exc:
        if exc.status not in (400, 422):
            raise
        return await rerender(form_error(exc, form, typed, fields))
    session_data = await get_session(request)
    session_data["notice"] = notice
    return redirect(done)


async def take_notice(request: web.Request) -> str | None:
    """The notice an edit left for the page it redirected to (shown once)."""
    session = await get_session(request)
    if "notice" not in session:  # popping would rewrite the cookie on every page
        return None
    notice = session.pop("notice")
    return notice if isinstance(notice, str) else None
