"""The whole inventory as one snapshot for matching: pools, devices with their notes, health, presence and
reservations, and runner hosts, read in a few queries."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import NO_NOTE, DeviceHealth, DeviceReservation, HostPause, StateNote
from kerrigan.core.inventory import Device, DeviceState, Inventory, RunnerHost
from kerrigan.core.reservations import ReservationState
from kerrigan.store.health_checks.queueing import stored_health_check
from kerrigan.store.inventory.rows import pool_of
from kerrigan.store.models import DeviceRow, PoolRow, ReservationRow, RunnerHostRow


async def load_inventory(session: AsyncSession) -> Inventory:
    """The whole inventory as one snapshot for matching: pools in id order, devices by pool then id."""
    pool_rows = (await session.scalars(select(PoolRow).order_by(PoolRow.id))).all()
    pools = tuple(pool_of(row) for row in pool_rows)
    host_rows = (
        await session.execute(
            select(
                RunnerHostRow.id,
                RunnerHostRow.online,
                RunnerHostRow.resources,
                RunnerHostRow.device_states,
                RunnerHostRow.paused_reason,
                RunnerHostRow.paused_by,
                RunnerHostRow.paused_at,
                RunnerHostRow.paused_until,
                RunnerHostRow.last_heartbeat_at,
            ).order_by(RunnerHostRow.id)
        )
    ).all()
    # What each host's agent last reported it could not find (missing, or its check failed): absent. Only
    # a device's own host speaks for it (a host's file naming another host's device says nothing of it).
    absent = {
        (row.id, device_id)
        for row in host_rows
        if isinstance(row.device_states, dict)
        for device_id, presence in row.device_states.items()
        if presence in ABSENT
    }
    device_rows = await session.execute(
        select(
            DeviceRow.id,
            PoolRow.id,
            DeviceRow.board,
            DeviceRow.target_type,
            DeviceRow.os_type,
            DeviceRow.host,
            DeviceRow.state,
            DeviceRow.state_reason,
            DeviceRow.labels,
            DeviceRow.tags,
            DeviceRow.state_by,
            DeviceRow.state_changed_at,
            DeviceRow.state_until,
            DeviceRow.health,
            DeviceRow.health_reason,
            DeviceRow.health_at,
            DeviceRow.health_job_pk,
            DeviceRow.health_check,
        )
        .join(PoolRow, DeviceRow.pool_pk == PoolRow.pk)
        .order_by(PoolRow.id, DeviceRow.id)
    )
    # People's reservations holding devices: a reason (not yet) of those devices for everyone else.
    reserved = {
        device_id: DeviceReservation(login, ends_at, note)
        for device_id, login, ends_at, note in await session.execute(
            select(
                ReservationRow.device_id, ReservationRow.login, ReservationRow.ends_at, ReservationRow.note
            ).where(ReservationRow.state == ReservationState.ACTIVE)
        )
        if device_id is not None and ends_at is not None
    }
    notes: dict[tuple[object, ...], StateNote] = {}  # most devices share one: no note, or the import's
    healths: dict[tuple[object, ...], DeviceHealth] = {}
    devices = tuple(
        Device(
            device_id,
            pool_id,
            board,
            target_type,
            os_type,
            host,
            state,
            reason,
            labels,
            frozenset(tags),
            # An available device's note says nothing: shared, so its state column stays one value.
            state_note=NO_NOTE
            if state == DeviceState.AVAILABLE
            else _shared(notes, StateNote, reason, by, since, until),
            health=_shared(healths, DeviceHealth, health, health_reason, health_at, health_job),
            present=(host, device_id) not in absent,
            health_check=stored_health_check(check) if check is not None else None,
            reserved=reserved.get(device_id),
        )
        for (
            device_id,
            pool_id,
            board,
            target_type,
            os_type,
            host,
            state,
            reason,
            labels,
            tags,
            by,
            since,
            until,
            health,
            health_reason,
            health_at,
            health_job,
            check,
        ) in device_rows
    )
    hosts = tuple(
        RunnerHost(
            host_id,
            online,
            _reported_vcpus(resources),
            HostPause(paused_reason or "", paused_by or "", paused_at, paused_until)
            if paused_at is not None
            else None,
            heard=heartbeat is not None,
        )
        for (
            host_id,
            online,
            resources,
            _,
            paused_reason,
            paused_by,
            paused_at,
            paused_until,
            heartbeat,
        ) in host_rows
    )
    return Inventory(pools, devices, hosts)


T = TypeVar("T")
ABSENT: Final = frozenset({"missing", "error"})  # a device state an agent reports for a device not there


def _shared(made: dict[tuple[object, ...], T], kind: Callable[..., T], *fields: object) -> T:
    """One object for every device with the same fields (matching encodes them as columns)."""
    found = made.get(fields)
    if found is None:
        found = made[fields] = kind(*fields)
    return found


def _reported_vcpus(resources: object) -> int | None:
    """The allocatable vCPUs a host's agent last reported (``vcpus`` in its resources), or None."""
    value = resources.get("vcpus") if isinstance(resources, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None
