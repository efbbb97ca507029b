"""The offline runner hosts and the jobs that may still run on them (:mod:`kerrigan.core.host_outage`).

A job counts when its lease is on the host and it has not ended (leased, accepted, running), or when the
server ended it ``runner_lost`` after the host's last heartbeat: it was on the host when the host went
silent, and only the host's agent, once it starts again, stops it there. A job that went back to the queue
after a lost lease is not named: it never started, and the queue may have given it another device. Nor is
a job without a board that ended ``runner_lost``: it held no device to name it on.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from kerrigan.core.host_outage import HostOutage, StrandedJob
from kerrigan.core.lifecycle import ENDED, HOLDING_A_DEVICE, RUNNER_LOST
from kerrigan.store.models import DeviceLeaseRow, DeviceRow, HostLeaseRow, JobRow, RunnerHostRow, SessionRow


async def host_outages(session: AsyncSession, hosts: Collection[str] | None = None) -> dict[str, HostOutage]:
    """Every offline runner host (of ``hosts``, when given) with the jobs that held its devices when it was
    last heard of, by host; a host that is online is not in it. One statement, and two more only when a
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
    columns = (
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
    # Those not ended: through their leases on those hosts (a job holds one exactly while it has not).
    hosts_of = list(silent)
    holding = await session.execute(
        select(*columns)
        .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        .where(
            or_(
                JobRow.pk.in_(select(DeviceLeaseRow.job_pk).where(DeviceLeaseRow.host.in_(hosts_of))),
                JobRow.pk.in_(select(HostLeaseRow.job_pk).where(HostLeaseRow.host.in_(hosts_of))),
            ),
            JobRow.host.in_(hosts_of),  # where it runs: a gang's first device's host
            JobRow.state.in_(HOLDING_A_DEVICE),
        )
    )
    # Those ended runner_lost since: through the devices of those hosts (ix_jobs_device_id_created_at), not
    # a scan of every job ever run.
    lost = await session.execute(
        select(*columns)
        .join(SessionRow, SessionRow.pk == JobRow.session_pk)
        .join(RunnerHostRow, RunnerHostRow.id == JobRow.host)
        .where(
            JobRow.device_id.in_(select(DeviceRow.id).where(DeviceRow.host.in_(hosts_of))),
            JobRow.host.in_(hosts_of),
            JobRow.state.in_(ENDED),
            JobRow.reason == RUNNER_LOST,
            JobRow.finished_at >= RunnerHostRow.last_heartbeat_at,
        )
    )
    rows = sorted([*holding, *lost], key=lambda row: row.pk)
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
