"""Sessions and jobs stored as rows for the history tests: a few lines per session, any time, any outcome."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.lifecycle import SessionState
from kerrigan.store.models import JobLogRow, JobRow, SessionRow


@dataclass(frozen=True)
class Run:
    """One job of a session to store: the task, the device, how it ended."""

    task: str = "smoke"
    device: str | None = "dev-a1"
    state: str = "succeeded"
    attempt: int = 1
    output: Sequence[str] = ()
    host: str = "lab-a-01"
    exit_status: int | None = 0
    failure_class: str | None = None
    requirements: dict[str, Any] | None = None  # as the session's resolution recorded them
    boardless: bool = False  # board: none: no device, yet it ran on ``host``


async def add_session(
    session: AsyncSession,
    at: datetime,
    *,
    repository: str = "octo/firmware",
    branch: str = "main",
    workflow: str = "hil",
    state: SessionState = SessionState.COMPLETED,
    conclusion: str | None = "success",
    runs: Sequence[Run] = (Run(),),
    sha: str | None = None,
    session_id: str | None = None,
    installation_id: int | None = 1,
) -> tuple[str, list[int]]:
    """Store a session created at ``at`` with its jobs (of the installation a real delivery names); its id
    and its jobs' ids."""
    row = SessionRow(
        id=session_id or str(uuid.uuid4()),
        head_sha=sha or uuid.uuid4().hex[:40].ljust(40, "0"),
        workflow=workflow,
        manifest_path=f".kerrigan/{workflow}.yml",
        event="push",
        priority="normal",
        state=state,
        conclusion=conclusion,
        created_at=at,
        updated_at=at + timedelta(minutes=5),
        repository=repository,
        head_branch=branch,
        installation_id=installation_id,
    )
    session.add(row)
    await session.flush()
    job_ids: list[int] = []
    previous: int | None = None
    for run in runs:
        started = at + timedelta(seconds=10)
        ended = run.state in {"succeeded", "failed", "timed_out", "cancelled", "retried"}
        ran = run.device is not None or run.boardless  # it ran somewhere
        job = JobRow(
            session_pk=row.pk,
            task_id=run.task,
            device_id=run.device,
            state=run.state,
            exit_status=run.exit_status if ended else None,
            created_at=at,
            started_at=started if ran else None,
            finished_at=started + timedelta(seconds=50) if ended and ran else None,
            host=run.host if ran else None,
            boardless=run.boardless,
            attempt=run.attempt,
            retry_of=previous if run.attempt > 1 else None,
            failure_class=run.failure_class,
            requirements=run.requirements,
        )
        session.add(job)
        await session.flush()
        offset = 0
        for seq, data in enumerate(run.output):
            session.add(JobLogRow(job_pk=job.pk, seq=seq, byte_offset=offset, data=data))
            offset += len(data.encode())
        job.next_seq, job.log_bytes = len(run.output), offset
        job_ids.append(job.pk)
        previous = job.pk
    return row.id, job_ids
