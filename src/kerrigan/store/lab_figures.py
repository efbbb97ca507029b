"""The lab's state in figures, read from the shared database: what ``/metrics`` reports as gauges.

Every replica reads the same database, so each reports the same figures (dashboards take ``max``, not
``sum``). :func:`read_figures` is a handful of grouped counts over indexed columns; the queue's split by
pool resolves each distinct set of requirements once and keeps the answer while the inventory is
unchanged (:class:`PoolsOfRequirements`), so a deep queue costs one pass over its rows' columns.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import Text, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import Health
from kerrigan.core.inventory import DeviceState, Inventory
from kerrigan.core.lifecycle import JobState
from kerrigan.core.matching import resolve
from kerrigan.core.reservations import ReservationState
from kerrigan.core.sessions import SessionState
from kerrigan.store.inventory import load_inventory
from kerrigan.store.models import DeviceRow, JobRow, PoolRow, ReservationRow, RunnerHostRow, SessionRow
from kerrigan.store.queue_view import requirements_of_mapping

NO_POOL = ""  # the pool label of queued jobs no device of the lab can ever take
NO_BOARD = "(no board)"  # the pool label of queued jobs that take no device (board: none); no pool's id


@dataclass(frozen=True, slots=True)
class HostFigure:
    """A runner host as the metrics show it."""

    id: str
    state: str  # online, offline or paused
    last_heartbeat_at: datetime | None


@dataclass(frozen=True, slots=True)
class LabFigures:
    """The lab's gauges at ``read_at``."""

    read_at: datetime
    queue: Mapping[str, int] = field(default_factory=dict)  # queued jobs by the pools they wait on
    devices: Mapping[tuple[str, DeviceState, Health], int] = field(
        default_factory=dict
    )  # (pool, state, health)
    hosts: tuple[HostFigure, ...] = ()
    checkruns_pending: int = 0
    checkruns_unshown_since: datetime | None = None  # the oldest version GitHub does not show yet
    reservations: Mapping[ReservationState, int] = field(default_factory=dict)  # people's, waiting and active


class PoolsOfRequirements:
    """Which pools can take a job of given requirements: resolved once per distinct requirements, and
    forgotten when the inventory changes (its devices' or pools' last change or number, or what the runner
    hosts reported of their CPUs, which decides whether a claim can ever fit)."""

    def __init__(self) -> None:
        self._fingerprint: tuple[object, ...] | None = None
        self._inventory: Inventory | None = None
        self._pools: dict[str, tuple[str, ...]] = {}

    async def pools(self, session: AsyncSession, groups: Mapping[str, int]) -> dict[str, int]:
        """Queued jobs by pool, from counts of jobs by :func:`_group_key`."""
        if not groups:
            return {}
        devices = (
            await session.execute(
                select(
                    func.count(DeviceRow.pk),
                    func.max(DeviceRow.updated_at),
                    select(func.max(PoolRow.updated_at)).scalar_subquery(),
                    select(func.count(PoolRow.pk)).scalar_subquery(),
                )
            )
        ).one()
        hosts = (await session.execute(select(RunnerHostRow.id, RunnerHostRow.resources))).all()
        fingerprint = (
            *devices,
            json.dumps(sorted((host, resources or {}) for host, resources in hosts), default=str),
        )
        if fingerprint != self._fingerprint or self._inventory is None:
            self._fingerprint, self._pools = fingerprint, {}
            self._inventory = await load_inventory(session)
        inventory = self._inventory
        # Where no pool lists repositories the repository changes nothing: one resolution serves them all.
        restricted = any(pool.repositories for pool in inventory.pools)
        keys = {key: key if restricted else _without_repository(key) for key in groups}
        missing = sorted({plain for plain in keys.values() if plain not in self._pools})
        if missing:
            # Matching a big lab takes a while per set of requirements: not on the event loop, where the
            # server answers webhooks.
            found = await asyncio.to_thread(lambda: [_eligible_pools(inventory, key) for key in missing])
            self._pools.update(zip(missing, found, strict=True))
        by_pool: Counter[str] = Counter()
        for key, count in groups.items():
            for pool in self._pools[keys[key]] or (NO_POOL,):
                by_pool[pool] += count
        return dict(by_pool)


def _without_repository(key: str) -> str:
    requirements, vcpus, _, health_check = json.loads(key)
    return json.dumps([requirements, vcpus, "", health_check])


def _group_key(requirements: str | None, vcpus: int, repository: str, health_check: bool) -> str:
    return json.dumps([requirements, vcpus, repository, health_check])


def _eligible_pools(inventory: Inventory, key: str) -> tuple[str, ...]:
    requirements, vcpus, repository, health_check = json.loads(key)
    requested = json.loads(requirements) if requirements is not None else None
    if not isinstance(requested, dict):  # none recorded (SQL NULL, or JSON null): nothing to match
        return ()
    found = resolve(
        requirements_of_mapping(requested),
        inventory,
        repository=repository if any(pool.repositories for pool in inventory.pools) else None,
        vcpus=vcpus,
        unreported_fit=True,
        health_check=health_check,
    )
    # A job waits on every device it could take once free, back from maintenance or online again: those
    # that fail no rule, or only rules that pass with time.
    return tuple(
        sorted(
            {
                device.pool_id
                for device, reasons in zip(found.devices, found.reasons, strict=True)
                if not any(reason.permanent for reason in reasons)
            }
        )
    )


async def read_figures(session: AsyncSession, now: datetime, pools: PoolsOfRequirements) -> LabFigures:
    """The lab's gauges now."""
    devices = {
        (pool, state, health): int(count)
        for pool, state, health, count in await session.execute(
            select(PoolRow.id, DeviceRow.state, DeviceRow.health, func.count(DeviceRow.pk))
            .join(PoolRow, DeviceRow.pool_pk == PoolRow.pk)
            .group_by(PoolRow.id, DeviceRow.state, DeviceRow.health)
        )
    }
    hosts = tuple(
        HostFigure(
            host,
            "paused" if paused_at is not None else "online" if online and beat is not None else "offline",
            beat,
        )
        for host, online, paused_at, beat in await session.execute(
            select(
                RunnerHostRow.id,
                RunnerHostRow.online,
                RunnerHostRow.paused_at,
                RunnerHostRow.last_heartbeat_at,
            ).order_by(RunnerHostRow.id)
        )
    )
    pending, since = (
        await session.execute(
            select(func.count(SessionRow.pk), func.min(SessionRow.unshown_since)).where(
                # Both: a writer that leaves unshown_since set once GitHub shows the newest version (an
                # older release's reconciler during a rolling upgrade) never makes a check run pending.
                SessionRow.unshown_since.is_not(None),
                SessionRow.shown_version < SessionRow.version,
            )
        )
    ).one()
    groups: Counter[str] = Counter()
    boardless = 0  # they wait on runner hosts, not on any pool's devices
    requirements_text = JobRow.requirements.cast(Text)
    checking = SessionRow.health_check_device.is_not(None)
    for requirements, vcpus, repository, health_check, no_board, count in await session.execute(
        select(
            requirements_text,
            JobRow.vcpus,
            SessionRow.repository,
            checking,
            JobRow.boardless,
            func.count(JobRow.pk),
        )
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(
            JobRow.state == JobState.QUEUED,
            SessionRow.awaiting_approval.is_(False),
            SessionRow.state != SessionState.COMPLETED,
        )
        .group_by(requirements_text, JobRow.vcpus, SessionRow.repository, checking, JobRow.boardless)
    ):
        if no_board:
            boardless += int(count)
        else:
            groups[_group_key(requirements, int(vcpus), repository, bool(health_check))] += int(count)
    queue = await pools.pools(session, groups)
    if boardless:
        queue[NO_BOARD] = boardless
    return LabFigures(
        now,
        queue=queue,
        devices=devices,
        hosts=hosts,
        checkruns_pending=int(pending),
        checkruns_unshown_since=since,
        reservations={
            state: int(count)
            for state, count in await session.execute(
                select(ReservationRow.state, func.count())
                .where(ReservationRow.state != ReservationState.ENDED)
                .group_by(ReservationRow.state)
            )
        },
    )
