"""Offline runner hosts and the jobs that may still run on them (issue 28: ``kill -9`` of an agent mid-job),
on SQLite and PostgreSQL.

rig-01's agent runs ``flash`` on dev-00 and goes silent; ``smoke`` ended on dev-01 before its last heartbeat,
and ``old`` was lost there in an earlier outage; rig-02 is heard and runs ``soak``; rig-03 has a token and an
agent that never spoke.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update

from kerrigan.core.host_outage import HostOutage, StrandedJob
from kerrigan.core.inventory import Device, Pool
from kerrigan.core.lifecycle import RUNNER_LOST, JobState
from kerrigan.store.audit import Change
from kerrigan.store.database import Database
from kerrigan.store.host_outages import host_outages
from kerrigan.store.inventory import create_device, create_pool
from kerrigan.store.models import DeviceLeaseRow, JobRow
from kerrigan.store.runners import create_runner_token, mark_silent_hosts_offline, record_report
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders

SESSION = "28282828-0000-0000-0000-000000000000"
TTL = timedelta(seconds=60)


async def _lab(db: Database) -> dict[str, int]:
    """The hosts and jobs above; the jobs' ids by task."""
    start = db.clock()
    async with db.sessions() as session, session.begin():
        change = Change("test", start)
        await create_pool(session, Pool("rigs", "Rigs"), change)
        for device, host in (("dev-00", "rig-01"), ("dev-01", "rig-01"), ("dev-02", "rig-02")):
            await create_device(session, Device(device, "rigs", "modalix", "devkit", "linux", host), change)
        for host in ("rig-01", "rig-02", "rig-03"):
            await create_runner_token(session, host, start)
        for host in ("rig-01", "rig-02"):
            await record_report(session, host, start, resources={}, device_states={})
        await create_session(session, builders.session(SESSION, ("flash", "smoke", "old", "soak")), start)
    rows: dict[str, dict[str, Any]] = {
        "flash": {"state": JobState.RUNNING, "device_id": "dev-00", "host": "rig-01", "started_at": start},
        "smoke": {
            "state": JobState.SUCCEEDED,
            "device_id": "dev-01",
            "host": "rig-01",
            "started_at": start - timedelta(minutes=5),
            "finished_at": start - timedelta(seconds=10),
        },
        "old": {
            "state": JobState.FAILED,
            "reason": RUNNER_LOST,
            "device_id": "dev-01",
            "host": "rig-01",
            "started_at": start - timedelta(hours=2),
            "finished_at": start - timedelta(hours=1),
        },
        "soak": {"state": JobState.RUNNING, "device_id": "dev-02", "host": "rig-02", "started_at": start},
    }
    async with db.sessions() as session, session.begin():
        for task, values in rows.items():
            await session.execute(update(JobRow).where(JobRow.task_id == task).values(**values))
        found = await session.execute(select(JobRow.task_id, JobRow.pk))
        jobs = {str(task): int(pk) for task, pk in found}
        for task, device, host in (("flash", "dev-00", "rig-01"), ("soak", "dev-02", "rig-02")):
            session.add(
                DeviceLeaseRow(
                    device_id=device,
                    job_pk=jobs[task],
                    session_id=SESSION,
                    host=host,
                    granted_at=start,
                    expires_at=start + TTL,
                )
            )
    return jobs


async def test_only_offline_hosts_with_the_jobs_that_held_their_devices_when_last_heard(db: Database) -> None:
    jobs = await _lab(db)
    heard = db.clock()
    async with db.sessions() as session:
        outages = await host_outages(session)
    # rig-01 and rig-02 are heard; rig-03's agent never spoke.
    assert outages == {"rig-03": HostOutage("rig-03", None, ())}

    silent = heard + TTL + timedelta(seconds=1)
    async with db.sessions() as session, session.begin():
        await record_report(session, "rig-02", silent, resources={}, device_states={})  # still beating
        assert await mark_silent_hosts_offline(session, silent, TTL) == ["rig-01"]
    async with db.sessions() as session:
        outages = await host_outages(session)
    flash = StrandedJob(
        jobs["flash"], SESSION, "octo/firmware", "flash", JobState.RUNNING, None, None, ("dev-00",)
    )
    assert outages["rig-01"] == HostOutage("rig-01", heard, (flash,))  # not smoke, not old, not soak
    assert not flash.ended
    assert set(outages) == {"rig-01", "rig-03"}

    # Its lease runs out: the server ends it runner_lost; it is named still, ended.
    async with db.sessions() as session, session.begin():
        await session.execute(
            update(JobRow)
            .where(JobRow.pk == jobs["flash"])
            .values(state=JobState.FAILED, reason=RUNNER_LOST, finished_at=silent)
        )
        await session.execute(delete(DeviceLeaseRow).where(DeviceLeaseRow.job_pk == jobs["flash"]))
    async with db.sessions() as session:
        outage = (await host_outages(session, ["rig-01"]))["rig-01"]
    [lost] = outage.jobs
    assert (lost.id, lost.state, lost.reason, lost.ended, lost.ended_at) == (
        jobs["flash"],
        JobState.FAILED,
        RUNNER_LOST,
        True,
        silent,
    )
    assert outage.on("dev-00").jobs == (lost,)
    assert outage.on("dev-01").jobs == ()

    # Its agent starts again and speaks: the host is online, nothing is named.
    async with db.sessions() as session, session.begin():
        await record_report(session, "rig-01", silent + TTL, resources={}, device_states={})
    async with db.sessions() as session:
        assert await host_outages(session, ["rig-01", "rig-02"]) == {}
