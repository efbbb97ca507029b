"""``GET /api/v1/devices`` and ``/devices/{id}`` say whether the device's runner host is online and, while it
is not, which jobs held the device when the host was last heard of (issue 28: ``kill -9`` of an agent
mid-job): ``host_online`` and ``host_outage``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select, update

from kerrigan.core.lifecycle import JobState
from kerrigan.store.models import DeviceLeaseRow, JobRow, RunnerHostRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from tests.integration.api.conftest import OWNER_B, READER, Api
from tests.integration.api.test_errors_and_openapi import openapi, validate
from tests.integration.github.conftest import REPO

SESSION = "28282828-0000-0000-0000-000000000001"


async def _silent_mid_job(api: Api, clock: FakeClock) -> int:
    """``flash`` of octo/firmware runs on dev-a1 and lab-a-01's agent goes silent; the job's id."""
    async with api.db.sessions() as session, session.begin():
        await create_session(session, builders.session(SESSION, ("flash",), repository=REPO), clock())
        # Running in the same transaction: the server's own dispatcher never sees it queued.
        await session.execute(
            update(JobRow)
            .where(JobRow.task_id == "flash")
            .values(state=JobState.RUNNING, device_id="dev-a1", host="lab-a-01", started_at=clock())
        )
        await session.execute(
            update(RunnerHostRow).where(RunnerHostRow.id == "lab-a-01").values(online=False)
        )
        job = await session.scalar(select(JobRow.pk))
        assert job is not None
        session.add(  # its lease, on lab-a-01
            DeviceLeaseRow(
                device_id="dev-a1",
                job_pk=job,
                session_id=SESSION,
                host="lab-a-01",
                granted_at=clock(),
                expires_at=clock() + timedelta(minutes=5),
            )
        )
    return int(job)


async def test_a_device_read_says_its_host_is_offline_and_which_job_held_it(
    api: Api, clock: FakeClock
) -> None:
    heard = clock().isoformat()  # the lab's hosts were heard when it was stored
    online = (await api.get("/devices/dev-a1", who=READER)).body
    assert (online["host_online"], online["host_outage"]) == (True, None)
    job = await _silent_mid_job(api, clock)
    expected: dict[str, Any] = {
        "last_heartbeat_at": heard,
        "jobs": [
            {
                "id": job,
                "session": SESSION,
                "repository": REPO,
                "task": "flash",
                "state": "running",
                "reason": None,
                "ended": False,
                "ended_at": None,
                "devices": ["dev-a1"],
            }
        ],
    }
    read = await api.get("/devices/dev-a1", who=READER)
    device = read.body
    assert (device["host_online"], device["host_outage"]) == (False, expected)
    listing = await api.get("/devices", who=READER)
    document = await openapi(api)  # both answers as the API document describes them
    validate(document, "/devices/{device_id}", "get", read)
    validate(document, "/devices", "get", listing)
    listed = {d["id"]: d for d in listing.body["devices"]}
    assert (listed["dev-a1"]["host_online"], listed["dev-a1"]["host_outage"]) == (False, expected)
    # Another device of a heard host is as it was.
    assert (listed["dev-a2"]["host_online"], listed["dev-a2"]["host_outage"]) == (True, None)


async def test_a_reader_who_may_not_read_the_repository_gets_the_job_unnamed(
    api: Api, clock: FakeClock, github: GitHubStandIn
) -> None:
    github.set_permission(REPO, OWNER_B, "none")
    job = await _silent_mid_job(api, clock)
    [stranded] = (await api.get("/devices/dev-a1", who=OWNER_B)).body["host_outage"]["jobs"]
    assert stranded["id"] == job
    assert (stranded["session"], stranded["repository"], stranded["task"]) == (None, None, None)
    assert stranded["state"] == "running"
