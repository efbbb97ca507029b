"""A device's page, ``/devices/{device_id}``: its explicit labels and tags (editable by System Admins and the
owners of its pool), its implicit labels, its effective labels with where each comes from, its state
with the reason and the history of state changes from the audit log, and its last 20 jobs (a job of a
repository the reader may not read without its repository, session or task: :mod:`kerrigan.web.reading`).
While its runner host is offline the page says so (an available device's state reads "available, host
offline", in the warning colour) and names the jobs that held the device when the host was last heard of,
and whether the server has ended them: they may still run on the host until its agent restarts
(:mod:`kerrigan.core.host_outage`).

The forms post, with the CSRF token, below the page, through :mod:`kerrigan.web.editing` (the REST API's
code: roles, label rules, approved keys, audit log):

- ``POST /devices/{device_id}/labels`` (``key``, ``value``): add a label, or give one a new value
- ``POST /devices/{device_id}/labels/{key}`` (``value``): change its value, an empty one removes it
- ``POST /devices/{device_id}/labels/{key}/delete``: remove it (the pool's label of that key applies again)
- ``POST /devices/{device_id}/tags`` (``tag``): add a tag
- ``POST /devices/{device_id}/tags/{tag}/delete``: remove it (the pool's tags stay)
- ``POST /devices/{device_id}/state`` (``state``, ``reason``): System Admins only
- ``POST /devices/{device_id}/health-check``: queue its health check (admins and the pool's owners)
- ``POST /devices/{device_id}/power`` (``action``): switch or read its power (the person holding its
  reservation and System Admins; :mod:`kerrigan.web.pages.device_hands`, which also gives the page its power
  state and live console)

The label and tag forms (the same as the pool page's: :mod:`kerrigan.web.pages.label_forms`) are for
System Admins and the owners of the device's pool. Success redirects back with a notice; a broken rule
re-renders the page with status 400 and the rule next to the field, and changes nothing; a user who may not
make an edit does not see its form, and a forged post gets the 403 page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from aiohttp import web

from kerrigan.core.durations import DurationError, parse_duration
from kerrigan.core.host_outage import stranded_text
from kerrigan.core.inventory import (
    Device,
    DeviceState,
    LabelSource,
    health_check_of,
    implicit_device_labels,
    implicit_pool_labels,
    sourced_target_labels,
)
from kerrigan.core.reservations import MAX_WAIT_S, RequestError, may_end, read_request
from kerrigan.core.roles import Principal, may_check_health, may_set_state
from kerrigan.store.audit import AuditEntry, list_audit
from kerrigan.store.health_checks.queueing import last_check_job
from kerrigan.store.history import device_jobs
from kerrigan.store.host_outages import host_outages
from kerrigan.store.inventory import NotFoundError, get_device, load_inventory
from kerrigan.store.label_keys import label_keys
from kerrigan.store.reservations import (
    NotYoursError,
    UnknownReservationError,
    UnmatchableError,
    active_reservations,
    create_reservation,
    list_reservations,
    release_reservation,
)
from kerrigan.store.suspects import tracker_of
from kerrigan.web import editing
from kerrigan.web.editing import Editor, FormError, PostedForm
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.pages.device_hands import device_hands
from kerrigan.web.pages.history import duration
from kerrigan.web.pages.label_forms import FormSubject, form_context
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import HIDDEN, hide_job, read_access
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE, SETTINGS

routes = web.RouteTableDef()

HISTORY_ROWS = 1000
"""Audit rows of one device read for its state history (label and tag edits share the log)."""

RECENT_JOBS = 20
"""Jobs listed on the page; the rest are a link to ``/sessions?device=``."""

_STATE_FIELDS = {"state": "state", "reason": "reason", "until": "until"}

_SOURCE_WORDS = {
    LabelSource.POOL: "pool",
    LabelSource.DEVICE: "device",
    LabelSource.DEVICE_OVERRIDE: "device override",
    LabelSource.IMPLICIT: "implicit",
}


@dataclass(frozen=True, slots=True)
class StateChange:
    """One entry of a device's state history: the state (and reason) it was put in, by whom, when.

    ``before`` is the state it left (``None`` when the device was created in ``state``); it equals
    ``state`` when only the reason changed.
    """

    at: datetime
    actor: str
    before: str | None
    state: str
    reason: str


def state_history(entries: Sequence[AuditEntry], device: Device) -> list[StateChange]:
    """The state changes in ``entries`` (one device's audit rows, newest first), newest first.

    The store writes a state and its reason as two rows of one change (same time, same actor); a change
    that sets only one of them takes the other from the device as it stood then, which is worked out by
    walking back from the device as it is now.
    """
    groups: list[list[AuditEntry]] = []
    for entry in entries:
        if entry.field not in {"state", "state_reason"} and not (entry.action == "add" and not entry.field):
            continue
        if groups and (groups[-1][0].at, groups[-1][0].actor) == (entry.at, entry.actor):
            groups[-1].append(entry)
        else:
            groups.append([entry])
    state, reason = device.state.value, device.state_reason  # as they stand after the change being read
    history: list[StateChange] = []
    for group in groups:
        fields = {entry.field: entry for entry in group}
        created = fields.get("")
        if created is not None and isinstance(created.after, Mapping):
            history.append(
                StateChange(
                    created.at,
                    created.actor,
                    None,
                    str(created.after.get("state", state)),
                    str(created.after.get("state_reason", reason)),
                )
            )
            continue
        state_row, reason_row = fields.get("state"), fields.get("state_reason")
        after_state = str(state_row.after) if state_row is not None else state
        after_reason = str(reason_row.after or "") if reason_row is not None else reason
        before_state = str(state_row.before) if state_row is not None else after_state
        history.append(StateChange(group[0].at, group[0].actor, before_state, after_state, after_reason))
        state = before_state
        reason = str(reason_row.before or "") if reason_row is not None else reason
    return history


def _job_duration(started: datetime | None, finished: datetime | None) -> str:
    return duration((finished - started).total_seconds()) if started and finished else ""


async def _device_page(
    request: web.Request, principal: Principal | None, error: FormError | None = None
) -> web.Response:
    device_id = request.match_info["device_id"]
    async with request.config_dict[DATABASE].sessions() as session:
        try:
            stored = await get_device(session, device_id)
        except NotFoundError as exc:
            raise editing.not_found(exc) from None
        approved = await label_keys(session)
        audit = await list_audit(session, device_id=device_id, limit=HISTORY_ROWS)
        recent = await device_jobs(session, device_id, limit=RECENT_JOBS)
        database = request.config_dict[DATABASE]
        found = await tracker_of(database.signals).suspects(session, database.clock())
        last_check = await last_check_job(session, device_id)
        reservation = (await active_reservations(session)).get(device_id)
        mine = await list_reservations(session, login=principal.login) if principal is not None else []
        outages = await host_outages(session, [stored.device.host])
        hands = await device_hands(session, principal, stored, database.clock())
    device, pool = stored.device, stored.pool
    outage = (await read_access(request, principal).outages(outages)).get(device.host)
    # People's labels first, then the generated ones; each group by key.
    effective = sorted(
        sourced_target_labels(device, pool),
        key=lambda label: (label.source is LabelSource.IMPLICIT, label.key),
    )
    context = {
        "device": device,
        "pool": pool,
        "state_changed_at": stored.state_changed_at,
        "effective": effective,
        "source_words": _SOURCE_WORDS,
        "overrides": {label.key: label.overrides for label in effective if label.overrides is not None},
        "implicit": {**implicit_pool_labels(pool), **implicit_device_labels(device)},
        "history": state_history(audit, device),
        "recent_jobs": await read_access(request, principal).shown(recent.items, hide_job),
        "hidden": HIDDEN,
        "suspects": sorted(s.sentence() for s in found.values() if s.device == device_id),
        "more_jobs": recent.next is not None,
        "health_check": health_check_of(device, pool),
        "last_check": last_check,
        "reservation": reservation,
        # Its runner host offline: when it was last heard of and the jobs that may still run on this device.
        "outage": outage.on(device.id) if outage is not None else None,
        "stranded_text": stranded_text,
        "may_release": principal is not None
        and reservation is not None
        and may_end(principal, reservation.login, frozenset(o.lower() for o in pool.owners)),
        "may_reserve": principal is not None,
        "hands": hands,
        "my_reservations": mine,
        "may_check": principal is not None and may_check_health(principal, pool),
        "duration": _job_duration,
        # The states this person may put the device in (none: no form).
        "state_choices": tuple(
            s for s in DeviceState if principal and may_set_state(principal, pool, s.value)
        ),
        **await form_context(
            request,
            principal,
            pool,
            labels=device.labels,
            admin_forms={"state"},
            approved=approved,
            error=error,
            base=f"/devices/{device.id}",
        ),
    }
    return await render(request, "device.html", context, error.status if error else 200)


@routes.get("/devices/{device_id}")
async def device_page(request: web.Request) -> web.Response:
    """The device's labels by origin, its tags and its state; forms only for what the user may change."""
    return await _device_page(request, await page_reader(request))


DEVICE = FormSubject(
    noun="device",
    prefix="/devices",
    page=_device_page,
    set_label=Editor.set_device_label,
    set_tag=Editor.set_device_tag,
    update=Editor.update_device,
)
"""The device as its page's forms edit it."""

DEVICE.add_routes(routes)


@routes.post("/devices/{device_id}/health-check")
async def check_health(request: web.Request) -> web.Response:
    """Queue the device's health check (admins and the pool's owners)."""
    posted = await PostedForm.read(request)
    device_id = request.match_info["device_id"]

    async def edit(editor: Editor) -> object:
        return await editor.check_health(device_id)

    return await DEVICE.edit_from_page(
        request,
        posted,
        edit,
        form="health-check",
        typed={},
        fields={},
        notice=f"A health check of {device_id} is queued.",
    )


_RESERVE_FIELDS: Final = {"duration_s": "for", "note": "note", "reservations": "for", "device": "for"}


@routes.post("/devices/{device_id}/reserve")
async def reserve(request: web.Request) -> web.Response:
    """Reserve this device for the signed-in person (``for``: 2h, 30m), granted as soon as it is free."""
    posted = await PostedForm.read(request)
    device_id, duration, note = request.match_info["device_id"], posted.text("for"), posted.text("note")
    settings = request.config_dict[SETTINGS]

    async def edit(editor: Editor) -> object:
        try:
            seconds = parse_duration(duration.strip())
            asked = read_request(
                {"device": device_id, "duration_s": seconds, "wait_s": MAX_WAIT_S, "note": note},
                max_s=settings.reservation_max_s,
            )
            inventory = await load_inventory(editor.session)
            made, _ = await create_reservation(
                editor.session,
                editor.principal,
                asked,
                editor.change.at,
                inventory=inventory,
                per_user=settings.reservations_per_user,
            )
        except DurationError as exc:
            raise bad_request(str(exc), field="duration_s") from None
        except RequestError as exc:
            raise bad_request(exc.message, field=exc.field) from None
        except UnmatchableError as exc:
            raise bad_request(f"it can never be reserved: {exc}", field="device") from None
        return made

    return await DEVICE.edit_from_page(
        request,
        posted,
        edit,
        form="reserve",
        typed={"for": duration, "note": note},
        fields=_RESERVE_FIELDS,
        notice=f"{device_id} is reserved for you as soon as it is free (see My reservations).",
    )


@routes.post("/devices/{device_id}/release/{reservation_id}")
async def release(request: web.Request) -> web.Response:
    """End a reservation of this device (its person, the pool's owners, admins)."""
    posted = await PostedForm.read(request)
    device_id, reservation_id = request.match_info["device_id"], request.match_info["reservation_id"]

    async def edit(editor: Editor) -> object:
        try:
            return await release_reservation(
                editor.session, reservation_id, editor.principal, editor.change.at
            )
        except UnknownReservationError:
            raise ApiError(404, "not_found", f"There is no reservation {reservation_id[:40]}.") from None
        except NotYoursError as exc:
            raise ApiError(403, "forbidden", f"{editor.principal.login} may not release it: {exc}") from None

    return await DEVICE.edit_from_page(
        request, posted, edit, form="release", typed={}, fields={"": "release"},
        notice=f"The reservation of {device_id} is released.",
    )  # fmt: skip


@routes.post("/devices/{device_id}/state")
async def set_state(request: web.Request) -> web.Response:
    """Put the device in a state with a reason (admins)."""
    posted = await PostedForm.read(request)
    device_id, state, reason = request.match_info["device_id"], posted.text("state"), posted.text("reason")
    typed = {"state": state, "reason": reason, "until": posted.text("until")}

    async def edit(editor: Editor) -> object:
        checked, checked_reason = editing.device_state(state, reason.strip())
        until = editing.state_until(posted.text("until").strip(), checked, editor.change.at)
        return await editor.set_device_state(device_id, checked, checked_reason, until)

    return await DEVICE.edit_from_page(
        request,
        posted,
        edit,
        form="state",
        typed=typed,
        fields=_STATE_FIELDS,
        notice=f"Device {device_id} is now {state}.",
    )
