"""A device's health as Kerrigan learns it from the jobs that end on it.

A device with a health check (:mod:`kerrigan.store.health_checks`) that fails a job for the infrastructure
gets its check queued: the check, not the count, says whether it is bad. Without one, a device that fails
its jobs for the infrastructure three times in a row (``runner_lost``, ``source_unavailable``, exit status
75, ...) is set ``bad`` and leaves every eligible set until a person puts it back: setting it ``available``
(from maintenance, say) makes its health ``unknown`` again. A job that passes, or fails its test, resets the
count: the device worked. A cancel or a timeout says nothing about the device.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import INFRASTRUCTURE_FAILURES_FOR_BAD, Health
from kerrigan.core.flaky import Suspect
from kerrigan.core.lifecycle import FailureClass, JobState
from kerrigan.store.health_checks import queue_check_if_any
from kerrigan.store.models import DeviceRow
from kerrigan.store.signals import Topic, mark


async def count_outcome(
    session: AsyncSession,
    device_id: str,
    state: JobState,
    klass: FailureClass | None,
    *,
    job_pk: int,
    reason: str | None,
    at: datetime,
) -> None:
    """A job that held ``device_id`` ended in ``state`` (its failure class ``klass``): count it."""
    if state is JobState.SUCCEEDED or klass is FailureClass.TEST:
        worked = True
    elif klass is FailureClass.INFRASTRUCTURE:
        worked = False
    else:
        return
    row = await session.scalar(select(DeviceRow).where(DeviceRow.id == device_id).with_for_update())
    if row is None:
        return
    if worked:
        row.infrastructure_failures = 0
        return
    if await queue_check_if_any(session, device_id, at, why=f"infrastructure failure (job {job_pk})"):
        return  # its check decides, not the count
    row.infrastructure_failures += 1
    if row.infrastructure_failures >= INFRASTRUCTURE_FAILURES_FOR_BAD and row.health != Health.BAD:
        row.health = Health.BAD.value
        row.health_reason = (
            f"{row.infrastructure_failures} infrastructure failures in a row (the last {reason or 'failed'})"
        )
        row.health_at = at
        row.health_job_pk = job_pk
        mark(session, Topic.DISPATCH)


def forget_failures(row: DeviceRow, at: datetime) -> None:
    """A person put the device back (available): what its failures made ``bad`` is ``unknown`` again."""
    row.infrastructure_failures = 0
    if row.health == Health.BAD and row.health_job_pk is not None:
        row.health, row.health_reason, row.health_at = Health.UNKNOWN.value, "put back by a person", at


async def quarantine(session: AsyncSession, suspects: Iterable[Suspect], at: datetime) -> list[str]:
    """``KERRIGAN_QUARANTINE=suspect``: each suspect device not bad yet is set bad with its numbers, and
    takes no job until a person puts it back; the ids of those set."""
    found: dict[str, Suspect] = {}
    for suspect in suspects:
        found.setdefault(suspect.device, suspect)
    if not found:
        return []
    rows = (
        await session.scalars(
            select(DeviceRow).where(DeviceRow.id.in_(found), DeviceRow.health != Health.BAD).with_for_update()
        )
    ).all()
    for row in rows:
        row.health, row.health_reason, row.health_at = (
            Health.BAD.value,
            f"suspect: {found[row.id].sentence()}",
            at,
        )
        row.health_job_pk = None
    if rows:
        mark(session, Topic.DISPATCH)
    return [row.id for row in rows]
