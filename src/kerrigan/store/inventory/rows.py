"""Pools and devices as stored: rows read as core objects, their versions (entity tags), the lookups by
id, and the errors the inventory's functions raise."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import DeviceHealth, StateNote
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.inventory import Device, Firmware, Pool
from kerrigan.store.health_checks.queueing import stored_health_check
from kerrigan.store.models import DeviceRow, PoolRow


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


def pool_of(row: PoolRow) -> Pool:
    """The pool a row holds."""
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


def check_document(check: HealthCheck | None) -> dict[str, object] | None:
    """A health check as its column keeps it."""
    return check.as_document() if check is not None else None


def device_of(row: DeviceRow, pool_id: str) -> Device:
    """The device a row holds (``pool_id``: its pool's id)."""
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
        health=DeviceHealth(row.health, row.health_reason, row.health_at, row.health_job_pk),
        health_check=stored_health_check(row.health_check),
    )


def stored_device(row: DeviceRow) -> StoredDevice:
    """A device row (its pool loaded) as stored, with both versions."""
    return StoredDevice(
        device_of(row, row.pool.id),
        pool_of(row.pool),
        row.version,
        row.pool.version,
        row.state_changed_at,
        row.updated_at,
    )


async def pool_row(session: AsyncSession, pool_id: str, *, lock: bool = False) -> PoolRow:
    """The pool's row (``lock``: held until the transaction ends), or :class:`NotFoundError`."""
    query = select(PoolRow).where(PoolRow.id == pool_id)
    if lock:
        query = query.with_for_update()
    row = await session.scalar(query)
    if row is None:
        raise NotFoundError(f"no pool {pool_id!r}")
    return row


async def device_row(session: AsyncSession, device_id: str, *, lock: bool = False) -> DeviceRow:
    """The device's row with its pool loaded (``lock`` as for :func:`pool_row`), or :class:`NotFoundError`."""
    query = select(DeviceRow).where(DeviceRow.id == device_id)
    if lock:
        query = query.with_for_update()
    row = await session.scalar(query)
    if row is None:
        raise NotFoundError(f"no device {device_id!r}")
    await session.refresh(row, ["pool"])
    return row


async def device_count(session: AsyncSession, pool_pk: int) -> int:
    """How many devices the pool holds."""
    count = await session.scalar(
        select(func.count()).select_from(DeviceRow).where(DeviceRow.pool_pk == pool_pk)
    )
    return int(count or 0)
