"""Writing pools and devices: create, save (one audit row per changed field), delete, a person's change of
a device's state, the end of maintenance that is due, and an inventory file's whole diff."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm.exc import StaleDataError

from kerrigan.core.device_status import when
from kerrigan.core.inventory import Device, DeviceState, Inventory, Pool
from kerrigan.core.inventory_diff import (
    ChangeKind,
    FieldChange,
    InventoryDiff,
    device_field_changes,
    pool_field_changes,
)
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.device_health import forget_failures
from kerrigan.store.health_checks.queueing import queue_check_if_any
from kerrigan.store.inventory.rows import (
    ConflictError,
    StaleError,
    StoredDevice,
    StoredPool,
    check_document,
    check_etag,
    device_count,
    device_of,
    device_row,
    pool_of,
    pool_row,
    stored_device,
)
from kerrigan.store.models import DeviceRow, PoolRow, RunnerHostRow

BACK_FROM_MAINTENANCE: Final = "back from maintenance"  # why a health check is queued then


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
    row.health_check = check_document(pool.health_check)


async def save_pool(
    session: AsyncSession, pool: Pool, change: Change, if_match: str | None = None
) -> StoredPool:
    """Make the stored pool ``pool``; one audit row per changed field. No change writes nothing."""
    row = await pool_row(session, pool.id, lock=True)
    check_etag(f'"pool-{row.id}-v{row.version}"', if_match)
    changes = pool_field_changes(pool_of(row), pool)
    if changes:
        _write_pool(row, pool)
        row.updated_at = change.at
        await _flush(session, f"pool {pool.id!r}")
        for field_change in changes:
            await record(session, change, field_change, pool.id)
    return StoredPool(pool_of(row), row.version, await device_count(session, row.pk), row.updated_at)


async def delete_pool(
    session: AsyncSession, pool_id: str, change: Change, if_match: str | None = None
) -> None:
    """Remove an empty pool; :class:`ConflictError` while devices remain in it."""
    row = await pool_row(session, pool_id, lock=True)
    check_etag(f'"pool-{row.id}-v{row.version}"', if_match)
    devices = await device_count(session, row.pk)
    if devices:
        raise ConflictError(f"pool {pool_id!r} still has {devices} device(s); move or delete them first")
    before = pool_of(row)
    await session.delete(row)
    await _flush(session, f"pool {pool_id!r}")
    await record(session, change, FieldChange(ChangeKind.REMOVE, "pool", pool_id, "", before, None), pool_id)


async def _ensure_host(session: AsyncSession, host_id: str, at: datetime) -> None:
    if await session.scalar(select(RunnerHostRow.pk).where(RunnerHostRow.id == host_id)) is None:
        session.add(RunnerHostRow(id=host_id, online=True, created_at=at))


async def create_device(session: AsyncSession, device: Device, change: Change) -> StoredDevice:
    """Add a device to its pool; :class:`ConflictError` when its id is taken."""
    pool = await pool_row(session, device.pool_id)
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
    return StoredDevice(
        device, pool_of(pool), row.version, pool.version, row.state_changed_at, row.updated_at
    )


def _write_device(row: DeviceRow, device: Device, pool_pk: int) -> None:
    row.pool_pk = pool_pk
    row.board = device.board
    row.target_type = device.target_type
    row.os_type = device.os_type
    row.host = device.host
    row.state = DeviceState(device.state)
    row.state_reason = device.state_reason
    row.state_until = device.state_until  # a maintenance's end (an inventory file's state_until)
    row.labels = dict(sorted(device.labels.items()))
    row.tags = sorted(device.tags)
    row.health_check = check_document(device.health_check)


async def save_device(
    session: AsyncSession, device: Device, change: Change, if_match: str | None = None
) -> StoredDevice:
    """Make the stored device ``device`` (a new pool moves it); one audit row per changed field."""
    row = await device_row(session, device.id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = device_of(row, row.pool.id)
    changes = device_field_changes(before, device)
    if changes:
        pool = row.pool if device.pool_id == row.pool.id else await pool_row(session, device.pool_id)
        if device.state != before.state:  # set by whoever made the change (an import's --actor), for good
            row.state_changed_at, row.state_by = change.at, change.actor
            if device.state is DeviceState.AVAILABLE:
                await forget_failures(session, row, change)
        _write_device(row, device, pool.pk)
        row.updated_at = change.at
        await _flush(session, f"device {device.id!r}")
        await _ensure_host(session, device.host, change.at)  # after the flush: its query would autoflush
        await session.refresh(row, ["pool"])
        for field_change in changes:
            await record(session, change, field_change, device.pool_id)
        if device.state is DeviceState.AVAILABLE and before.state is DeviceState.MAINTENANCE:
            await queue_check_if_any(session, device.id, change.at, why=BACK_FROM_MAINTENANCE)
    return stored_device(row)


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
    row = await device_row(session, device_id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = device_of(row, row.pool.id)
    after = dataclasses.replace(before, state=state, state_reason=reason)
    changes = device_field_changes(before, after)
    if row.state_until != until:
        changes.append(
            FieldChange(ChangeKind.CHANGE, "device", row.id, "state_until", row.state_until, until)
        )
    if changes:
        if state is DeviceState.AVAILABLE and before.state is not DeviceState.AVAILABLE:
            await forget_failures(session, row, change)
        row.state, row.state_reason, row.state_until = state, reason, until
        row.state_by, row.state_changed_at = change.actor, change.at
        row.updated_at = change.at
        await _flush(session, f"device {device_id!r}")
        for field_change in changes:
            await record(session, change, field_change, row.pool.id)
        if state is DeviceState.AVAILABLE and before.state is DeviceState.MAINTENANCE:
            await queue_check_if_any(session, device_id, change.at, why=BACK_FROM_MAINTENANCE)
    return stored_device(row)


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
    row = await device_row(session, device_id, lock=True)
    check_etag(f'"device-{row.id}-v{row.version}-p{row.pool.version}"', if_match)
    before = device_of(row, row.pool.id)
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
