"""A week of job history for a lab under test: jobs that ran on a device and ended, as the pushes before this
one would have left them (the suspect statistics and the health of boards are read from it)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from sqlalchemy import select, update

from kerrigan.core.lifecycle import FailureClass, JobState
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders


async def ran(
    database: Database,
    device: str,
    *,
    failed: bool,
    task: str = "boot",
    days_ago: float = 1.0,
    repository: str | None = None,
    workflow: str | None = None,
) -> str:
    """A completed session (of ``repository`` and ``workflow`` when given, else the builders' defaults)
    whose one job of ``task`` ran on ``device`` ``days_ago`` and passed or ``failed`` (its test); its id."""
    session_id = str(uuid.uuid4())
    at = database.clock() - timedelta(days=days_ago)
    async with database.sessions() as session, session.begin():
        await create_session(session, builders.session(session_id, [task]), database.clock())
        pk = await session.scalar(select(SessionRow.pk).where(SessionRow.id == session_id))
        named = {"repository": repository} if repository else {}
        named |= {"workflow": workflow} if workflow else {}
        if named:
            await session.execute(update(SessionRow).where(SessionRow.pk == pk).values(**named))
        await session.execute(
            update(JobRow)
            .where(JobRow.session_pk == pk)
            .values(
                device_id=device,
                state=JobState.FAILED if failed else JobState.SUCCEEDED,
                failure_class=FailureClass.TEST if failed else None,
                started_at=at - timedelta(minutes=1),
                finished_at=at,
                exit_status=1 if failed else 0,
            )
        )
    return session_id


async def runs_of(
    database: Database,
    device: str,
    *,
    runs: int,
    failures: int,
    task: str = "boot",
    repository: str | None = None,
    workflow: str | None = None,
) -> None:
    """``runs`` jobs of ``task`` on ``device`` yesterday (:func:`ran`), the first ``failures`` failed."""
    for n in range(runs):
        await ran(database, device, failed=n < failures, task=task, repository=repository, workflow=workflow)
