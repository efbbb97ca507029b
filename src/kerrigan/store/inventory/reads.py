"""Reading pools and devices one at a time or as lists, with their versions."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import selectinload

from kerrigan.core.inventory import Pool
from kerrigan.store.inventory.rows import (
    StoredDevice,
    StoredPool,
    device_count,
    device_of,
    device_row,
    pool_of,
    pool_row,
    stored_device,
)
from kerrigan.store.models import DeviceRow, PoolRow


async def get_pool(session: AsyncSession, pool_id: str, *, lock: bool = False) -> StoredPool:
    """One pool, or :class:`NotFoundError`; ``lock`` holds the row until the transaction ends, for a
    read-modify-write that must not lose a concurrent change."""
    row = await pool_row(session, pool_id, lock=lock)
    return StoredPool(pool_of(row), row.version, await device_count(session, row.pk), row.updated_at)


async def list_pools(session: AsyncSession) -> list[StoredPool]:
    """Every pool, in id order."""
    per_pool = await session.execute(select(DeviceRow.pool_pk, func.count()).group_by(DeviceRow.pool_pk))
    counts = dict(per_pool.all())  # dict(result) would take the Result for a mapping
    rows = (await session.scalars(select(PoolRow).order_by(PoolRow.id))).all()
    return [StoredPool(pool_of(row), row.version, counts.get(row.pk, 0), row.updated_at) for row in rows]


async def pool_owners(session: AsyncSession) -> frozenset[str]:
    """The owners of every pool, lower-cased (GitHub logins ignore case)."""
    lists = (await session.scalars(select(PoolRow.owners))).all()
    return frozenset(str(login).lower() for owners in lists for login in owners or ())


async def get_device(session: AsyncSession, device_id: str, *, lock: bool = False) -> StoredDevice:
    """One device with its pool, or :class:`NotFoundError`; ``lock`` as for :func:`get_pool`."""
    return stored_device(await device_row(session, device_id, lock=lock))


async def host_devices(session: AsyncSession, host: str) -> list[StoredDevice]:
    """The devices a runner host drives, in id order."""
    rows = await session.scalars(
        select(DeviceRow)
        .where(DeviceRow.host == host)
        .options(selectinload(DeviceRow.pool))  # async sessions cannot load it lazily
        .order_by(DeviceRow.id)
    )
    return [stored_device(row) for row in rows]


async def list_devices(session: AsyncSession, pool_id: str | None = None) -> list[StoredDevice]:
    """Every device (of one pool, if given), in id order."""
    query = select(DeviceRow, PoolRow).join(PoolRow, DeviceRow.pool_pk == PoolRow.pk).order_by(DeviceRow.id)
    if pool_id is not None:
        await pool_row(session, pool_id)
        query = query.where(PoolRow.id == pool_id)
    rows = (await session.execute(query)).all()
    pools: dict[int, Pool] = {}
    return [
        StoredDevice(
            device_of(device, pool.id),
            pools.setdefault(pool.pk, pool_of(pool)),
            device.version,
            pool.version,
            device.state_changed_at,
            device.updated_at,
        )
        for device, pool in rows
    ]
