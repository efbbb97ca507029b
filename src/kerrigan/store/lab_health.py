"""The lab's health at a glance (the ``/health`` page): per pool, its devices by state and health, how busy
they were and which sat idle; the bad devices and why; the health checks that ran, and those broken now.

Everything is over the last ``WINDOW`` (7 days) and read in a few grouped queries, not a query per device.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.check_verdicts import Broken, CheckEnd, broken_now
from kerrigan.core.inventory import Device
from kerrigan.core.lifecycle import JobState
from kerrigan.store.health_checks.ends import check_ends
from kerrigan.store.health_checks.queueing import stored_health_check
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import DeviceRow, JobRow, PoolRow, SessionRow

WINDOW: Final = timedelta(days=7)


@dataclass(frozen=True, slots=True)
class PoolHealth:
    """One pool over the window: its devices by state and by health, use and idle devices."""

    pool_id: str
    devices: int
    states: Counter[str]
    health: Counter[str]
    busy_s: float  # the time its devices ran jobs (a gang's job on each device it held)
    utilisation: float  # busy_s over its devices' time in the window since each joined the lab (0..1)
    idle: tuple[str, ...]  # devices that started no job in the window
    bad: tuple[Device, ...] = field(default=())

    @property
    def utilisation_shown(self) -> str:
        """As a percentage with one decimal; a little use is never shown as none (``under 0.1 %``)."""
        percent = self.utilisation * 100
        return "under 0.1 %" if 0 < percent < 0.05 else f"{percent:.1f} %"


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One health-check job of the window that ended: its device, job, state and end."""

    device_id: str
    job_pk: int
    session_id: str
    state: JobState
    finished_at: datetime


async def health_checks(session: AsyncSession, now: datetime) -> list[CheckRun]:
    """The health checks that ended in the window, newest first."""
    rows = await session.execute(
        select(SessionRow.health_check_device, JobRow.pk, SessionRow.id, JobRow.state, JobRow.finished_at)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(
            SessionRow.health_check_device.is_not(None),
            JobRow.finished_at.is_not(None),
            JobRow.finished_at >= now - WINDOW,
        )
        .order_by(JobRow.finished_at.desc(), JobRow.pk.desc())
    )
    return [
        CheckRun(str(device), int(pk), str(session_id), state, finished_at)
        for device, pk, session_id, state, finished_at in rows
        if finished_at is not None
    ]


async def lab_health(session: AsyncSession, now: datetime) -> list[PoolHealth]:
    """Every pool's health over the window ending ``now``, by pool id.

    A device's time is the window's, or the part of it since the device joined the lab (a new lab's devices
    have had an hour, not 7 days): from the later of the window's start and the earlier of its creation and
    the first job it ran (history may predate a device made again).
    """
    inventory = await load_inventory(session)
    since = now - WINDOW
    busy: dict[str, float] = {}
    first: dict[str, datetime] = {}
    started: set[str] = set()
    rows = await session.execute(
        select(JobRow.device_id, JobRow.devices, JobRow.started_at, JobRow.finished_at).where(
            JobRow.device_id.is_not(None),
            JobRow.started_at.is_not(None),
            # Jobs that overlap the window: started before its end, not ended before its start.
            JobRow.started_at <= now,
            func.coalesce(JobRow.finished_at, now) >= since,
        )
    )
    for device_id, roles, began, ended in rows:
        if began is None:  # the query asks for started jobs only
            continue
        start, end = max(began, since), min(ended or now, now)
        held = tuple(str(role["device"]) for role in roles or () if isinstance(role, dict)) or (
            str(device_id),
        )
        for ran_on in held:  # each device of a gang ran it, as kerrigan_device_busy_seconds counts it
            busy[ran_on] = busy.get(ran_on, 0.0) + max(0.0, (end - start).total_seconds())
            first[ran_on] = min(first.get(ran_on, start), start)
            if began >= since:
                started.add(ran_on)
    joined = {str(id_): at for id_, at in await session.execute(select(DeviceRow.id, DeviceRow.created_at))}
    pools = []
    for pool in inventory.pools:
        devices = [device for device in inventory.devices if device.pool_id == pool.id]
        seconds = sum(busy.get(device.id, 0.0) for device in devices)
        lab_s = 0.0
        for device in devices:
            began_at = min(joined.get(device.id, since), first.get(device.id, now))
            lab_s += max(0.0, (now - max(since, began_at)).total_seconds())
        pools.append(
            PoolHealth(
                pool.id,
                len(devices),
                Counter(device.state.value for device in devices),
                Counter(device.health.health.value for device in devices),
                seconds,
                min(1.0, seconds / lab_s) if lab_s else 0.0,
                tuple(device.id for device in devices if device.id not in started),
                tuple(device for device in devices if not device.health.eligible),
            )
        )
    return pools


@dataclass(frozen=True, slots=True)
class BrokenCheck:
    """A health check of a pool's devices that is broken now (:mod:`kerrigan.core.check_verdicts`), and
    the pool's owners, who are told."""

    pool_id: str
    owners: tuple[str, ...]
    broken: Broken


async def broken_checks(
    session: AsyncSession, now: datetime, pool_id: str | None = None
) -> list[BrokenCheck]:
    """The health checks broken now (of one pool, or of every pool), by pool and command. A check is the
    command its pool's devices run (the pool's, or a device's own): one no device runs any more (its
    command was changed, as the audit log shows) is not listed. Its "since" is at most the window old."""
    pools = (
        await session.execute(select(PoolRow.pk, PoolRow.id, PoolRow.owners, PoolRow.health_check))
    ).all()
    wanted = {
        pk: (str(id_), tuple(owners or ()), check)
        for pk, id_, owners, check in pools
        if pool_id in (None, id_)
    }
    runs: dict[int, set[str]] = {pk: set() for pk in wanted}
    for pool_pk, own in await session.execute(
        select(DeviceRow.pool_pk, DeviceRow.health_check).where(DeviceRow.pool_pk.in_(wanted))
    ):
        check = stored_health_check(own) or stored_health_check(wanted[pool_pk][2])
        if check is not None:
            runs[pool_pk].add(check.run)
    ends: dict[tuple[int, str], list[CheckEnd]] = {}
    for found in await check_ends(session, DeviceRow.pool_pk.in_(wanted), JobRow.finished_at >= now - WINDOW):
        if found.command in runs[found.pool_pk]:
            ends.setdefault((found.pool_pk, found.command), []).append(found.end)
    listed = []
    for (pool_pk, command), of_check in sorted(
        ends.items(), key=lambda item: (wanted[item[0][0]][0], item[0][1])
    ):
        broken = broken_now(command, of_check)
        if broken is not None:
            listed.append(BrokenCheck(wanted[pool_pk][0], wanted[pool_pk][1], broken))
    return listed
