"""The offline runner hosts and the jobs that may still run on them (:mod:`kerrigan.core.host_outage`).

A job counts when its lease was on the host and it has not ended (leased, accepted, running), or when the
server ended it ``runner_lost`` after the host's last heartbeat: it was on the host when the host went
silent, and only the host's agent, once it starts again, stops it there. A job that went back to the queue
after a lost lease is not named: it never started, and the queue may have given it another device.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.host_outage import HostOutage, StrandedJob
from kerrigan.core.lifecycle import ENDED, HOLDING_A_DEVICE, RUNNER_LOST
from kerrigan.store.models import JobRow, RunnerHostRow, SessionRow


async def host_outages(session: AsyncSession, hosts: Collection[str] | None = None) -> dict[str, HostOutage]:
    """Every offline runner host (of ``hosts``, when given) with the jobs that held its devices when it was
    last heard of, by host; a host that is online is not in it. Two statements, the second only when a
    host is offline."""
    # Offline as ``host_report`` reads it: said so, or never heard.
    query = select(RunnerHostRow.id, RunnerHostRow.last_heartbeat_at).where(
        or_(RunnerHostRow.online.is_(False), RunnerHostRow.last_heartbeat_at.is_(None))
    )
    if hosts is not None:
        query = query.where(RunnerHostRow.id.in_(list(hosts)))
    silent = {str(host): heard for host, heard in (await session.execute(query.order_by(RunnerHostRow.id)))}
    if not silent:
        return {}
    rows = await session.execute(
        select(
            JobRow.pk,
            SessionRow.id.label("session_id"),
            SessionRow.repository,
            JobRow.task_id,
            JobRow.state,
            JobRow.reason,
            JobRow.finished_at,
            JobRow.started_at,
            JobRow.host,
            JobRow.device_id,
            JobRow.devices,
        )
        .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        .join(RunnerHostRow, RunnerHostRow.id == JobRow.host)
        .where(
            JobRow.host.in_(list(silent)),
            or_(
                JobRow.state.in_(HOLDING_A_DEVICE),
                and_(
                    JobRow.state.in_(ENDED),
                    JobRow.reason == RUNNER_LOST,
                    JobRow.finished_at >= RunnerHostRow.last_heartbeat_at,
                ),
            ),
        )
        .order_by(JobRow.pk)
    )
    jobs: dict[str, list[StrandedJob]] = {host: [] for host in silent}
    for row in rows:
        gang = tuple(str(held["device"]) for held in row.devices or ())
        devices = gang or ((row.device_id,) if row.device_id is not None else ())
        jobs[row.host].append(
            StrandedJob(
                row.pk,
                row.session_id,
                row.repository,
                row.task_id,
                row.state,
                row.reason,
                row.finished_at if row.state in ENDED else None,
                devices,
                started=row.started_at is not None,
            )
        )
    return {host: HostOutage(host, heard, tuple(jobs[host])) for host, heard in silent.items()}
