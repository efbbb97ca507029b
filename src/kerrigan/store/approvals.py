"""The ``/kerrigan approve`` comments that approved a fork's commit, kept so that a comment approves once:
GitHub redelivers a delivery on request, and a replayed comment must not approve a later commit, nor
sessions that start later at the same one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.models import ApprovalRow


@dataclass(frozen=True, slots=True)
class Approval:
    """One comment's approval: which pull request and commit, by whom, with or without secrets."""

    comment_id: int
    repository: str
    pull_request: int
    head_sha: str
    login: str
    secrets: bool
    approved_at: datetime


async def find_approval(session: AsyncSession, comment_id: int) -> Approval | None:
    """What the comment approved, if it approved anything."""
    row = await session.scalar(select(ApprovalRow).where(ApprovalRow.comment_id == comment_id))
    if row is None:
        return None
    return Approval(
        row.comment_id,
        row.repository,
        row.pull_request,
        row.head_sha,
        row.login,
        row.secrets,
        row.approved_at,
    )


async def record_approval(session: AsyncSession, approval: Approval) -> bool:
    """Keep the comment's approval, in the caller's transaction; False when the comment approved before
    (a redelivery racing this one included: the unique comment id decides, on both databases)."""
    insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = (
        insert(ApprovalRow)
        .values(
            comment_id=approval.comment_id,
            repository=approval.repository,
            pull_request=approval.pull_request,
            head_sha=approval.head_sha,
            login=approval.login,
            secrets=approval.secrets,
            approved_at=approval.approved_at,
        )
        .on_conflict_do_nothing(index_elements=[ApprovalRow.comment_id])
        .returning(ApprovalRow.pk)
    )
    return (await session.execute(statement)).first() is not None
