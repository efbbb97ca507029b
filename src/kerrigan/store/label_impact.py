"""The tasks that ran lately, as :mod:`kerrigan.core.label_impact` weighs a change of labels against them."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.label_impact import AskedTask
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.queue_view import requirements_of_mapping

WINDOW: Final = timedelta(days=30)
"""How far back the tasks a change is weighed against go."""


async def asked_tasks(session: AsyncSession, now: datetime) -> list[AskedTask]:
    """Each task (each matrix job, each role of a gang) of a repository's workflow run within
    :data:`WINDOW` of ``now``, with the requirements its latest job recorded. Health checks are the lab's
    own and are left out."""
    latest = (
        select(func.max(JobRow.pk))
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(
            SessionRow.created_at >= now - WINDOW,
            SessionRow.health_check_device.is_(None),
            JobRow.requirements.is_not(None),
        )
        .group_by(SessionRow.repository, SessionRow.workflow, JobRow.task_id)
    )
    rows = await session.execute(
        select(SessionRow.repository, SessionRow.workflow, JobRow.task_id, JobRow.requirements)
        .join(SessionRow, JobRow.session_pk == SessionRow.pk)
        .where(JobRow.pk.in_(latest))
        .order_by(SessionRow.repository, SessionRow.workflow, JobRow.task_id)
    )
    asked: list[AskedTask] = []
    for repository, workflow, task, requirements in rows:
        if not isinstance(requirements, Mapping):
            continue
        asked.extend(_asked(repository, workflow, task, requirements))
    return asked


def _asked(repository: str, workflow: str, task: str, requirements: Mapping[str, Any]) -> list[AskedTask]:
    roles = requirements.get("roles")
    if isinstance(roles, list):  # a gang: each role asks on its own
        return [
            AskedTask(repository, workflow, task, requirements_of_mapping(role), role=str(role.get("role")))
            for role in roles
            if isinstance(role, Mapping)
        ]
    return [AskedTask(repository, workflow, task, requirements_of_mapping(requirements))]
