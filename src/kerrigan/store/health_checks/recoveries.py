"""Recoveries (:mod:`kerrigan.core.recovery`) queued and ended.

A recovery is a health-check session of the device whose job is :data:`~kerrigan.core.recovery.RECOVERY_TASK`:
queued (in the gate tier, ahead of the device's next job) when a job ends in doubt on a board the agent
powered off or could not (its power did not answer), and again after each failed one until three in a row
set the device ``bad``. One that boots sets the device ``good``. One whose power did not answer is queued
again without counting, the device ``unknown`` (waiting for its power) from the first such one, and ``bad``
once its power has been silent for an hour. The job runs the device's health check when it has one, else
:data:`~kerrigan.core.recovery.RECOVERY_COMMAND`: the agent's power cycle and boot wait come first either
way, as for every job on a wired board.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.device_status import Health
from kerrigan.core.health_checks import HealthCheck
from kerrigan.core.lifecycle import JobState, power_unanswered
from kerrigan.core.recovery import (
    RECOVERY_COMMAND,
    RECOVERY_TASK,
    RecoveryOutcome,
    bad_reason,
    power_bad_reason,
    recovery_outcome,
    waiting_reason,
    why_again,
    why_waiting,
)
from kerrigan.store.health_checks.ends import set_health
from kerrigan.store.health_checks.queueing import (
    QueuedCheck,
    device_health_check,
    pending_check,
    queue_device_job,
)
from kerrigan.store.models import DeviceRow, JobConsoleRow, JobRow
from kerrigan.store.signals import RecoveryEnded, Topic, mark, note

RECOVERY_TIMEOUT_S: Final = 60  # of RECOVERY_COMMAND, once the board booted; the boot has its own timeout
CONSOLE_CHUNKS: Final = 16  # of a failed recovery's console, what its evidence is read from
RECOVERED: Final = "recovered: it booted"
RECOVERED_CHECKED: Final = "recovered: it booted and its health check passed"


async def queue_recovery(
    session: AsyncSession, device_id: str, at: datetime, *, why: str, besides: int | None = None
) -> QueuedCheck:
    """Queue a recovery of ``device_id`` unless a check or a recovery of it is queued or running (other
    than the session ``besides``, the one ending)."""
    pending = await pending_check(session, device_id, besides=besides)
    if pending is not None:
        return QueuedCheck(pending, queued=False)
    check = await device_health_check(session, device_id)
    if check is None:
        check = HealthCheck(RECOVERY_COMMAND, timeout_s=RECOVERY_TIMEOUT_S)
    else:
        check = HealthCheck(check.run, timeout_s=check.timeout_s, vcpus=check.vcpus)
    job_pk = await queue_device_job(session, device_id, at, why=why, check=check, task=RECOVERY_TASK)
    return QueuedCheck(job_pk, queued=True)


async def queue_recoveries(
    session: AsyncSession, devices: Collection[str], at: datetime, *, why: str
) -> list[str]:
    """Queue a recovery of each of ``devices`` (in order, so that two ends at once never deadlock); the ids
    of those queued now."""
    queued = []
    for device_id in sorted(devices):
        if (await queue_recovery(session, device_id, at, why=why)).queued:
            queued.append(device_id)
    return queued


async def record_recovery_end(
    session: AsyncSession, device_id: str, job: JobRow, to: JobState, at: datetime
) -> RecoveryOutcome:
    """A recovery of ``device_id`` ended in ``to``: the device is good again, or has failed one more
    recovery in a row (another is queued, or, the third, it is bad with its console's last lines)."""
    row = await session.scalar(
        select(DeviceRow).where(DeviceRow.id == device_id).with_for_update(key_share=True)
    )
    if row is None:
        return RecoveryOutcome.NONE
    waiting_since = await _waiting_for_power_since(session, row)
    outcome = recovery_outcome(
        to,
        job.reason,
        started=job.started_at is not None,
        failures_before=row.recovery_failures,
        power_waited_s=None if waiting_since is None else (at - waiting_since).total_seconds(),
    )
    match outcome:
        case RecoveryOutcome.RECOVERED:
            row.recovery_failures = 0
            row.infrastructure_failures = 0
            checked = (job.command or RECOVERY_COMMAND) != RECOVERY_COMMAND
            words = RECOVERED_CHECKED if checked else RECOVERED
            await set_health(session, row, Health.GOOD, words, at=at, job_pk=job.pk)
        case RecoveryOutcome.FAILED:
            row.recovery_failures += 1
            why = why_again(row.recovery_failures, job.reason)
            await queue_recovery(session, device_id, at, why=why, besides=job.session_pk)
        case RecoveryOutcome.WAITING_FOR_POWER:
            if waiting_since is None:  # the first: from now the device waits (its health says since when)
                await set_health(
                    session, row, Health.UNKNOWN, waiting_reason(job.detail), at=at, job_pk=job.pk
                )
            await queue_recovery(session, device_id, at, why=why_waiting(job.reason), besides=job.session_pk)
        case RecoveryOutcome.BAD if waiting_since is not None and power_unanswered(job.reason):
            words = power_bad_reason((at - waiting_since).total_seconds())
            await set_health(session, row, Health.BAD, words, at=at, job_pk=job.pk)
        case RecoveryOutcome.BAD:
            row.recovery_failures += 1
            console = await _console_tail(session, job.pk)
            words = bad_reason(row.recovery_failures, job.reason, console.splitlines())
            await set_health(session, row, Health.BAD, words, at=at, job_pk=job.pk)
        case RecoveryOutcome.NONE:
            return outcome
    note(session, RecoveryEnded(device_id, outcome))
    mark(session, Topic.DISPATCH)
    return outcome


async def _waiting_for_power_since(session: AsyncSession, row: DeviceRow) -> datetime | None:
    """Since when the device's recoveries have waited for its power: its health was last decided by a
    recovery whose power did not answer (the first of those in a row), else ``None``."""
    if row.health is not Health.UNKNOWN or row.health_job_pk is None or row.health_at is None:
        return None
    decided = await session.get(JobRow, row.health_job_pk)
    if decided is None or decided.task_id != RECOVERY_TASK or not power_unanswered(decided.reason):
        return None
    return row.health_at


async def _console_tail(session: AsyncSession, job_pk: int) -> str:
    """The last chunks of the job's console (the agent sends it before it reports the job's end)."""
    rows = await session.scalars(
        select(JobConsoleRow.data)
        .where(JobConsoleRow.job_pk == job_pk, JobConsoleRow.seq >= 0)
        .order_by(JobConsoleRow.seq.desc())
        .limit(CONSOLE_CHUNKS)
    )
    return "".join(reversed([str(data) for data in rows]))
