"""A device's health as Kerrigan learns it from the jobs that end on it.

A device with a health check (:mod:`kerrigan.store.health_checks`) that fails a job for the infrastructure
gets its check queued: the check, not the count, says whether it is bad. Without one, a device that fails
its jobs for the infrastructure three times in a row (``runner_lost``, ``source_unavailable``, exit status
75, ...) is set ``bad`` and leaves every eligible set until a person puts it back: setting it ``available``
(from maintenance, say) makes its health ``unknown`` again. A job that passes, or fails its test, resets the
count: the device worked. A cancel or a timeout says nothing about the device. A device whose board the
agent powered off at the failure gets a recovery (:mod:`kerrigan.store.health_checks.recoveries`), which
decides instead of the count. A suspect device (:mod:`kerrigan.store.suspects`) gets its health check too,
and with ``KERRIGAN_QUARANTINE=suspect`` is set bad until the check passes or a person puts it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import INFRASTRUCTURE_FAILURES_FOR_BAD, Health
from kerrigan.core.flaky import Suspect
from kerrigan.core.lifecycle import FailureClass, JobState, power_unanswered
from kerrigan.store.audit import Change
from kerrigan.store.health_checks.ends import set_health
from kerrigan.store.health_checks.queueing import pending_check, queue_check_if_any
from kerrigan.store.models import DeviceRow, JobRow
from kerrigan.store.signals import Topic, mark

SUSPECT_FAILURES = ("failed", "retried", "timed_out")  # what store.suspects counts as a failed run


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
    """A job that held ``device_id`` ended in ``state`` (its failure class ``klass``): count it. A power
    that did not answer says nothing of the board (its PDU's outage; the board's recovery waits for it)."""
    if state is JobState.SUCCEEDED or klass is FailureClass.TEST:
        worked = True
    elif klass is FailureClass.INFRASTRUCTURE and not power_unanswered(reason):
        worked = False
    else:
        return
    row = await session.scalar(
        select(DeviceRow).where(DeviceRow.id == device_id).with_for_update(key_share=True)
    )
    if row is None:
        return
    if worked:
        row.infrastructure_failures = 0
        return
    if await pending_check(session, device_id) is not None:
        return  # the check or the recovery queued decides, not the count
    if await queue_check_if_any(session, device_id, at, why=f"infrastructure failure (job {job_pk})"):
        return  # its check decides, not the count
    row.infrastructure_failures += 1
    if row.infrastructure_failures >= INFRASTRUCTURE_FAILURES_FOR_BAD and row.health != Health.BAD:
        why = (
            f"{row.infrastructure_failures} infrastructure failures in a row (the last {reason or 'failed'})"
        )
        await set_health(session, row, Health.BAD, why, at=at, job_pk=job_pk)
        mark(session, Topic.DISPATCH)


async def forget_failures(session: AsyncSession, row: DeviceRow, change: Change) -> None:
    """A person put the device back (available): what its failures made ``bad`` is ``unknown`` again."""
    row.infrastructure_failures = 0
    if row.health == Health.BAD:  # whatever made it bad: the person vouches for it
        why = "put back by a person"
        await set_health(
            session, row, Health.UNKNOWN, why, at=change.at, job_pk=row.health_job_pk, actor=change.actor
        )


async def act_on_suspects(
    session: AsyncSession, suspects: Iterable[Suspect], at: datetime, *, quarantine: bool
) -> list[str]:
    """Each suspect device gets its health check (when it has one); with ``quarantine``
    (``KERRIGAN_QUARANTINE=suspect``) it is also set bad with its numbers, and takes no job until its check
    passes or a person puts it back. A device a check or a person cleared after its last failure is left
    alone until it fails again. The ids of the devices acted on."""
    found: dict[str, Suspect] = {}
    for suspect in suspects:
        found.setdefault(suspect.device, suspect)
    if not found:
        return []
    last_failed = dict(
        (
            await session.execute(
                select(JobRow.device_id, func.max(JobRow.finished_at))
                .where(JobRow.device_id.in_(found), JobRow.state.in_(SUSPECT_FAILURES))
                .group_by(JobRow.device_id)
            )
        ).all()
    )
    rows = (
        await session.scalars(
            select(DeviceRow)
            .where(DeviceRow.id.in_(found), DeviceRow.health != Health.BAD)
            .with_for_update(key_share=True)
        )
    ).all()
    acted = []
    for row in rows:
        failed_at = last_failed.get(row.id)
        if row.health_at is not None and (failed_at is None or row.health_at >= failed_at):
            continue  # checked (or put back) since its last failure: trusted until it fails again
        words = f"suspect: {found[row.id].sentence()}"
        await queue_check_if_any(session, row.id, at, why=words)
        if quarantine:
            await set_health(session, row, Health.BAD, words, at=at, job_pk=None)
            mark(session, Topic.DISPATCH)
        acted.append(row.id)
    return acted
