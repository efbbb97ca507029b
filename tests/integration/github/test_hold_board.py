"""Hold board (issue 30) through the real webhook route, the GitHub stand-in and real agents: a job fails on
a board, its completed check run offers *Hold board*, and a writer's click (or ``/kerrigan hold TASK`` on
the pull request) reserves exactly that board for them; a reader is refused with the reason; a redelivered
click holds nothing more; every hold is in the audit log."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.core.reservations import ReservationState
from kerrigan.store.audit import list_audit
from kerrigan.store.database import Database
from kerrigan.store.models import JobRow, ReservationRow
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import (
    OTHER_SHA,
    REPO,
    Harness,
    StartApp,
    comment,
    settings_for,
)
from tests.integration.github.test_cancel_action import cancel_click, click
from tests.integration.runner.agents import AgentFactory, completed, job_rows, smoke_commit, start_both

FAILING_BOOT = "#!/bin/sh\necho 'boot: no login prompt'\nexit 3\n"
WRITER = "hubot"
READER = "defunkt"


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    client = await start_app(settings_for(lab_db, github, hold_s=900))
    return Harness(client, github, lab_db)


async def failed_run(harness: Harness, agents: AgentFactory) -> tuple[dict[str, Any], JobRow]:
    """hil-smoke pushed with a boot script that fails; its completed check run and the failed job."""
    await start_both(harness, agents)
    [run] = await harness.push_commit(smoke_commit(boot=FAILING_BOOT))
    await completed(harness, run)
    [failed] = [row for row in await job_rows(harness) if row.state == "failed"]
    assert failed.task_id == "boot-som"
    assert failed.device_id is not None
    return harness.github.check_runs[run["id"]], failed


async def holds(harness: Harness) -> list[ReservationRow]:
    async with harness.database.sessions() as db:
        return list((await db.scalars(select(ReservationRow).order_by(ReservationRow.pk))).all())


def summary(harness: Harness, run: dict[str, Any]) -> str:
    return str(harness.github.check_runs[run["id"]]["output"]["summary"])


async def test_a_writers_click_holds_exactly_the_failed_board_and_the_check_run_says_until_when(
    harness: Harness, agents: AgentFactory
) -> None:
    run, failed = await failed_run(harness, agents)
    assert [action["identifier"] for action in run["actions"]] == ["retry", "hold"]
    harness.github.set_permission(REPO, WRITER, "write")

    payload = cancel_click(run, WRITER, identifier="hold")
    await click(harness, payload)

    async def granted() -> bool:
        rows = await holds(harness)
        return bool(rows) and rows[0].state == ReservationState.ACTIVE

    await harness.wait_until(granted, timeout=30)
    [hold] = await holds(harness)
    assert (hold.login, hold.device, hold.device_id, hold.held_job_pk) == (
        WRITER,
        failed.device_id,
        failed.device_id,
        failed.pk,
    )
    assert hold.requirements["labels"] == {"kerrigan.target_id": [failed.device_id]}
    assert hold.duration_s == 900

    async def shown() -> bool:
        return f"@{WRITER} holds `{failed.device_id}` (job {failed.pk}, boot-som) until" in summary(
            harness, run
        )

    await harness.wait_until(shown, timeout=30)

    # GitHub delivers the click again (a new delivery id, as a redelivery or a second click): one hold.
    assert await harness.deliver("check_run", payload) == 202
    await harness.settle()
    assert [row.pk for row in await holds(harness)] == [hold.pk]

    async with harness.database.sessions() as db:
        audited = [entry for entry in await list_audit(db, actor=WRITER) if entry.subject_id == hold.id]
    assert [entry.field for entry in audited] == [f"granted:{failed.device_id}", f"hold:{failed.device_id}"]


async def test_a_readers_click_is_refused_on_the_check_run_with_the_reason(
    harness: Harness, agents: AgentFactory
) -> None:
    run, _ = await failed_run(harness, agents)
    harness.github.set_permission(REPO, READER, "read")

    await click(harness, cancel_click(run, READER, identifier="hold"))

    assert await holds(harness) == []

    async def refused() -> bool:
        return f"@{READER} holds no board: Hold board needs write" in summary(harness, run)

    await harness.wait_until(refused, timeout=30)
    assert f"{READER} has read" in summary(harness, run)


async def test_a_passed_check_run_offers_retry_alone(harness: Harness, agents: AgentFactory) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit(smoke_commit())
    await completed(harness, run)
    assert [action["identifier"] for action in harness.github.check_runs[run["id"]]["actions"]] == ["retry"]


async def test_kerrigan_hold_on_the_pull_request_holds_the_failed_tasks_board_and_replies(
    harness: Harness, agents: AgentFactory
) -> None:
    _, failed = await failed_run(harness, agents)
    harness.github.add_pull(REPO, 7, head_sha=OTHER_SHA, head_ref="uart-loopback")
    harness.github.set_permission(REPO, WRITER, "write")
    harness.github.set_permission(REPO, READER, "read")

    assert await harness.deliver("issue_comment", comment("/kerrigan hold smoke-som", login=WRITER)) == 202
    await harness.settle()
    [reply] = harness.github.comments
    assert "holds no board: no failed job of task `smoke-som` ran on a board" in reply["body"]

    assert await harness.deliver("issue_comment", comment("/kerrigan hold", login=READER)) == 202
    await harness.settle()
    assert "`/kerrigan hold` needs write, maintain or admin permission" in harness.github.comments[-1]["body"]
    assert await holds(harness) == []

    assert await harness.deliver("issue_comment", comment("/kerrigan hold boot-som", login=WRITER)) == 202
    await harness.settle()
    [hold] = await holds(harness)
    assert (hold.login, hold.device, hold.held_job_pk) == (WRITER, failed.device_id, failed.pk)
    reply = harness.github.comments[-1]["body"]
    assert f"@{WRITER} holds the board(s) of failed job {failed.pk} (`boot-som`)" in reply
    assert f"`{failed.device_id}`, reservation `{hold.id[:8]}`" in reply
