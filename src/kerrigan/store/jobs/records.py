"""A session's jobs as reports (check runs, pages) show them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import (
    JobState,
)
from kerrigan.core.suspect_retry import SuspectFailure
from kerrigan.store.models import JobRow


@dataclass(frozen=True, slots=True)
class JobRecord:
    """A job as reports show it."""

    pk: int
    task_id: str
    state: JobState
    device_id: str | None
    host: str | None
    exit_status: int | None
    reason: str | None
    started_at: datetime | None
    finished_at: datetime | None
    detail: str | None = None
    attempt: int = 1
    retry_of: int | None = None  # the attempt this one retries
    roles: tuple[tuple[str, str], ...] = ()  # a gang's (role, device); device_id is the first role's
    boardless: bool = False  # ``board: none``: no device; ``host`` is where it runs
    suspect_failure: SuspectFailure | None = None  # it failed on a suspect device: the numbers, the verdict


def roles_of(devices: list[dict[str, str]] | None) -> tuple[tuple[str, str], ...]:
    """A job row's ``devices`` as (role, device) pairs, in role order."""
    return tuple((str(d["role"]), str(d["device"])) for d in devices or ())


async def session_job_records(session: AsyncSession, session_pk: int) -> list[JobRecord]:
    """Every job of a session, in task order, as reports show them."""
    rows = (
        await session.scalars(select(JobRow).where(JobRow.session_pk == session_pk).order_by(JobRow.pk))
    ).all()
    return [
        JobRecord(
            row.pk,
            row.task_id,
            row.state,
            row.device_id,
            row.host,
            row.exit_status,
            row.reason,
            row.started_at,
            row.finished_at,
            row.detail,
            row.attempt,
            row.retry_of,
            roles_of(row.devices),
            bool(row.boardless),
            suspect_failure_of(row),
        )
        for row in rows
    ]


def suspect_failure_of(row: JobRow) -> SuspectFailure | None:
    """The suspect failure kept on a failed job (:mod:`kerrigan.store.suspect_retries`); ``None`` when
    its device was not suspect, or the rule did not apply."""
    if row.suspect_retry is None or row.suspect_runs is None or row.suspect_failures is None:
        return None
    return SuspectFailure(row.device_id or "", row.suspect_runs, row.suspect_failures, row.suspect_retry)
