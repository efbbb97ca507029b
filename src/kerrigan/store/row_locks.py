"""Row locks on PostgreSQL, taken in one order so that two writers never wait for each other in a circle.

The order (docs/architecture.md, "Row locks"): a delivery's row (its claim's fence), then sessions by key
ascending, and for each session its jobs by key ascending before the session's own row; a job's devices and
leases after the job. A runner's call names a job: it locks the job, then settles the job's session, which
is that order. Locks are ``FOR NO KEY UPDATE``: no writer changes a key, and a row inserted or updated
elsewhere that refers to a locked one (a lease to a job, a job of a session) takes ``FOR KEY SHARE`` on it
to check its foreign key, which ``FOR UPDATE`` would block and ``FOR NO KEY UPDATE`` does not.

SQLite takes one writer at a time: there these are plain reads.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.store.models import JobRow


async def lock_jobs(session: AsyncSession, session_pk: int) -> list[int]:
    """Lock every job of the session ``session_pk``, by key ascending, before its session is locked; their
    keys."""
    query = (
        select(JobRow.pk)
        .where(JobRow.session_pk == session_pk)
        .order_by(JobRow.pk)
        .with_for_update(key_share=True)
    )
    return list((await session.scalars(query)).all())
