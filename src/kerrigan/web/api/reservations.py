"""``/api/v1/reservations``: a board for a person (docs/reservations.md).

``POST`` queues a request (checked field by field: a 400 names the field; a request no device can ever
match is a 422 with every reason, nothing queued) and answers once the dispatcher, woken by it, has
decided: granted, the device, its runner host and its effective labels (and, to its person alone, the
settings its host's devices file shows them); else its place in the queue and what it waits on. ``GET``
lists them or shows one, ``PATCH`` extends one, ``DELETE`` releases one (the person, the device's pool
owners, admins; anyone else is a 403).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from aiohttp import web

from kerrigan.core.dispatch_order import WaitKind
from kerrigan.core.explain import resolution_json
from kerrigan.core.inventory import Inventory, effective_target_labels
from kerrigan.core.logins import is_login
from kerrigan.core.matching import resolve
from kerrigan.core.reservations import RequestError, ReservationState, read_request, whole_seconds
from kerrigan.store.inventory import load_inventory
from kerrigan.store.queue_view import QueueSnapshot, read_queue, requirements_of_mapping, waiting_for_device
from kerrigan.store.reservations import (
    NotYoursError,
    Reservation,
    UnknownReservationError,
    UnmatchableError,
    create_reservation,
    extend_reservation,
    get_reservation,
    list_reservations,
    release_reservation,
)
from kerrigan.web import bodies, short_ids
from kerrigan.web.api.cursors import binding, make_cursor, not_ours, read_cursor
from kerrigan.web.auth import signed_in
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.state import DATABASE, SETTINGS, writing

routes = web.RouteTableDef()

LIST_PARAMETERS: Final = ("limit", "cursor", "login", "ended")
DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500
DECIDED_WITHIN_S: Final = 2.0  # how long a POST waits for the dispatcher's decision before answering
POLL_S: Final = 0.05


async def reservations_json(
    request: web.Request, reservations: Sequence[Reservation], viewer: str
) -> list[dict[str, Any]]:
    """Reservations as the API answers them: granted, the device with its host and effective labels (and,
    for ``viewer``'s own, the settings its host's devices file shows them); waiting, the place in the queue
    and what it waits on. The inventory and the queue are read once for them all."""
    if not reservations:
        return []
    database = request.config_dict[DATABASE]
    async with database.sessions() as session:
        inventory = await load_inventory(session)
        snapshot = None
        if any(reservation.state is ReservationState.WAITING for reservation in reservations):
            snapshot = await read_queue(session, database.clock(), lock=False)
    return [_reservation_json(reservation, viewer, inventory, snapshot) for reservation in reservations]


async def reservation_json(request: web.Request, reservation: Reservation, viewer: str) -> dict[str, Any]:
    """One reservation as the API answers it (:func:`reservations_json`)."""
    [body] = await reservations_json(request, [reservation], viewer)
    return body


def _reservation_json(
    reservation: Reservation, viewer: str, inventory: Inventory, snapshot: QueueSnapshot | None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": reservation.id,
        "login": reservation.login,
        "state": reservation.state.value,
        "requested": reservation.requirements,
        "device_requested": reservation.device,
        "duration_s": reservation.duration_s,
        "wait_s": reservation.wait_s,
        "note": reservation.note,
        "created_at": reservation.created_at.isoformat(),
        "wait_until": reservation.wait_until.isoformat() if reservation.wait_until else None,
        "granted_at": reservation.granted_at.isoformat() if reservation.granted_at else None,
        "ends_at": reservation.ends_at.isoformat() if reservation.ends_at else None,
        "device": None,
        "position": None,
        "waiting_on": None,
        "end_reason": reservation.end_reason,
        "ended_by": reservation.ended_by,
        "held_job": reservation.held_job_pk,
    }
    if reservation.device_id is not None:
        device = inventory.devices_by_id.get(reservation.device_id)
        pool = inventory.pools_by_id.get(device.pool_id) if device is not None else None
        if device is None or pool is None:  # deleted since
            body["device"] = {"id": reservation.device_id, "host": reservation.host, "labels": {}}
        else:
            labels = effective_target_labels(device, pool)
            body["device"] = {"id": device.id, "host": device.host, "labels": labels}
    if reservation.state is ReservationState.ACTIVE and viewer.lower() == reservation.login.lower():
        # The host's private settings are its person's alone: nobody else's answer carries the field.
        body["settings"] = reservation.holder_settings
    if reservation.state is ReservationState.WAITING and snapshot is not None:
        body["position"] = snapshot.plan.position(reservation.queue_id)
        body["waiting_on"] = _waiting_on(snapshot, reservation) or _unavailable(inventory, reservation)
    return body


def _waiting_on(snapshot: QueueSnapshot, reservation: Reservation) -> str | None:
    """What a waiting reservation waits on, in words."""
    waiting = snapshot.plan.waiting.get(reservation.queue_id)
    if waiting is None:
        return "a device is free: granted on the next round"
    planned = next((job for job in snapshot.people if job.id == reservation.queue_id), None)
    devices = planned.candidates if planned is not None else ()
    shown = ", ".join(devices[:5]) + (f" and {len(devices) - 5} more" if len(devices) > 5 else "")
    if waiting.kind is WaitKind.FENCED and waiting.on:
        return f"its device is kept for job {waiting.on}, which waits longer"
    if not devices:
        return None  # none it matches can take work now: :func:`_unavailable` says why
    return f"every device it matches is busy: {shown}"


def _unavailable(inventory: Inventory, reservation: Reservation) -> str:
    """Why none of the devices a reservation matches can take it now: their reasons that pass (*not yet*),
    as matching words them: ``device reserved by hubot until 2026-12-01 12:30: UART bring-up``."""
    devices = inventory.devices
    if reservation.device is not None:
        devices = tuple(device for device in devices if device.id == reservation.device)
    resolution = resolve(
        requirements_of_mapping(reservation.requirements), replace(inventory, devices=devices)
    )
    reasons = dict.fromkeys(
        f"{verdict.id}: {reason.text}"
        for verdict in resolution.rejected
        if not verdict.never
        for reason in verdict.reasons
    )
    shown = list(reasons)[:3]
    more = f" and {len(reasons) - 3} more" if len(reasons) > 3 else ""
    return "; ".join(shown) + more if shown else "no device it matches is available now"


async def _id(request: web.Request) -> str:
    """The whole id of the reservation the path names, whole or by a unique prefix."""
    return await short_ids.reservation_id(request, request.match_info["reservation_id"])


# A request refused for what the lab holds rather than for its form, by the field the refusal names.
_STATE_ERRORS: Final = {
    "reservations": (409, "too_many"),  # the caller holds or waits for the most a person may
    "id": (409, "exists"),  # the client's id names a reservation there is already
    "device": (422, "unknown_device"),  # it names a device the lab does not have
}


@routes.post("/reservations")
async def reservations_create(request: web.Request) -> web.Response:
    """Queue a reservation: 201 with it once the dispatcher has decided (or after 2 s): granted, or waiting
    (one with ``wait_s`` 0 ends when the next rounds find no board free)."""
    principal = await signed_in(request)
    body = await bodies.json_object(
        request, ("id", "labels", "tags", "device", "duration_s", "wait_s", "note")
    )
    settings = request.config_dict[SETTINGS]
    try:
        asked = read_request(body, max_s=settings.reservation_max_s)
    except RequestError as exc:
        raise bad_request(exc.message, field=exc.field) from None
    database = request.config_dict[DATABASE]
    try:
        async with writing(request) as session:
            inventory = await load_inventory(session)
            reservation, _ = await create_reservation(
                session,
                principal,
                asked,
                database.clock(),
                inventory=inventory,
                per_user=settings.reservations_per_user,
            )
    except RequestError as exc:  # a rule the lab's state decides: the body itself was well formed
        status, code = _STATE_ERRORS.get(exc.field, (400, "invalid"))
        raise ApiError(status, code, exc.message, exc.field) from None
    except UnmatchableError as exc:
        error = {"code": "unschedulable", "message": f"no device can ever match: {exc}", "field": None}
        return web.json_response({"error": error, "resolution": resolution_json(exc.resolution)}, status=422)
    reservation = await decided(request, reservation)
    return web.json_response(await reservation_json(request, reservation, principal.login), status=201)


async def decided(request: web.Request, reservation: Reservation) -> Reservation:
    """The reservation once the dispatcher (woken by its commit) has granted it, or after a short while."""
    database = request.config_dict[DATABASE]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DECIDED_WITHIN_S
    while reservation.state is ReservationState.WAITING and loop.time() < deadline:
        await asyncio.sleep(POLL_S)
        async with database.sessions() as session:
            reservation = await get_reservation(session, reservation.id)
    return reservation


@routes.get("/reservations")
async def reservations_index(request: web.Request) -> web.Response:
    """Reservations waiting or active, newest first; ``?login=`` a person's, ``?ended=true`` ended ones
    too; ``?limit=`` and ``?cursor=`` page them."""
    principal = await signed_in(request)
    for key in request.query:
        if key not in LIST_PARAMETERS or len(request.query.getall(key)) > 1:
            known = ", ".join(LIST_PARAMETERS)
            raise bad_request(f"unknown or repeated parameter {key!r}; expected {known}", field=key)
    text = request.query.get("limit", str(DEFAULT_LIMIT))
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_LIMIT):
        raise bad_request(f"limit must be a whole number from 1 to {MAX_LIMIT}", field="limit")
    limit = int(text)
    ended = request.query.get("ended", "false")
    if ended not in ("true", "false"):
        raise bad_request("ended must be true or false", field="ended")
    login = request.query.get("login")
    if login is not None and not is_login(login):
        raise bad_request("login must be a GitHub login", field="login")
    bound = binding("reservations", {"ended": ended, "login": (login or "").lower()})
    before = None
    if "cursor" in request.query:
        place = read_cursor(request.query["cursor"], bound).get("p")
        if isinstance(place, bool) or not isinstance(place, int) or not 0 < place < 2**63:
            raise not_ours()
        before = place
    async with request.config_dict[DATABASE].sessions() as session:
        found = await list_reservations(
            session, login=login, ended=ended == "true", limit=limit + 1, before=before
        )
    page = found[:limit]
    cursor = make_cursor(bound, {"p": page[-1].pk}) if len(found) > limit else None
    items = await reservations_json(request, page, principal.login)
    return web.json_response({"items": items, "next_cursor": cursor})


@routes.get("/reservations/{reservation_id}")
async def reservations_show(request: web.Request) -> web.Response:
    """One reservation."""
    principal = await signed_in(request)
    reservation_id = await _id(request)
    async with request.config_dict[DATABASE].sessions() as session:
        try:
            reservation = await get_reservation(session, reservation_id)
        except UnknownReservationError:
            raise ApiError(404, "not_found", f"There is no reservation {reservation_id}.") from None
    return web.json_response(await reservation_json(request, reservation, principal.login))


@routes.patch("/reservations/{reservation_id}")
async def reservations_extend(request: web.Request) -> web.Response:
    """Extend an active reservation by ``{"extend_s": N}``, while nobody waits for its board: 200 with it;
    400 naming the field when it may not be (over the limit, someone waits, not active)."""
    principal = await signed_in(request)
    reservation_id = await _id(request)
    body = await bodies.json_object(request, ("extend_s",))
    try:
        extend = whole_seconds(bodies.required(body, "extend_s"), "extend_s")
    except RequestError as exc:
        raise bad_request(exc.message, field=exc.field) from None
    database = request.config_dict[DATABASE]
    try:
        async with writing(request) as session:
            held = await get_reservation(session, reservation_id)
            waiting = await waiting_for_device(session, held.device_id) if held.device_id else 0
            reservation = await extend_reservation(
                session,
                reservation_id,
                principal,
                extend,
                database.clock(),
                max_s=request.config_dict[SETTINGS].reservation_max_s,
                waiting=waiting,
            )
    except UnknownReservationError:
        raise ApiError(404, "not_found", f"There is no reservation {reservation_id}.") from None
    except NotYoursError as exc:
        raise ApiError(403, "forbidden", f"{principal.login} may not extend it: {exc}") from None
    except RequestError as exc:
        if exc.field == "state":  # it has ended or still waits: the request was well formed
            raise ApiError(409, "not_active", exc.message, exc.field) from None
        raise bad_request(exc.message, field=exc.field) from None
    return web.json_response(await reservation_json(request, reservation, principal.login))


@routes.delete("/reservations/{reservation_id}")
async def reservations_release(request: web.Request) -> web.Response:
    """Release a reservation (withdraw a waiting one): 200 with it, ended."""
    principal = await signed_in(request)
    reservation_id = await _id(request)
    database = request.config_dict[DATABASE]
    try:
        async with writing(request) as session:
            reservation = await release_reservation(session, reservation_id, principal, database.clock())
    except UnknownReservationError:
        raise ApiError(404, "not_found", f"There is no reservation {reservation_id}.") from None
    except NotYoursError as exc:
        raise ApiError(
            403, "forbidden", f"{principal.login} may not release it: {exc} (its person, pool owners, admins)"
        ) from None
    return web.json_response(await reservation_json(request, reservation, principal.login))
