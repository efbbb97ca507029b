"""History through the API: the session list's filters (each), paging that stays stable while sessions
arrive, cursors bound to their query, unknown filters and bad limits refused naming the field, a session
with its attempts, a job, its raw output as plain text, a device's jobs, and who may read them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from kerrigan.core.lifecycle import SessionState
from kerrigan.store.history import Position
from kerrigan.store.jobs import CUT_SEQ
from kerrigan.store.models import JobConsoleRow, JobLogRow
from kerrigan.testing.clock import FakeClock
from kerrigan.web.api.history import SESSION_FILTERS, read_query
from tests.integration.api.conftest import ANONYMOUS, OWNER_A, READER, Api
from tests.integration.api.history_rows import Run, add_session
from tests.integration.api.test_errors_and_openapi import openapi, validate


async def _lab_history(api: Api, clock: FakeClock) -> dict[str, str]:
    """Six sessions an hour apart, each differing from the others in one field."""
    start = clock() - timedelta(days=3)
    ids: dict[str, str] = {}
    async with api.db.sessions() as session, session.begin():
        ids["plain"], _ = await add_session(session, start)
        ids["other_repo"], _ = await add_session(session, start + timedelta(hours=1), repository="octo/sdk")
        ids["feature"], _ = await add_session(session, start + timedelta(hours=2), branch="feature/x")
        ids["nightly"], _ = await add_session(session, start + timedelta(hours=3), workflow="nightly")
        ids["running"], _ = await add_session(
            session,
            start + timedelta(hours=4),
            state=SessionState.IN_PROGRESS,
            conclusion=None,
            runs=(Run(state="running", exit_status=None),),
        )
        ids["failed"], _ = await add_session(
            session,
            start + timedelta(days=2),
            conclusion="failure",
            runs=(Run(device="dev-b1", host="lab-b-01", state="failed", exit_status=1),),
        )
    return ids


def _ids(body: dict[str, Any]) -> list[str]:
    return [item["id"] for item in body["items"]]


async def test_the_list_is_newest_first_with_times_in_utc(api: Api, clock: FakeClock) -> None:
    ids = await _lab_history(api, clock)
    body = (await api.get("/sessions")).body
    order = ["failed", "running", "nightly", "feature", "other_repo", "plain"]
    assert _ids(body) == [ids[name] for name in order]
    assert body["next_cursor"] is None
    first = body["items"][0]
    assert first["created_at"].endswith("+00:00")
    assert first["devices"] == ["dev-b1"]
    assert first["conclusion"] == "failure"
    assert first["duration_s"] == 50.0
    assert first["url"] == f"/sessions/{ids['failed']}"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("repository=octo/sdk", ["other_repo"]),
        ("branch=feature/x", ["feature"]),
        ("workflow=nightly", ["nightly"]),
        ("state=in_progress", ["running"]),
        ("conclusion=failure", ["failed"]),
        ("device=dev-b1", ["failed"]),
        ("since=2026-11-28T11:00:00%2B00:00", ["failed"]),
        ("since=2026-11-26T15:30:00Z", ["failed", "running"]),
        ("repository=octo/firmware&branch=main&workflow=hil&conclusion=success", ["plain"]),
    ],
)
async def test_each_filter_narrows_the_list(
    api: Api, clock: FakeClock, query: str, expected: list[str]
) -> None:
    ids = await _lab_history(api, clock)
    assert _ids((await api.get(f"/sessions?{query}")).body) == [ids[name] for name in expected]


async def test_pages_cover_the_list_once_in_order_while_sessions_arrive(api: Api, clock: FakeClock) -> None:
    at = clock() - timedelta(hours=10)
    async with api.db.sessions() as session, session.begin():
        # Two pairs share a creation time: the primary key keeps their order.
        times = [at, at, at + timedelta(hours=1), at + timedelta(hours=2), at + timedelta(hours=2)]
        times += [at + timedelta(hours=h) for h in (3, 4)]
        created = [(await add_session(session, when))[0] for when in times]
    expected = list(reversed(created))
    seen: list[str] = []
    reply = (await api.get("/sessions?limit=3")).body
    seen += _ids(reply)
    async with api.db.sessions() as session, session.begin():
        await add_session(session, clock())  # newer than everything: it belongs to no later page
    while reply["next_cursor"] is not None:
        reply = (await api.get(f"/sessions?limit=3&cursor={reply['next_cursor']}")).body
        seen += _ids(reply)
    assert seen == expected


async def test_a_cursor_of_another_query_is_refused(api: Api, clock: FakeClock) -> None:
    await _lab_history(api, clock)
    cursor = (await api.get("/sessions?limit=2&repository=octo/firmware")).body["next_cursor"]
    assert cursor is not None
    before = (await api.get(f"/sessions?limit=2&repository=octo/firmware&cursor={cursor}")).body
    assert len(before["items"]) == 2
    for query in (f"repository=octo/sdk&cursor={cursor}", f"cursor={cursor}", "cursor=not-a-cursor"):
        reply = await api.call("GET", f"/sessions?{query}")
        assert reply.status == 400, query
        assert reply.body["error"]["field"] == "cursor"
    # A cursor of this query, as a client could forge one: a row id past a BIGINT, a time before time.
    query = read_query({}, "sessions", SESSION_FILTERS)
    for forged in (
        query.cursor(Position(datetime(2026, 1, 1, tzinfo=UTC), 2**70)),
        query.cursor(Position(datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))), 1)),
    ):
        reply = await api.call("GET", f"/sessions?cursor={forged}")
        assert reply.status == 400
        assert reply.body["error"]["field"] == "cursor"
    device_cursor = await api.call("GET", f"/devices/dev-a1/jobs?cursor={cursor}")
    assert device_cursor.status == 400
    assert device_cursor.body["error"]["field"] == "cursor"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("user=olga", "user"),
        ("repo=octo/firmware", "repo"),
        ("state=done", "state"),
        ("conclusion=green", "conclusion"),
        ("since=2026-11-28T11:00:00", "since"),
        ("since=yesterday", "since"),
        ("since=2026-12-01", "since"),
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("limit=-1", "limit"),
        ("branch=a&branch=b", "branch"),
    ],
)
async def test_bad_queries_are_400_naming_the_field(api: Api, query: str, field: str) -> None:
    reply = await api.call("GET", f"/sessions?{query}")
    assert reply.status == 400
    assert reply.body["error"]["field"] == field
    assert field in reply.body["error"]["message"]


@pytest.mark.parametrize(
    ("since", "items"),
    [("0001-01-01T00:00:00%2B01:00", 1), ("9999-12-31T23:59:59-23:59", 0), ("2026-11-01t00:00:00z", 1)],
)
async def test_any_rfc_3339_since_is_taken_past_the_calendars_ends_too(
    api: Api, clock: FakeClock, since: str, items: int
) -> None:
    async with api.db.sessions() as session, session.begin():
        await add_session(session, clock() - timedelta(hours=1))
    reply = await api.call("GET", f"/sessions?since={since}")
    assert reply.status == 200, reply.body
    assert len(reply.body["items"]) == items


async def test_limit_bounds(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        for hour in range(60):
            await add_session(session, clock() - timedelta(hours=hour))
    assert len((await api.get("/sessions")).body["items"]) == 50
    assert len((await api.get("/sessions?limit=500")).body["items"]) == 60
    one = (await api.get("/sessions?limit=1")).body
    assert len(one["items"]) == 1
    assert one["next_cursor"] is not None


async def test_a_session_with_its_attempts(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        session_id, (first, second) = await add_session(
            session,
            clock() - timedelta(hours=1),
            runs=(
                Run(state="retried", exit_status=75, failure_class="infrastructure"),
                Run(device="dev-a2", host="lab-a-02", attempt=2),
            ),
        )
    reply = await api.get(f"/sessions/{session_id}")
    assert reply.headers["ETag"]
    jobs = reply.body["jobs"]
    assert [(j["id"], j["attempt"], j["retry_of"], j["device"], j["host"]) for j in jobs] == [
        (first, 1, None, "dev-a1", "lab-a-01"),
        (second, 2, first, "dev-a2", "lab-a-02"),
    ]
    assert jobs[0]["failure_class"] == "infrastructure"
    assert jobs[0]["exit_status"] == 75
    assert jobs[1]["started_at"].endswith("+00:00")
    assert jobs[1]["finished_at"].endswith("+00:00")
    assert reply.body["devices"] == ["dev-a1", "dev-a2"]
    again = await api.call("GET", f"/sessions/{session_id}", headers={"If-None-Match": reply.headers["ETag"]})
    assert again.status == 304
    job = await api.get(f"/jobs/{second}")
    assert job.body["session"] == session_id
    assert job.body["retry_of"] == first
    for path in ("/sessions/nope", "/jobs/999999", "/jobs/abc", "/jobs/999999/output", "/devices/nope/jobs"):
        missing = await api.call("GET", path)
        assert missing.status == 404, path
        assert missing.body["error"]["code"] == "not_found"


async def test_output_is_the_whole_log_as_plain_text(api: Api, clock: FakeClock) -> None:
    chunks = [f"line {n} \u00e9\n" * 50 for n in range(200)]  # more chunks than one read of the store
    async with api.db.sessions() as session, session.begin():
        _, (job_id,) = await add_session(session, clock(), runs=(Run(output=chunks),))
        session.add(JobLogRow(job_pk=job_id, seq=CUT_SEQ, byte_offset=0, data="[output cut]\n"))
    reply = await api.call("GET", f"/jobs/{job_id}/output")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert reply.body == "".join(chunks) + "[output cut]\n"
    async with api.db.sessions() as session, session.begin():
        _, (empty,) = await add_session(session, clock())
    assert (await api.call("GET", f"/jobs/{empty}/output")).body == ""


async def test_output_with_timestamps_starts_each_line_with_its_arrival(api: Api, clock: FakeClock) -> None:
    at = datetime(2026, 12, 1, 17, 30, 0, 123456, tzinfo=UTC)
    async with api.db.sessions() as session, session.begin():
        _, (job_id,) = await add_session(session, clock())
        for seq, (data, when) in enumerate(
            [("boot\nflash", at), ("ing done\nsmoke\n", at + timedelta(seconds=2)), ("old\n", None)]
        ):
            session.add(JobLogRow(job_pk=job_id, seq=seq, byte_offset=seq, data=data, received_at=when))
    reply = await api.call("GET", f"/jobs/{job_id}/output?timestamps=true")
    assert reply.status == 200
    # A line carries the time of the chunk it began in; a chunk stored without a time leaves its lines bare.
    assert reply.body == (
        "2026-12-01T17:30:00.123Z boot\n"
        "2026-12-01T17:30:00.123Z flashing done\n"
        "2026-12-01T17:30:02.123Z smoke\n"
        "old\n"
    )
    assert (await api.call("GET", f"/jobs/{job_id}/output?timestamps=false")).body == (
        "boot\nflashing done\nsmoke\nold\n"
    )
    for query, field in (("timestamps=yes", "timestamps"), ("since=3", "since")):
        refused = await api.call("GET", f"/jobs/{job_id}/output?{query}")
        assert refused.status == 400, query
        assert refused.body["error"]["field"] == field


async def test_the_console_is_the_boards_log_as_plain_text_with_timestamps_apart_from_the_output(
    api: Api, clock: FakeClock
) -> None:
    at = datetime(2026, 12, 1, 17, 30, 0, 123456, tzinfo=UTC)
    async with api.db.sessions() as session, session.begin():
        _, (job_id,) = await add_session(session, clock(), runs=(Run(output=["test passed\n"]),))
        for seq, (data, when) in enumerate(
            [("U-Boot 2024.01\r\nboo", at), ("t\nlogin: ", at + timedelta(seconds=3))]
        ):
            session.add(JobConsoleRow(job_pk=job_id, seq=seq, byte_offset=seq, data=data, received_at=when))
        session.add(JobConsoleRow(job_pk=job_id, seq=CUT_SEQ, byte_offset=0, data="\n[console cut]\n"))
    reply = await api.call("GET", f"/jobs/{job_id}/console")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert reply.body == "U-Boot 2024.01\r\nboot\nlogin: \n[console cut]\n"
    assert (await api.call("GET", f"/jobs/{job_id}/output")).body == "test passed\n"  # not mixed in
    stamped = await api.call("GET", f"/jobs/{job_id}/console?timestamps=true")
    assert stamped.body.split("\n")[:3] == [
        "2026-12-01T17:30:00.123Z U-Boot 2024.01\r",
        "2026-12-01T17:30:00.123Z boot",
        "2026-12-01T17:30:03.123Z login: ",
    ]
    refused = await api.call("GET", f"/jobs/{job_id}/console?timestamps=yes")
    assert (refused.status, refused.body["error"]["field"]) == (400, "timestamps")
    async with api.db.sessions() as session, session.begin():
        _, (quiet,) = await add_session(session, clock())
    assert (await api.call("GET", f"/jobs/{quiet}/console")).body == ""  # a runner that sent none
    assert (await api.call("GET", "/jobs/999999/console")).status == 404
    assert (await api.call("GET", f"/jobs/{job_id}/console", who=ANONYMOUS)).status == 401
    document = await openapi(api)
    content = document["paths"]["/jobs/{job_id}/console"]["get"]["responses"]["200"]["content"]
    assert reply.headers["Content-Type"] in content


async def test_a_devices_jobs_page_newest_first(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        mine = [(await add_session(session, clock() - timedelta(hours=h)))[1][0] for h in (5, 4, 3, 2, 1)]
        await add_session(session, clock(), runs=(Run(device="dev-b1"),))
    first = (await api.get("/devices/dev-a1/jobs?limit=2")).body
    second = (await api.get(f"/devices/dev-a1/jobs?limit=2&cursor={first['next_cursor']}")).body
    third = (await api.get(f"/devices/dev-a1/jobs?limit=2&cursor={second['next_cursor']}")).body
    got = [job["id"] for page in (first, second, third) for job in page["items"]]
    assert got == list(reversed(mine))
    assert third["next_cursor"] is None
    assert (await api.get("/devices/dev-a2/jobs")).body == {"items": [], "next_cursor": None}
    unknown = await api.call("GET", "/devices/dev-a1/jobs?state=failed")
    assert unknown.status == 400
    assert unknown.body["error"]["field"] == "state"


async def test_readers_read_and_anonymous_callers_are_asked_to_sign_in(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        session_id, (job_id,) = await add_session(session, clock(), runs=(Run(output=["hi\n"]),))
    paths = (
        "/sessions",
        f"/sessions/{session_id}",
        f"/jobs/{job_id}",
        f"/jobs/{job_id}/output",
        "/devices/dev-a1/jobs",
    )
    for path in paths:
        for who in (READER, OWNER_A):
            assert (await api.call("GET", path, who=who)).status == 200, (path, who)
        refused = await api.call("GET", path, who=ANONYMOUS)
        assert refused.status == 401, path
        assert refused.body["error"]["code"] == "unauthenticated"


async def test_answers_match_the_openapi_document(api: Api, clock: FakeClock) -> None:
    document = await openapi(api)
    async with api.db.sessions() as session, session.begin():
        session_id, (first, _) = await add_session(
            session, clock(), runs=(Run(state="retried", failure_class="infrastructure"), Run(attempt=2))
        )
        await add_session(
            session, clock(), state=SessionState.QUEUED, conclusion=None, runs=(Run(device=None),)
        )
    samples = [
        ("/sessions", "/sessions", READER),
        ("/sessions?limit=1", "/sessions", READER),
        ("/sessions?device=dev-a1&since=2026-11-01T00:00:00Z", "/sessions", READER),
        ("/sessions?colour=red", "/sessions", READER),
        ("/sessions", "/sessions", ANONYMOUS),
        (f"/sessions/{session_id}", "/sessions/{session_id}", READER),
        ("/sessions/nope", "/sessions/{session_id}", READER),
        (f"/jobs/{first}", "/jobs/{job_id}", READER),
        ("/jobs/0", "/jobs/{job_id}", READER),
        ("/devices/dev-a1/jobs?limit=1", "/devices/{device_id}/jobs", READER),
        ("/devices/dev-a1/jobs?limit=x", "/devices/{device_id}/jobs", READER),
        ("/devices/nope/jobs", "/devices/{device_id}/jobs", READER),
    ]
    for path, template, who in samples:
        validate(document, template, "get", await api.call("GET", path, who=who))
    output = document["paths"]["/jobs/{job_id}/output"]["get"]["responses"]["200"]["content"]
    reply = await api.call("GET", f"/jobs/{first}/output")
    assert reply.headers["Content-Type"] in output
