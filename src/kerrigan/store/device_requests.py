"""A person's requests of a device's power in the database (:mod:`kerrigan.core.device_power`).

:func:`ask_power` stores one ``waiting`` (and wakes the long polls); the device's host takes it in its poll
(:func:`take_requests`: ``sent``); its agent's answer ends it ``done`` or ``failed`` (:func:`answer`), or
the API, tired of waiting, ``expired`` (:func:`expire`). Every end is in the audit log: who, which device,
the action and its outcome (subject ``device``, field ``power``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, func, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_power import (
    ANSWER_WITHIN_S,
    MAX_MESSAGE,
    PENDING,
    Holder,
    PowerAction,
    PowerFailure,
    PowerState,
    RequestState,
    outcome_text,
    refusal_when_taken,
)
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.reservations import ReservationState
from kerrigan.store.audit import Change, record
from kerrigan.store.models import DeviceLeaseRow, DeviceRequestRow, DeviceRow, PoolRow, ReservationRow
from kerrigan.store.signals import Topic, mark


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request as stored."""

    id: str
    device_id: str
    host: str
    login: str
    action: PowerAction
    state: RequestState
    power: PowerState | None
    failure: PowerFailure | None
    message: str


@dataclass(frozen=True, slots=True)
class PowerAnswer:
    """An agent's answer: the power state it read, or why it could not do it."""

    power: PowerState | None
    failure: PowerFailure | None = None
    message: str = ""


@dataclass(frozen=True, slots=True)
class PowerReading:
    """The last thing a device's agent said of its power, and when: the state its switch read after an
    action, or (``power`` None) that its devices file gives it no power wiring."""

    power: PowerState | None
    at: datetime


def _request(row: DeviceRequestRow) -> DeviceRequest:
    return DeviceRequest(
        row.id, row.device_id, row.host, row.login, row.action, row.state, row.power, row.failure, row.message
    )


async def device_holder(session: AsyncSession, device_id: str, now: datetime) -> Holder:
    """Who holds ``device_id`` at ``now``: the login of the reservation whose lease it is (only while that
    reservation is active and not past its end: a dispatcher late to end it grants nothing more), or the
    job's id."""
    found = (
        await session.execute(
            select(DeviceLeaseRow.job_pk, ReservationRow.login, ReservationRow.state, ReservationRow.ends_at)
            .outerjoin(ReservationRow, ReservationRow.pk == DeviceLeaseRow.reservation_pk)
            .where(DeviceLeaseRow.device_id == device_id)
        )
    ).first()
    if found is None:
        return Holder()
    job, login, state, ends_at = found
    if login is not None and (state != ReservationState.ACTIVE or (ends_at is not None and ends_at <= now)):
        return Holder()  # its reservation is over: the person holds it no more
    return Holder(login=login, job=job)


async def last_power_reading(session: AsyncSession, device_id: str) -> PowerReading | None:
    """What ``device_id``'s agent last said of its power (None: it never did): the newest request it
    answered with a state, or with ``no_power``; switches that failed or expired say nothing of it."""
    row = (
        await session.execute(
            select(DeviceRequestRow.power, DeviceRequestRow.answered_at)
            .where(
                DeviceRequestRow.device_id == device_id,
                DeviceRequestRow.answered_at.is_not(None),
                or_(
                    and_(DeviceRequestRow.state == RequestState.DONE, DeviceRequestRow.power.is_not(None)),
                    and_(
                        DeviceRequestRow.state == RequestState.FAILED,
                        DeviceRequestRow.failure == PowerFailure.NO_POWER,
                    ),
                ),
            )
            .order_by(DeviceRequestRow.answered_at.desc(), DeviceRequestRow.pk.desc())
            .limit(1)
        )
    ).first()
    if row is None or row.answered_at is None:
        return None
    return PowerReading(row.power, row.answered_at)


async def ask_power(
    session: AsyncSession, device_id: str, host: str, *, login: str, action: PowerAction, now: datetime
) -> str:
    """Store ``login``'s request of ``action`` on ``device_id`` for ``host``'s agent; its id."""
    request_id = str(uuid.uuid4())
    session.add(
        DeviceRequestRow(
            id=request_id,
            device_id=device_id,
            host=host,
            login=login,
            action=action,
            state=RequestState.WAITING,
            created_at=now,
            message="",
        )
    )
    await session.flush()
    mark(session, Topic.RUNNER_REQUESTS)  # the host's waiting poll hands it over at once
    return request_id


def _fresh(now: datetime) -> datetime:
    """Requests made before this are no longer waited for: not handed to an agent."""
    return now - timedelta(seconds=ANSWER_WITHIN_S)


async def requests_waiting(session: AsyncSession, host: str, now: datetime) -> bool:
    """Whether ``host`` has a request its agent has not been handed."""
    found = await session.scalar(
        select(DeviceRequestRow.pk)
        .where(
            DeviceRequestRow.host == host,
            DeviceRequestRow.state == RequestState.WAITING,
            DeviceRequestRow.created_at > _fresh(now),
        )
        .limit(1)
    )
    return found is not None


async def pending_of(session: AsyncSession, login: str, now: datetime) -> int:
    """How many of ``login``'s requests (any case of it) still wait for an answer, not yet expired."""
    found = await session.scalar(
        select(func.count())
        .select_from(DeviceRequestRow)
        .where(
            func.lower(DeviceRequestRow.login) == login.lower(),
            DeviceRequestRow.state.in_(PENDING),
            DeviceRequestRow.created_at > _fresh(now),
        )
    )
    return int(found or 0)


async def take_requests(
    session: AsyncSession, host: str, now: datetime, admins: frozenset[str] = frozenset()
) -> list[DeviceRequest]:
    """``host``'s waiting requests, oldest first, now ``sent``: each is handed to one poll only. Who may is
    checked again first (``admins``: the System Admins' logins, lower case): a request whose person no
    longer holds the device, or whose device a job took meanwhile, ends ``failed`` here, audited, and never
    reaches the agent."""
    rows = await session.scalars(
        select(DeviceRequestRow)
        .where(
            DeviceRequestRow.host == host,
            DeviceRequestRow.state == RequestState.WAITING,
            DeviceRequestRow.created_at > _fresh(now),
        )
        .order_by(DeviceRequestRow.pk)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    taken = []
    for row in rows.all():
        holder = await device_holder(session, row.device_id, now)
        refused = refusal_when_taken(row.login, row.login.lower() in admins, row.device_id, holder)
        if refused is not None:
            row.state, row.answered_at = RequestState.FAILED, now
            row.failure, row.message = refused[0], refused[1][:MAX_MESSAGE]
            await _audit(session, row, now)
            continue
        row.state, row.sent_at = RequestState.SENT, now
        taken.append(_request(row))
    await session.flush()
    return taken


async def get_request(session: AsyncSession, request_id: str) -> DeviceRequest | None:
    """One request, or None."""
    row = await session.scalar(select(DeviceRequestRow).where(DeviceRequestRow.id == request_id))
    return _request(row) if row is not None else None


async def _pending_row(session: AsyncSession, request_id: str) -> DeviceRequestRow | None:
    row = await session.scalar(
        select(DeviceRequestRow)
        .where(DeviceRequestRow.id == request_id)
        .with_for_update()
        .execution_options(populate_existing=True)
    )
    return row if row is not None and row.state in PENDING else None


async def answer(
    session: AsyncSession, host: str, request_id: str, answered: PowerAnswer, now: datetime
) -> bool:
    """End ``host``'s request with its agent's answer, audited; False (nothing changed) unless it is that
    host's and still waits for one."""
    row = await _pending_row(session, request_id)
    if row is None or row.host != host:
        return False
    row.state = RequestState.FAILED if answered.failure is not None else RequestState.DONE
    row.power, row.failure = answered.power, answered.failure
    row.message, row.answered_at = answered.message[:MAX_MESSAGE], now
    await _audit(session, row, now)
    return True


async def expire(session: AsyncSession, request_id: str, now: datetime) -> DeviceRequest | None:
    """End a request no answer came for, audited; None when it had ended meanwhile."""
    row = await _pending_row(session, request_id)
    if row is None:
        return None
    row.state, row.answered_at = RequestState.EXPIRED, now
    await _audit(session, row, now)
    return _request(row)


async def _audit(session: AsyncSession, row: DeviceRequestRow, now: datetime) -> None:
    pool = await session.scalar(
        select(PoolRow.id)
        .join(DeviceRow, DeviceRow.pool_pk == PoolRow.pk)
        .where(DeviceRow.id == row.device_id)
    )
    outcome = outcome_text(row.state, row.power, row.message)
    change = FieldChange(ChangeKind.CHANGE, "device", row.device_id, "power", row.action.value, outcome)
    await record(session, Change(row.login, now), change, pool)
    await session.flush()
