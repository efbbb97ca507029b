"""Health checks ended: what makes a device ``good`` or ``bad`` by its own check, or the check broken.

A check's end sets the device's health: passed, ``good``; failed after it started (any other end), ``bad``;
one that never started changes nothing. It is not an infrastructure failure of the device and is never
retried. A check that cannot run (:mod:`kerrigan.core.check_verdicts`) leaves the devices' health as it
was, and the pool's audit log says when it breaks and when it works again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.check_verdicts import (
    SAME_FAILURE_WITHIN,
    Broken,
    CheckEnd,
    Verdict,
    broken_now,
    same_failure_in_hour,
    verdict,
)
from kerrigan.core.device_status import Health
from kerrigan.core.health_checks import (
    FAILED,
    HEALTH_CHECK_TASK,
    PASSED,
)
from kerrigan.core.inventory_diff import ChangeKind, FieldChange
from kerrigan.core.lifecycle import CHECK_BROKEN, JobState
from kerrigan.store.audit import KERRIGAN_ACTOR, Change, record
from kerrigan.store.models import (
    AuditRow,
    DeviceRow,
    JobRow,
    PoolRow,
    SessionRow,
)
from kerrigan.store.signals import Topic, mark

CHECK_STATE_FIELD: Final = "health_check_state"  # the pool's audit field: its check breaks, works again
WORKS: Final = "works"


async def checked_device(session: AsyncSession, session_pk: int) -> str | None:
    """The device a health-check session checks; None for any other session."""
    return await session.scalar(select(SessionRow.health_check_device).where(SessionRow.pk == session_pk))


def _health_words(health: Health, reason: str) -> str:
    return f"{health.value}: {reason}" if reason else health.value


def _health_of_words(words: str) -> tuple[Health, str]:
    """The health and reason :func:`_health_words` wrote (``unknown`` for words it did not write)."""
    value, _, reason = words.partition(": ")
    try:
        return Health(value), reason
    except ValueError:
        return Health.UNKNOWN, ""


def broken_words(broken: Broken) -> str:
    """A broken check in the audit log's and the pages' words."""
    return f"{CHECK_BROKEN}: {broken.command} fails, {broken.sentence()}; the devices keep their health"


async def set_health(
    session: AsyncSession,
    row: DeviceRow,
    health: Health,
    reason: str,
    *,
    at: datetime,
    job_pk: int | None,
    actor: str = KERRIGAN_ACTOR,
) -> None:
    """Set the device's health (why, when, the job that decided it); a change of its state is in the audit
    log, as ``device`` ``ID`` field ``health``, ``good`` -> ``bad: <why>``. Every change of a device's health
    goes through here."""
    before = _health_words(row.health, row.health_reason)
    changed = row.health is not health
    row.health, row.health_reason, row.health_at, row.health_job_pk = health, reason, at, job_pk
    if changed:
        pool_id = await session.scalar(select(PoolRow.id).where(PoolRow.pk == row.pool_pk))
        after = _health_words(health, reason)
        await record(
            session,
            Change(actor, at),
            FieldChange(ChangeKind.CHANGE, "device", row.id, "health", before, after),
            pool_id,
        )


async def record_check_end(
    session: AsyncSession, device_id: str, job: JobRow, to: JobState, at: datetime
) -> None:
    """A health-check job of ``device_id`` ended in ``to``: the device's health follows (one that never
    started says nothing), unless the check itself is broken (:mod:`kerrigan.core.check_verdicts`): then the
    job's reason is ``check_broken``, the device keeps its health, and a device its same failure set bad
    within the hour gets back the health it had. The pool's audit log says when its check breaks and when
    it works again."""
    if to is not JobState.SUCCEEDED and job.started_at is None:
        return
    pool_pk = await session.scalar(select(DeviceRow.pool_pk).where(DeviceRow.id == device_id))
    if pool_pk is None:
        return
    end = CheckEnd(device_id, job.pk, at, to, job.exit_status)
    command = job.command or ""
    earlier = await _earlier_ends(session, pool_pk, command, job.pk, at)
    was = broken_now(command, earlier)
    judged = verdict(end, earlier)
    wrongly = same_failure_in_hour(end, earlier) if judged is Verdict.BROKEN else ()
    # Every device row this end changes, locked in one order (two checks ending at once never deadlock).
    rows = {
        row.id: row
        for row in await session.scalars(
            select(DeviceRow)
            .where(DeviceRow.id.in_({device_id, *(e.device_id for e in wrongly)}))
            .order_by(DeviceRow.id)
            .with_for_update(key_share=True)
        )
    }
    row = rows.get(device_id)
    if row is None:
        return
    if judged is Verdict.BROKEN:
        job.reason = CHECK_BROKEN  # the device keeps its health
        for wrong in wrongly:
            await _judge_broken_after_all(session, rows.get(wrong.device_id), wrong, at)
    else:
        passed = judged is Verdict.PASSED
        health, words = (Health.GOOD, PASSED) if passed else (Health.BAD, FAILED)
        await set_health(session, row, health, words, at=at, job_pk=job.pk)
        if passed:
            row.infrastructure_failures = 0
    if end.weighed:
        judged_ends = [dataclasses.replace(e, broken=True) if e in wrongly else e for e in earlier] + [
            dataclasses.replace(end, broken=judged is Verdict.BROKEN)
        ]
        await _record_check_state(session, row.pool_pk, was, broken_now(command, judged_ends), end)
    mark(session, Topic.DISPATCH)


_WEIGHED = or_(
    JobRow.state.in_((JobState.SUCCEEDED, JobState.TIMED_OUT)),
    and_(JobRow.state == JobState.FAILED, JobRow.exit_status.is_not(None)),
)


@dataclass(frozen=True, slots=True)
class PoolCheckEnd:
    """A health check's end, with the pool of its device and its command (together: the check)."""

    pool_pk: int
    command: str
    end: CheckEnd


async def check_ends(
    session: AsyncSession, *where: ColumnElement[bool], newest: int | None = None
) -> list[PoolCheckEnd]:
    """The ended health-check jobs that started and match ``where`` (the ``newest`` of them only, when
    given), oldest first."""
    query = (
        select(
            DeviceRow.pool_pk,
            JobRow.command,
            SessionRow.health_check_device,
            JobRow.pk,
            JobRow.finished_at,
            JobRow.state,
            JobRow.exit_status,
            JobRow.reason,
        )
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .join(DeviceRow, DeviceRow.id == SessionRow.health_check_device)
        .where(
            JobRow.task_id == HEALTH_CHECK_TASK,
            JobRow.started_at.is_not(None),
            JobRow.finished_at.is_not(None),
            *where,
        )
    )
    if newest is not None:
        query = query.order_by(JobRow.finished_at.desc(), JobRow.pk.desc()).limit(newest)
    found = []
    for pool_pk, command, device, pk, finished_at, state, exit_status, reason in await session.execute(query):
        if device is not None and finished_at is not None:
            end = CheckEnd(device, pk, finished_at, state, exit_status, reason == CHECK_BROKEN)
            found.append(PoolCheckEnd(pool_pk, command or "", end))
    return sorted(found, key=lambda found: (found.end.at, found.end.job_pk))


async def _earlier_ends(
    session: AsyncSession, pool_pk: int, command: str, job_pk: int, at: datetime
) -> list[CheckEnd]:
    """What :func:`~kerrigan.core.check_verdicts.verdict` weighs a check's end against: the other ends of
    the same check in the hour before ``at``, and its latest weighed end whatever its age."""
    same = (DeviceRow.pool_pk == pool_pk, JobRow.command == command, JobRow.pk != job_pk)
    found = await check_ends(session, *same, JobRow.finished_at >= at - SAME_FAILURE_WITHIN)
    found += await check_ends(session, *same, _WEIGHED, newest=1)
    return list({each.end.job_pk: each.end for each in found}.values())


async def _judge_broken_after_all(
    session: AsyncSession, row: DeviceRow | None, wrong: CheckEnd, at: datetime
) -> None:
    """The check that set ``row`` bad at ``wrong`` was broken: its job says so, and the device gets back
    the health it had before (from the audit log, which keeps every change of a device's health)."""
    job = await session.get(JobRow, wrong.job_pk)
    if job is not None:
        job.reason = CHECK_BROKEN
    if row is None or row.health is not Health.BAD or row.health_job_pk != wrong.job_pk:
        return  # something else decided its health since
    found = (
        await session.execute(
            select(AuditRow.before, AuditRow.after)
            .where(
                AuditRow.subject_type == "device",
                AuditRow.subject_id == row.id,
                AuditRow.field == "health",
                AuditRow.at == wrong.at,
            )
            .order_by(AuditRow.pk.desc())
            .limit(1)
        )
    ).first()
    if found is None or found[1] != _health_words(Health.BAD, FAILED) or not isinstance(found[0], str):
        return  # that check changed nothing: the device was bad before it, and stays so
    health, reason = _health_of_words(found[0])
    await set_health(session, row, health, reason, at=at, job_pk=None)


async def _record_check_state(
    session: AsyncSession, pool_pk: int, was: Broken | None, now: Broken | None, end: CheckEnd
) -> None:
    """One audit entry on the pool when its check breaks, and one when it works again."""
    if now is not None and was is None:
        before, after = WORKS, broken_words(now)
    elif was is not None and now is None:
        failure = end.failure
        how = (
            f"passed on {end.device_id}"
            if failure is None
            else f"{end.device_id} alone failed it ({failure.words()})"
        )
        before, after = broken_words(was), f"{WORKS}: {how}"
    else:
        return
    pool_id = await session.scalar(select(PoolRow.id).where(PoolRow.pk == pool_pk))
    if pool_id is None:
        return
    change = FieldChange(ChangeKind.CHANGE, "pool", pool_id, CHECK_STATE_FIELD, before, after)
    await record(session, Change(KERRIGAN_ACTOR, end.at), change, pool_id)
