"""Repository functions for pools, devices and runner hosts. They take and return core objects.

Every write goes through :func:`save_pool` / :func:`save_device` (or the create and delete functions), which
compare the stored object with the new one field by field and write one audit row per changed field. Each
pool and device carries a version: a write can demand the version it read (``If-Match``) and is refused when
someone wrote in between. Without that, writes to one row are serialised (the row is locked where the
database can) and the later one wins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, TypeVar

from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload
from sqlalchemy.orm.exc import StaleDataError

from kerrigan.core.device_status import (
    NO_NOTE,
    DeviceHealth,
    DeviceReservation,
    Health,
    HostPause,
    StateNote,
    when,
)
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Device, DeviceState, Firmware, Inventory, Pool, RunnerHost
from kerrigan.core.inventory_diff import (
    ChangeKind,
    FieldChange,
    InventoryDiff,
    device_field_changes,
    pool_field_changes,
)
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.device_health import forget_failures
from kerrigan.store.health_checks import queue_check_if_any, stored_health_check
from kerrigan.store.models import DeviceRow, PoolRow, ReservationRow, RunnerHostRow

BACK_FROM_MAINTENANCE: Final = "back from maintenance"  # why a health check is queued then


class NotFoundError(LookupError):
    """No pool, device or host has that id."""


class ConflictError(Exception):
    """The write would break a rule of the inventory: a duplicate id, a pool that still has devices."""


class StaleError(Exception):
    """The object changed since the caller read it (``If-Match`` no longer holds)."""

    def __init__(self, message: str, current_etag: str | None = None) -> None:
        super().__init__(message)
        self.current_etag = current_etag


@dataclass(frozen=True, slots=True)
class StoredPool:
    """A pool as stored, with its version and device count."""

    pool: Pool
    version: int
    devices: int
    updated_at: datetime

    @property
    def etag(self) -> str:
        """The entity tag: changes whenever the pool does."""
        return f'"pool-{self.pool.id}-v{self.version}"'


@dataclass(frozen=True, slots=True)
class StoredDevice:
    """A device as stored, with its pool (its effective labels depend on it) and both versions."""

    device: Device
    pool: Pool
    version: int
    pool_version: int
    state_changed_at: datetime
    updated_at: datetime

    @property
    def etag(self) -> str:
        """The entity tag: changes when the device or its pool (and so its effective labels) does."""
        return f'"device-{self.device.id}-v{self.version}-p{self.pool_version}"'


def check_etag(current: str, expected: str | None) -> None:
    """Raise :class:`StaleError` when the caller's ``If-Match`` does not name the current version."""
    if expected is None or expected.strip() == "*":
        return
    offered = {tag.strip() for tag in expected.split(",")}  # strong comparison: a weak W/ tag never matches
    if current not in offered:
        raise StaleError(f"changed since it was read: If-Match {expected} but it is now {current}", current)


# -- rows to core objects --------------------------------------------------------------------------


def _pool(row: PoolRow) -> Pool:
    return Pool(
        id=row.id,
        name=row.name,
        owners=tuple(row.owners),
        firmware=Firmware(row.firmware_channel, row.firmware_base_version),
        labels=dict(row.labels),
        tags=frozenset(row.tags),
        repositories=tuple(row.repositories),
        health_check=stored_health_check(row.health_check),
    )


def _check_document(check: HealthCheck | None) -> dict[str, object] | None:
    return check.as_document() if check is not None else None


def _device(row: DeviceRow, pool_id: str) -> Device:
    return Device(
        id=row.id,
        pool_id=pool_id,
        board=row.board,
        target_type=row.target_type,
        os_type=row.os_type,
        host=row.host,
        state=row.state,
        state_reason=row.state_reason,
        labels=dict(row.labels),
        tags=frozenset(row.tags),
        state_note=StateNote(row.state_reason, row.state_by, row.state_changed_at, row.state_until),
        health=DeviceHealth(_health(row.health), row.health_reason, row.health_at, row.health_job_pk),
        health_check=stored_health_check(row.health_check),
    )


def _stored_device(row: DeviceRow) -> StoredDevice:
    return StoredDevice(
        _device(row, row.pool.id),
        _pool(row.pool),
        row.version,
        row.pool.version,
        row.state_changed_at,
        row.updated_at,
    )


# -- reads -----------------------------------------------------------------------------------------


async def load_inventory(session: AsyncSession) -> Inventory:
    """The whole inventory as one snapshot for matching: pools in id order, devices by pool then id."""
    pool_rows = (await session.scalars(select(PoolRow).order_by(PoolRow.id))).all()
    pools = tuple(_pool(row) for row in pool_rows)
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
            ).where(ReservationRow.state == "active")
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
            health=_shared(healths, DeviceHealth, _health(health), health_reason, health_at, health_job),
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
        )
        for host_id, online, resources, _, paused_reason, paused_by, paused_at, paused_until in host_rows
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


def _health(text: str) -> Health:
    try:
        return Health(text)
    except ValueError:
        return Health.UNKNOWN


def _reported_vcpus(resources: object) -> int | None:
    """The allocatable vCPUs a host's agent last reported (``vcpus`` in its resources), or None."""
    value = resources.get("vcpus") if isinstance(resources, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _pool_row(session: AsyncSession, pool_id: str, *, lock: bool = False) -> PoolRow:
    query = select(PoolRow).where(PoolRow.id == pool_id)
    if lock:
        query = query.with_for_update()
    row = await session.scalar(query)
    if row is None:
        raise NotFoundError(f"no pool {pool_id!r}")
    return row


async def _device_row(session: AsyncSession, device_id: str, *, lock: bool = False) -> DeviceRow:
    query = select(DeviceRow).where(DeviceRow.id == device_id)
    if lock:
        query = query.with_for_update()
    row = await session.scalar(query)
    if row is None:
        raise NotFoundError(f"no device {device_id!r}")
    await session.refresh(row, ["pool"])
    return row


async def _device_count(session: AsyncSession, pool_pk: int) -> int:
    count = await session.scalar(
        select(func.count()).select_from(DeviceRow).where(DeviceRow.pool_pk == pool_pk)
    )
    return int(count or 0)


async def get_pool(session: AsyncSession, pool_id: str, *, lock: bool = False) -> StoredPool:
    """One pool, or :class:`NotFoundError`; ``lock`` holds the row until the transaction ends, for a
    read-modify-write that must not lose a concurrent change."""
    row = await _pool_row(session, pool_id, lock=lock)
    return StoredPool(_pool(row), row.version, await _device_count(session, row.pk), row.updated_at)


async def list_pools(session: AsyncSession) -> list[StoredPool]:
    """Every pool, in id order."""
    per_pool = await session.execute(select(DeviceRow.pool_pk, func.count()).group_by(DeviceRow.pool_pk))
    counts = dict(per_pool.all())  # dict(result) would take the Result for a mapping
    rows = (await session.scalars(select(PoolRow).order_by(PoolRow.id))).all()
    return [StoredPool(_pool(row), row.version, counts.get(row.pk, 0), row.updated_at) for row in rows]


async def get_device(session: AsyncSession, device_id: str, *, lock: bool = False) -> StoredDevice:
    """One device with its pool, or :class:`NotFoundError`; ``lock`` as for :func:`get_pool`."""
    return _stored_device(await _device_row(session, device_id, lock=lock))


async def host_devices(session: AsyncSession, host: str) -> list[StoredDevice]:
    """The devices a runner host drives, in id order."""
    rows = await session.scalars(
        select(DeviceRow)
        .where(DeviceRow.host == host)
        .options(selectinload(DeviceRow.pool))  # async sessions cannot load it lazily
        .order_by(DeviceRow.id)
    )
    return [_stored_device(row) for row in rows]


async def list_devices(session: AsyncSession, pool_id: str | None = None) -> list[StoredDevice]:
    """Every device (of one pool, if given), in id order."""
    query = select(DeviceRow, PoolRow).join(PoolRow, DeviceRow.pool_pk == PoolRow.pk).order_by(DeviceRow.id)
    if pool_id is not None:
        await _pool_row(session, pool_id)
        query = query.where(PoolRow.id == pool_id)
    rows = (await session.execute(query)).all()
    pools: dict[int, Pool] = {}
    return [
        StoredDevice(
            _device(device, pool.id),
            pools.setdefault(pool.pk, _pool(pool)),
            device.version,
            pool.version,
            device.state_changed_at,
            device.updated_at,
        )
        for device, pool in rows
    ]


# -- writes ----------------------------------------------------------------------------------------


async def _flush(session: AsyncSession, what: str) -> None:
    try:
        await session.flush()
    except IntegrityError as exc:
        raise ConflictError(f"{what} already exists") from exc
    except StaleDataError as exc:
        raise StaleError(f"{what} was changed by someone else at the same time; read it again") from exc


async def create_pool(session: AsyncSession, pool: Pool, change: Change) -> StoredPool:
    """Add a pool; :class:`ConflictError` when its id is taken."""
    if await session.scalar(select(PoolRow.pk).where(PoolRow.id == pool.id)) is not None:
        raise ConflictError(f"pool {pool.id!r} already exists")
    row = PoolRow(id=pool.id, created_at=change.at, updated_at=change.at)
    _write_pool(row, pool)
    session.add(row)
    await _flush(session, f"pool {pool.id!r}")
    await record(session, change, FieldChange(ChangeKind.ADD, "pool", pool.id, "", None, pool), pool.id)
    return StoredPool(pool, row.version, 0, row.updated_at)


def _write_pool(row: PoolRow, pool: Pool) -> None:
    row.name = pool.name
    row.owners = list(pool.owners)
    row.repositories = list(pool.repositories)
    row.firmware_channel = pool.firmware.channel
    row.firmware_base_version = pool.firmware.base_version
    row.labels = dict(sorted(pool.labels.items()))
    row.tags = sorted(pool.tags)
    row.health_check = _check_document(pool.health_check)


async def save_pool(
    session: AsyncSession, pool: Pool, change: Change, if_match: str | None = None
) -> StoredPool:
    """Make the stored pool ``pool``; one audit row per changed field. No change writes nothing."""
    row = await _pool_row(session, pool.id, lock=True)
    check_etag(f'"pool-{row.id}-v{row.version}"', if_match)
    changes = pool_field_changes(_pool(row), pool)
    if changes:
        _write_pool(row, pool)
        row.updated_at = change.at
        await _flush(session, f"pool {pool.id!r}")
        for field_change in changes:
            await record(session, change, field_change, pool.id)
    return StoredPool(_pool(row), row.version, await _device_count(session, row.pk), row.updated_at)


async def delete_pool(
    session: AsyncSession, pool_id: str, change: Change, if_match: str | None = None
) -> None:
    """Remove an empty pool; :class:`ConflictError` while devices remain in it."""
    row = await _pool_row(session, pool_id, lock=True)
    check_etag(f'"pool-{row.id}-v{row.version}"', if_match)
    devices = await _device_count(session, row.pk)
    if devices:
        raise ConflictError(f"pool {pool_id!r} still has {devices} device(s); move or delete them first")
    before = _pool(row)
    await session.delete(row)
    await _flush(session, f"pool {pool_id!r}")
    await record(session, change, FieldChange(ChangeKind.REMOVE, "pool", pool_id, "", before, None), pool_id)


async def _ensure_host(session: AsyncSession, host_id: str, at: datetime) -> None:
    if await session.scalar(select(RunnerHostRow.pk).where(RunnerHostRow.id == host_id)) is None:
        session.add(RunnerHostRow(id=host_id, online=True, created_at=at))


async def create_device(session: AsyncSession, device: Device, change: Change) -> StoredDevice:
    """Add a device to its pool; :class:`ConflictError` when its id is taken."""
    pool = await _pool_row(session, device.pool_id)
    if await session.scalar(select(DeviceRow.pk).where(DeviceRow.id == device.id)) is not None:
        raise ConflictError(f"device {device.id!r} already exists")
    row = DeviceRow(
        id=device.id, pool_pk=pool.pk, state_changed_at=change.at, created_at=change.at, updated_at=change.at
    )
    _write_device(row, device, pool.pk)
    session.add(row)
    await _flush(session, f"device {device.id!r}")
    await _ensure_host(session, device.host, change.at)
    await record(
        session, change, FieldChange(ChangeKind.ADD, "device", device.id, "", None, device), device.pool_id
    )
    return StoredDevice(device, _pool(pool), row.version, pool.version, row.state_changed_at, row.updated_at)


def _write_device(row: DeviceRow, device: Device, pool_pk: int) -> None:
    row.pool_pk = pool_pk
    row.board = device.board
    row.target_type = device.target_type
    row.os_type = device.os_type
    row.host = device.host
    row.state = DeviceState(device.state)
    row.state_reason = device.state_reason
    row.labels = dict(sorted(device.labels.items()))
    row.tags = sorted(device.tags)
    row.health_check = _check_document(device.health_check)


async def save_device(
    session: AsyncSession, device: Device, change: Change, if_match: str | None = None
) -> StoredDevice:
    """Make the stored device ``device`` (a new pool moves it); one audit row per changed field."""
    row = await _device_row(session, device.id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = _device(row, row.pool.id)
    changes = device_field_changes(before, device)
    if changes:
        pool = row.pool if device.pool_id == row.pool.id else await _pool_row(session, device.pool_id)
        if device.state != before.state:  # set by whoever made the change (an import's --actor), for good
            row.state_changed_at, row.state_by, row.state_until = change.at, change.actor, None
            if device.state is DeviceState.AVAILABLE:
                forget_failures(row, change.at)
        _write_device(row, device, pool.pk)
        row.updated_at = change.at
        await _flush(session, f"device {device.id!r}")
        await _ensure_host(session, device.host, change.at)  # after the flush: its query would autoflush
        await session.refresh(row, ["pool"])
        for field_change in changes:
            await record(session, change, field_change, device.pool_id)
        if device.state is DeviceState.AVAILABLE and before.state is DeviceState.MAINTENANCE:
            await queue_check_if_any(session, device.id, change.at, why=BACK_FROM_MAINTENANCE)
    return _stored_device(row)


async def set_state(
    session: AsyncSession,
    device_id: str,
    state: DeviceState,
    reason: str,
    *,
    until: datetime | None,
    change: Change,
    if_match: str | None = None,
) -> StoredDevice:
    """A person puts the device in ``state`` for ``reason``, until ``until`` (maintenance only; None:
    until changed again): who and since are recorded, and the audit log has a row per changed field."""
    row = await _device_row(session, device_id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = _device(row, row.pool.id)
    after = dataclasses.replace(before, state=state, state_reason=reason)
    changes = device_field_changes(before, after)
    if row.state_until != until:
        changes.append(
            FieldChange(ChangeKind.CHANGE, "device", row.id, "state_until", row.state_until, until)
        )
    if changes:
        if state is DeviceState.AVAILABLE and before.state is not DeviceState.AVAILABLE:
            forget_failures(row, change.at)
        row.state, row.state_reason, row.state_until = state, reason, until
        row.state_by, row.state_changed_at = change.actor, change.at
        row.updated_at = change.at
        await _flush(session, f"device {device_id!r}")
        for field_change in changes:
            await record(session, change, field_change, row.pool.id)
        if state is DeviceState.AVAILABLE and before.state is DeviceState.MAINTENANCE:
            await queue_check_if_any(session, device_id, change.at, why=BACK_FROM_MAINTENANCE)
    return _stored_device(row)


async def end_due_maintenance(session: AsyncSession, now: datetime) -> list[str]:
    """Devices whose maintenance ``until`` has passed are available again, in the audit log as Kerrigan's
    doing; the ids of those returned."""
    rows = (
        await session.scalars(
            select(DeviceRow)
            .where(DeviceRow.state == DeviceState.MAINTENANCE, DeviceRow.state_until <= now)
            .with_for_update()
        )
    ).all()
    change = Change(KERRIGAN_ACTOR, now)
    for row in rows:
        reason = f"maintenance until {when(row.state_until)} is over" if row.state_until else ""
        await set_state(session, row.id, DeviceState.AVAILABLE, reason, until=None, change=change)
    return [row.id for row in rows]


async def delete_device(
    session: AsyncSession, device_id: str, change: Change, if_match: str | None = None
) -> None:
    """Remove a device."""
    row = await _device_row(session, device_id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = _device(row, row.pool.id)
    await session.delete(row)
    await _flush(session, f"device {device_id!r}")
    await record(
        session, change, FieldChange(ChangeKind.REMOVE, "device", device_id, "", before, None), before.pool_id
    )


# -- whole inventories -----------------------------------------------------------------------------


async def apply_diff(session: AsyncSession, desired: Inventory, diff: InventoryDiff, change: Change) -> None:
    """Apply an inventory file's diff in the caller's transaction: hosts, pools, devices, then removals."""
    hosts = {host.id: host for host in desired.hosts}
    for host_id in diff.subjects(ChangeKind.ADD, "host"):
        session.add(RunnerHostRow(id=host_id, online=hosts[host_id].online, created_at=change.at))
        await record(session, change, FieldChange(ChangeKind.ADD, "host", host_id, "", None, hosts[host_id]))
    for host_id in diff.changed("host"):
        row = await session.scalar(select(RunnerHostRow).where(RunnerHostRow.id == host_id))
        assert row is not None
        await record(
            session,
            change,
            FieldChange(ChangeKind.CHANGE, "host", host_id, "online", row.online, hosts[host_id].online),
        )
        row.online = hosts[host_id].online
    for pool_id in diff.subjects(ChangeKind.ADD, "pool"):
        await create_pool(session, desired.pools_by_id[pool_id], change)
    for pool_id in diff.changed("pool"):
        await save_pool(session, desired.pools_by_id[pool_id], change)
    for device_id in diff.subjects(ChangeKind.ADD, "device"):
        await create_device(session, desired.devices_by_id[device_id], change)
    for device_id in diff.changed("device"):
        await save_device(session, desired.devices_by_id[device_id], change)
    for device_id in diff.subjects(ChangeKind.REMOVE, "device"):
        await delete_device(session, device_id, change)
    for pool_id in diff.subjects(ChangeKind.REMOVE, "pool"):
        await delete_pool(session, pool_id, change)
    removed_hosts: Sequence[str] = diff.subjects(ChangeKind.REMOVE, "host")
    if removed_hosts:
        await session.execute(delete(RunnerHostRow).where(RunnerHostRow.id.in_(removed_hosts)))
        for host_id in removed_hosts:
            await record(session, change, FieldChange(ChangeKind.REMOVE, "host", host_id, "", host_id, None))
    await session.flush()
