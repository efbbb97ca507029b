"""Each session's and job's transitions are logged at info, naming the delivery that caused them (when one
did), the session, the job and the repository: a push's lines can be followed with ``jq``."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from sqlalchemy import select

from kerrigan.logs import configure_logging
from kerrigan.store.leases import leased_devices
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import MANIFESTS, OTHER_SHA, REPO, Harness, push_payload

DELIVERY = "5c0ffee0-0000-4000-8000-000000000026"


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The process's log as JSON lines in a buffer; what pytest and the other tests had is put back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    yield stream
    structlog.contextvars.clear_contextvars()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()


def _events(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith("{")]


async def test_a_push_s_session_and_job_transitions_name_the_delivery_session_job_and_repository(
    harness: Harness, log_lines: io.StringIO
) -> None:
    # org-class.yml, pushed, asks for devices no pool has: the delivery resolves it and its job ends at once.
    manifest = (MANIFESTS / "org-class.yml").read_text().replace("pull_request:", "push:")
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/org.yml": manifest})
    assert await harness.deliver("push", push_payload(OTHER_SHA), DELIVERY) == 202
    await harness.settle()
    [session] = await harness.sessions()
    moves = [event for event in _events(log_lines) if event.get("logger") == "kerrigan.store.transition_log"]
    assert moves, log_lines.getvalue()
    assert all(event["level"] == "info" for event in moves)
    assert all(event["session_id"] == session.id and event["repository"] == REPO for event in moves)
    sessions = [event for event in moves if "job_id" not in event]
    jobs = [event for event in moves if "job_id" in event]
    assert [event["delivery_id"] for event in sessions + jobs] == [DELIVERY] * len(moves)
    assert any(
        event["event"] == f"session {session.id}: queued -> completed (failure)" for event in sessions
    ), sessions
    async with harness.database.sessions() as db:
        [job] = (await db.scalars(select(JobRow.pk))).all()
    assert [(event["event"], event["job_id"]) for event in jobs] == [
        (f"job {job} regression: queued -> refused_before_start (unschedulable)", str(job))
    ]


async def test_a_job_run_by_a_runner_logs_each_move_with_its_session_and_host_never_another_delivery(
    harness: Harness, log_lines: io.StringIO
) -> None:
    manifest = (MANIFESTS / "select-device.yml").read_text()  # one task, on modalix-bluebox (lab-a-01)
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/one.yml": manifest})
    assert await harness.deliver("push", push_payload(OTHER_SHA), DELIVERY) == 202
    await harness.settle()

    async def leased() -> bool:
        async with harness.database.sessions() as session:
            return len(await leased_devices(session)) == 1

    await wait_until(leased)
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", harness.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    client = harness.client
    await client.post("/api/runner/v1/register", json={"protocol": [1], "resources": {}}, headers=headers)
    [offer] = (await (await client.get("/api/runner/v1/poll", headers=headers)).json())["offers"]
    for call, body in (("accept", None), ("start", None), ("finish", {"exit_status": 0})):
        response = await client.post(f"/api/runner/v1/jobs/{offer['id']}/{call}", json=body, headers=headers)
        assert response.status == 200, await response.text()
    await harness.settle()
    [session] = await harness.sessions()
    moves = [event for event in _events(log_lines) if event.get("logger") == "kerrigan.store.transition_log"]
    job = int(offer["id"])
    by_runner = [event for event in moves if event.get("runner_host") == "lab-a-01"]
    assert [event["event"] for event in by_runner] == [
        f"job {job} bring-up: leased -> accepted",
        f"job {job} bring-up: accepted -> running",
        f"session {session.id}: queued -> in_progress",
        f"job {job} bring-up: running -> succeeded",
        f"session {session.id}: in_progress -> completed (success)",
    ]
    assert all(event["session_id"] == session.id and event["repository"] == REPO for event in moves)
    assert all(event["job_id"] == str(job) for event in by_runner if event["event"].startswith("job "))
    assert not [event for event in by_runner if "delivery_id" in event]
    assert f"job {job} bring-up: queued -> leased" in [event["event"] for event in moves]
