"""Reservations in the database: asked for, queued, granted a device (a lease of their own), ended.

:func:`create_reservation` checks a request against the inventory (a request no device can ever match is
refused with every reason) and queues it; the dispatcher plans waiting reservations with the jobs
(:func:`waiting_reservations`, in :mod:`kerrigan.store.queue_view`) and grants them with
:func:`grant_reservations`; :func:`end_due_reservations` ends those whose time or wait ran out, in the
dispatcher's round, so a freed device goes to the queue in that round; :func:`release_reservation` ends one
on a person's word. Every grant and release is in the audit log.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.inventory import Inventory
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.matching import Outcome, TaskResolution, resolve
from kerrigan.core.reservations import (
    DEFAULT_PER_USER,
    EndReason,
    RequestError,
    ReservationRequest,
    ReservationState,
    may_end,
    over_limit,
)
from kerrigan.core.roles import Principal
from kerrigan.store.audit import Change, record
from kerrigan.store.models import DeviceLeaseRow, DeviceRow, JobRow, PoolRow, ReservationRow
from kerrigan.store.signals import Topic, mark
from kerrigan.store.transitions import locked_session, record_version

RESERVATION_PREFIX = "reservation:"  # a reservation's id in the dispatch queue, beside jobs' row numbers


class UnmatchableError(Exception):
    """No device can ever match the request: nothing is queued; the resolution says why."""

    def __init__(self, resolution: TaskResolution) -> None:
        super().__init__(resolution.summary())
        self.resolution = resolution


class NotYoursError(Exception):
    """The principal may not end this reservation (403)."""


class UnknownReservationError(Exception):
    """No reservation has this id (404)."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """A reservation as the API answers it."""

    id: str
    login: str
    state: ReservationState
    requirements: dict[str, Any]
    device: str | None
    duration_s: int
    wait_s: int
    note: str
    created_at: datetime
    wait_until: datetime | None
    granted_at: datetime | None
    ends_at: datetime | None
    device_id: str | None
    host: str | None
    ended_at: datetime | None
    end_reason: EndReason | None
    ended_by: str | None
    pk: int = 0  # its row number: of two asked at one moment, the first stands first
    # Active: the devices-file settings its runner host reported for its person (None: not reported).
    holder_settings: dict[str, str] | None = None
    held_job_pk: int | None = None  # a hold of this failed job's board (Hold board)

    @property
    def queue_id(self) -> str:
        """Its id in the dispatch queue."""
        return RESERVATION_PREFIX + self.id


def _reservation(row: ReservationRow) -> Reservation:
    return Reservation(
        row.id,
        row.login,
        row.state,
        dict(row.requirements),
        row.device,
        row.duration_s,
        row.wait_s,
        row.note,
        row.created_at,
        row.wait_until,
        row.granted_at,
        row.ends_at,
        row.device_id,
        row.host,
        row.ended_at,
        row.end_reason,
        row.ended_by,
        row.pk,
        dict(row.holder_settings) if row.holder_settings is not None else None,
        row.held_job_pk,
    )


def _matching(request: ReservationRequest, inventory: Inventory) -> TaskResolution:
    """The request resolved as a task's requirements are, for the one device it names when it names one."""
    if request.device is None:
        return resolve(request.requirements, inventory)
    named = tuple(device for device in inventory.devices if device.id == request.device)
    if not named:
        raise RequestError("device", f"there is no device {request.device}")
    return resolve(request.requirements, replace(inventory, devices=named))


async def create_reservation(
    session: AsyncSession,
    principal: Principal,
    request: ReservationRequest,
    now: datetime,
    *,
    inventory: Inventory,
    per_user: int = DEFAULT_PER_USER,
    held_job_pk: int | None = None,
) -> tuple[Reservation, TaskResolution]:
    """Queue ``request`` for ``principal``; the reservation and how its request resolved now.

    :class:`RequestError` for an unknown device or a person over the limit, :class:`UnmatchableError` when
    no device can ever match; either way nothing is queued. ``held_job_pk``: a hold of that failed job's
    board (:mod:`kerrigan.store.holds`, which counts the hold's boards against the limit as one).
    """
    resolution = _matching(request, inventory)
    if resolution.outcome is Outcome.UNSCHEDULABLE:
        raise UnmatchableError(resolution)
    if session.get_bind().dialect.name == "postgresql":
        # One person's requests one at a time: two at once would both count below the limit.
        await session.execute(select(func.pg_advisory_xact_lock(func.hashtext(principal.login.lower()))))
    held = await held_count(session, principal.login)
    problem = over_limit(held, per_user) if held_job_pk is None else None
    if request.id is not None and await session.scalar(
        select(ReservationRow.pk).where(ReservationRow.id == request.id)
    ):
        raise RequestError("id", f"a reservation {request.id} exists already")
    if problem is not None:
        raise RequestError("reservations", problem)
    row = ReservationRow(
        id=request.id or str(uuid.uuid4()),
        login=principal.login,
        requirements=request.requirements.as_dict(),
        device=request.device,
        duration_s=request.duration_s,
        wait_s=request.wait_s,
        note=request.note,
        state=ReservationState.WAITING,
        created_at=now,
        wait_until=now + timedelta(seconds=request.waits_s),
        held_job_pk=held_job_pk,
    )
    session.add(row)
    await session.flush()
    mark(session, Topic.DISPATCH)  # the dispatcher is woken, not left to its next second
    return _reservation(row), resolution


async def hold_changed(session: AsyncSession, job_pk: int, at: datetime) -> None:
    """A hold of ``job_pk``'s board was asked for, granted or refused: its session's check run, which
    tells who holds which board, shows it anew (a job deleted since has nothing to show)."""
    session_pk = await session.scalar(select(JobRow.session_pk).where(JobRow.pk == job_pk))
    if session_pk is not None:
        record_version(session, await locked_session(session, session_pk), at)


async def held_count(session: AsyncSession, login: str) -> int:
    """How many reservations ``login`` holds or waits for, a hold of a gang job's boards counted once."""
    mine = (func.lower(ReservationRow.login) == login.lower(), ReservationRow.state != ReservationState.ENDED)
    plain = await session.scalar(
        select(func.count()).select_from(ReservationRow).where(*mine, ReservationRow.held_job_pk.is_(None))
    )
    holds = await session.scalar(select(func.count(func.distinct(ReservationRow.held_job_pk))).where(*mine))
    return int(plain or 0) + int(holds or 0)


async def waiting_reservations(session: AsyncSession) -> list[Reservation]:
    """Reservations waiting for a device, oldest first."""
    rows = await session.scalars(
        select(ReservationRow)
        .where(ReservationRow.state == ReservationState.WAITING)
        .order_by(ReservationRow.pk)
    )
    return [_reservation(row) for row in rows]


@dataclass(frozen=True, slots=True)
class ReservationGrant:
    """A device to lease to a waiting reservation, on the runner host that drives it."""

    reservation_id: str
    device_id: str
    host: str


async def grant_reservations(
    session: AsyncSession, grants: Sequence[ReservationGrant], now: datetime
) -> list[Reservation]:
    """Lease each grant's device to its reservation, if both are still free and waiting; those granted.
    The lease runs until the reservation ends."""
    granted = []
    for grant in grants:
        row = await session.scalar(
            select(ReservationRow)
            .where(ReservationRow.id == grant.reservation_id)
            .with_for_update()
            .execution_options(populate_existing=True)
        )
        if row is None or row.state != ReservationState.WAITING:
            continue
        # The round's clock was read as it began: a request committed meanwhile is granted as it arrived.
        start = max(now, row.created_at)
        ends = start + timedelta(seconds=row.duration_s)
        insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
        taken = await session.scalar(
            insert(DeviceLeaseRow)
            .values(
                device_id=grant.device_id,
                reservation_pk=row.pk,
                session_id=row.id,
                host=grant.host,
                granted_at=start,
                expires_at=ends,
            )
            .on_conflict_do_nothing()  # leased meanwhile (another replica's round): it waits on
            .returning(DeviceLeaseRow.device_id)
        )
        if taken is None:
            continue
        row.state, row.granted_at, row.ends_at = ReservationState.ACTIVE, start, ends
        row.device_id, row.host = grant.device_id, grant.host
        await _audit(
            session,
            row,
            kind=ChangeKind.ADD,
            what="granted",
            before=None,
            after=ends,
            actor=row.login,
            at=now,
        )
        if row.held_job_pk is not None:
            await hold_changed(session, row.held_job_pk, now)
        granted.append(_reservation(row))
    await session.flush()
    return granted


async def end_due_reservations(session: AsyncSession, now: datetime) -> list[Reservation]:
    """End active reservations whose time ran out (freeing their devices) and waiting ones whose wait
    did; those ended."""
    rows = (
        await session.scalars(
            select(ReservationRow)
            .where(
                ((ReservationRow.state == ReservationState.ACTIVE) & (ReservationRow.ends_at <= now))
                | ((ReservationRow.state == ReservationState.WAITING) & (ReservationRow.wait_until <= now))
            )
            .with_for_update()
            .execution_options(populate_existing=True)
        )
    ).all()
    ended = []
    for row in rows:
        reason = EndReason.EXPIRED if row.state == ReservationState.ACTIVE else EndReason.WAIT_EXPIRED
        ended.append(await _end(session, row, reason, now, by=None))
    return ended


async def _held_by_one_who_may_end(
    session: AsyncSession, reservation_id: str, principal: Principal
) -> ReservationRow:
    """The reservation's row, locked (and read afresh), when ``principal`` may end or extend it."""
    row = await session.scalar(
        select(ReservationRow)
        .where(ReservationRow.id == reservation_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None:
        raise UnknownReservationError(reservation_id)
    if not may_end(principal, row.login, await _pool_owners(session, row.device_id)):
        raise NotYoursError(f"reservation {reservation_id} is {row.login}'s")
    return row


async def release_reservation(
    session: AsyncSession, reservation_id: str, principal: Principal, now: datetime
) -> Reservation:
    """End a reservation on ``principal``'s word (the person, its device's pool owners, admins); a
    waiting one is withdrawn. Ending an ended one changes nothing."""
    row = await _held_by_one_who_may_end(session, reservation_id, principal)
    if row.state == ReservationState.ENDED:
        return _reservation(row)
    return await _end(session, row, EndReason.RELEASED, now, by=principal.login)


async def extend_reservation(
    session: AsyncSession,
    reservation_id: str,
    principal: Principal,
    extend_s: int,
    now: datetime,
    *,
    max_s: int,
    waiting: int,
) -> Reservation:
    """Give an active reservation ``extend_s`` more seconds, when ``waiting`` (the queued jobs and
    reservations its board could take) is 0 and its whole time stays within ``max_s``; the person, its
    board's pool owners and admins may. :class:`RequestError` names why not."""
    row = await _held_by_one_who_may_end(session, reservation_id, principal)
    if row.state != ReservationState.ACTIVE or row.ends_at is None or row.granted_at is None:
        raise RequestError("state", f"only an active reservation is extended; this one is {row.state}")
    if extend_s < 1:
        raise RequestError("extend_s", f"must be a positive number of seconds, not {extend_s}")
    whole = (row.ends_at - row.granted_at).total_seconds() + extend_s
    if whole > max_s:
        raise RequestError(
            "extend_s", f"would make it {int(whole)} s in all; at most {max_s} (KERRIGAN_RESERVATION_MAX_S)"
        )
    if waiting:
        raise RequestError(
            "extend_s",
            f"{waiting} queued job(s) or reservation(s) wait for {row.device_id}: release it instead",
        )
    before, row.ends_at = row.ends_at, row.ends_at + timedelta(seconds=extend_s)
    await session.execute(
        update(DeviceLeaseRow).where(DeviceLeaseRow.reservation_pk == row.pk).values(expires_at=row.ends_at)
    )
    await _audit(
        session, row, kind=ChangeKind.CHANGE, what="extended", before=before, after=row.ends_at,
        actor=principal.login, at=now,
    )  # fmt: skip
    await session.flush()
    return _reservation(row)


async def get_reservation(session: AsyncSession, reservation_id: str) -> Reservation:
    """One reservation; :class:`UnknownReservationError` when there is none."""
    row = await session.scalar(select(ReservationRow).where(ReservationRow.id == reservation_id))
    if row is None:
        raise UnknownReservationError(reservation_id)
    return _reservation(row)


async def list_reservations(
    session: AsyncSession,
    *,
    login: str | None = None,
    ended: bool = False,
    limit: int = 50,
    before: int | None = None,
) -> list[Reservation]:
    """Reservations, newest first: waiting and active ones (and ended ones with ``ended``), a person's
    with ``login``; ``before`` a row number, those asked for before it (the next page)."""
    query = select(ReservationRow).order_by(ReservationRow.pk.desc()).limit(limit)
    if before is not None:
        query = query.where(ReservationRow.pk < before)
    if not ended:
        query = query.where(ReservationRow.state != ReservationState.ENDED)
    if login is not None:
        query = query.where(func.lower(ReservationRow.login) == login.lower())
    return [_reservation(row) for row in await session.scalars(query)]


async def active_reservations(session: AsyncSession) -> dict[str, Reservation]:
    """The reservations holding devices now, by device."""
    rows = await session.scalars(
        select(ReservationRow).where(ReservationRow.state == ReservationState.ACTIVE)
    )
    return {row.device_id: _reservation(row) for row in rows if row.device_id is not None}


async def settings_wanted(session: AsyncSession, host: str) -> list[tuple[str, str]]:
    """(reservation, device) of the active reservations of ``host``'s devices whose settings it has not
    reported yet."""
    rows = await session.execute(
        select(ReservationRow.id, ReservationRow.device_id)
        .where(
            (ReservationRow.state == ReservationState.ACTIVE)
            & (ReservationRow.host == host)
            & ReservationRow.holder_settings.is_(None)
        )
        .order_by(ReservationRow.pk)
    )
    return [(reservation_id, device_id) for reservation_id, device_id in rows if device_id is not None]


async def record_holder_settings(
    session: AsyncSession, host: str, reservation_id: str, device_id: str, settings: dict[str, str]
) -> bool:
    """Keep the settings ``host`` reports for the person holding ``reservation_id`` on ``device_id``;
    False (nothing kept) unless that reservation holds that device of that host now."""
    row = await session.scalar(
        select(ReservationRow)
        .where(ReservationRow.id == reservation_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None or row.state != ReservationState.ACTIVE or (row.host, row.device_id) != (host, device_id):
        return False
    row.holder_settings = dict(settings)
    await session.flush()
    return True


async def _end(
    session: AsyncSession, row: ReservationRow, reason: EndReason, now: datetime, *, by: str | None
) -> Reservation:
    held = row.state == ReservationState.ACTIVE
    if held:
        await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.reservation_pk == row.pk))
        mark(session, Topic.DISPATCH)  # its device goes to the queue this round
    # Every end is audited: a release (the field says by whom), a withdrawal, the time or the wait run out.
    await _audit(
        session,
        row,
        kind=ChangeKind.REMOVE,
        what="released" if held else "withdrawn",
        before=row.ends_at if held else row.wait_until,
        after=reason.value,
        actor=by or "kerrigan",
        at=now,
    )
    row.state, row.ended_at, row.end_reason, row.ended_by = ReservationState.ENDED, now, reason, by
    row.holder_settings = None  # the host's private settings are kept only while its person holds it
    await session.flush()
    return _reservation(row)


async def _pool_owners(session: AsyncSession, device_id: str | None) -> frozenset[str]:
    if device_id is None:
        return frozenset()
    owners = await session.scalar(
        select(PoolRow.owners)
        .join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk)
        .where(DeviceRow.id == device_id)
    )
    return frozenset(str(owner).lower() for owner in owners or ())


async def _audit(
    session: AsyncSession,
    row: ReservationRow,
    *,
    kind: ChangeKind,
    what: str,
    before: object,
    after: object,
    actor: str,
    at: datetime,
) -> None:
    pool = await session.scalar(
        select(PoolRow.id)
        .join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk)
        .where(DeviceRow.id == row.device_id)
    )
    change = FieldChange(kind, "reservation", row.id, f"{what}:{row.device_id}", before, after)
    await record(session, Change(actor, at), change, pool)
