"""``POST /api/v1/sessions/{id}/cancel``: System Admins, the repository's writers (as GitHub says) and the
owners of a pool the session uses cancel; an ended session is a 409 saying how it ended, an unknown one a
404, anyone else a 403 changing nothing, and GitHub not answering whether the caller writes a 503."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from kerrigan.core.lifecycle import JobState, SessionState
from kerrigan.store.models import JobRow, SessionRow
from kerrigan.store.sessions import create_session
from kerrigan.testing import builders
from kerrigan.testing.github import GitHubStandIn
from tests.integration.api.conftest import ADMIN, ANONYMOUS, OWNER_A, OWNER_B, READER, Api
from tests.integration.github.conftest import REPO

SESSION = "77777777-7777-7777-7777-777777777777"
RESOLUTION = {"tasks": [{"id": "smoke", "eligible_pools": ["pool-a"]}, {"id": "boot"}]}


@pytest.fixture
async def queued(api: Api) -> Api:
    """A session of two queued jobs, its smoke task eligible on pool-a (olga's)."""
    async with api.db.sessions() as session, session.begin():
        await create_session(
            session, builders.session(SESSION, ("smoke", "boot"), resolution=RESOLUTION), api.db.clock()
        )
    return api


async def stored(api: Api) -> tuple[SessionRow, list[JobRow]]:
    async with api.db.sessions() as session:
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        return row, list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


def cancel_path(session_id: str = SESSION) -> str:
    return f"/sessions/{session_id}/cancel"


async def test_an_admin_cancels_a_queued_session_and_it_completes_cancelled_naming_who(queued: Api) -> None:
    reply = await queued.call("POST", cancel_path(), who=ADMIN)

    assert reply.status == 200, reply.body
    assert reply.body == {
        "session": SESSION,
        "state": "completed",
        "conclusion": "cancelled",
        "changed": True,
    }
    row, jobs = await stored(queued)
    assert (row.cancelled_by, row.cancel_reason) == (ADMIN, f"cancelled by {ADMIN}")
    assert {job.state for job in jobs} == {JobState.CANCELLED}


async def test_cancelling_an_ended_session_is_a_409_naming_how_it_ended(queued: Api) -> None:
    assert (await queued.call("POST", cancel_path(), who=ADMIN)).status == 200

    reply = await queued.call("POST", cancel_path(), who=ADMIN)

    assert reply.status == 409
    assert reply.body["error"]["code"] == "session_ended"
    assert reply.body["error"]["message"].endswith("completed cancelled")
    assert reply.body["error"]["field"] is None


async def test_a_running_session_answers_that_its_jobs_are_stopping(queued: Api) -> None:
    async with queued.db.sessions() as session, session.begin():
        [first, _] = (await session.scalars(select(JobRow).order_by(JobRow.pk))).all()
        first.state, first.started_at, first.device_id = JobState.RUNNING, queued.db.clock(), "dev-b1"
        row = await session.scalar(select(SessionRow).where(SessionRow.id == SESSION))
        assert row is not None
        row.state = SessionState.IN_PROGRESS

    reply = await queued.call("POST", cancel_path(), who=ADMIN)
    again = await queued.call("POST", cancel_path(), who=ADMIN)

    assert reply.status == 200, reply.body
    assert reply.body["state"] == "in_progress"
    assert reply.body["changed"] is True
    assert (again.status, again.body["changed"]) == (200, False)  # asked before: still stopping
    _, jobs = await stored(queued)
    assert jobs[0].cancel_requested_at is not None


async def test_an_unknown_session_is_a_404(queued: Api) -> None:
    reply = await queued.call("POST", cancel_path("no-such-session"), who=ADMIN)
    assert reply.status == 404
    assert reply.body["error"]["code"] == "not_found"
    assert "no-such-session" in reply.body["error"]["message"]


async def test_the_owner_of_a_pool_the_session_is_eligible_on_may_cancel(queued: Api) -> None:
    reply = await queued.call("POST", cancel_path(), who=OWNER_A)
    assert reply.status == 200, reply.body
    row, _ = await stored(queued)
    assert row.cancelled_by == OWNER_A


async def test_the_owner_of_the_pool_a_job_holds_a_device_of_may_cancel(queued: Api) -> None:
    async with queued.db.sessions() as session, session.begin():
        [_, boot] = (await session.scalars(select(JobRow).order_by(JobRow.pk))).all()
        boot.device_id = "dev-b1"  # bob's pool

    reply = await queued.call("POST", cancel_path(), who=OWNER_B)

    assert reply.status == 200, reply.body


@pytest.mark.parametrize(("who", "status"), [(READER, 403), (OWNER_B, 403), (ANONYMOUS, 401)])
async def test_anyone_else_is_refused_and_nothing_changes(queued: Api, who: str | None, status: int) -> None:
    reply = await queued.call("POST", cancel_path(), who=who)

    assert reply.status == status
    if status == 403:
        assert reply.body["error"]["code"] == "forbidden"
        assert f"{who} may not cancel session {SESSION}" in reply.body["error"]["message"]
        assert "the writers of octo/firmware" in reply.body["error"]["message"]
    row, jobs = await stored(queued)
    assert (row.state, row.cancelled_by, row.cancel_reason) == (SessionState.QUEUED, None, None)
    # Not ended (the dispatcher may lease one meanwhile: the lab's hosts count as online here).
    assert {job.state for job in jobs} <= {JobState.QUEUED, JobState.LEASED}


@pytest.mark.parametrize("permission", ["write", "maintain", "admin"])
async def test_a_writer_of_the_repository_cancels_its_session(
    queued: Api, github: GitHubStandIn, permission: str
) -> None:
    github.set_permission(REPO, READER, permission)  # rita owns no pool: her write access is what counts
    reply = await queued.call("POST", cancel_path(), who=READER)
    assert reply.status == 200, reply.body
    row, _ = await stored(queued)
    assert (row.cancelled_by, row.cancel_reason) == (READER, f"cancelled by {READER}")


async def test_github_not_saying_who_writes_is_a_503_that_changes_nothing(
    queued: Api, github: GitHubStandIn
) -> None:
    github.faults.inject("GET", "/collaborators/rita/permission", status=502, times=None)
    reply = await queued.call("POST", cancel_path(), who=READER)
    assert (reply.status, reply.body["error"]["code"]) == (503, "github_unavailable")
    row, _ = await stored(queued)
    assert row.cancelled_by is None
