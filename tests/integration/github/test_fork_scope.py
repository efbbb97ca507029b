"""A fork's manifest reaches its own sessions only: its concurrency group never meets the repository's (nor
another fork's), it supersedes nothing while it waits for approval, and its ``priority: gate`` does not jump
the lab's queue. Both shapes a fork arrives in: its pull request, and a workflow run of its commit."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from kerrigan.store.models import JobRow, SessionRow
from tests.integration.github.conftest import REPO, Harness, push_payload, webhook

OWN = "1" * 40  # the repository's own commit on main
FORKED = "2" * 40  # mona's commit, on her fork's main
FORKED_AGAIN = "3" * 40
WRITER = "octocat"
NUMBER = 8
MANIFEST = """name: nightly
on:
  push: {{branches: [main]}}
  pull_request: {{branches: [main]}}
  workflow_run: {{workflows: [build-firmware]}}
{extra}
scheduling:
  labels: {{sdk: "2.2.0", form_factor: som}}
{scheduling}
tasks:
  - id: smoke
    run: ./smoke.sh
"""
# What a hostile fork writes: the repository's own group, and running sessions cancelled.
TAKEOVER = 'concurrency: {group: "nightly/main", cancel: in_progress}'


def files(extra: str = "", scheduling: str = "") -> dict[str, str]:
    return {".kerrigan/workflows/nightly.yml": MANIFEST.format(extra=extra, scheduling=scheduling)}


async def deliver(harness: Harness, event: str, payload: dict[str, Any]) -> None:
    assert await harness.deliver(event, payload) == 202
    await harness.settle()
    [*_, delivery] = await harness.deliveries()
    assert delivery.error is None


async def own_push(harness: Harness, *, running: bool, extra: str = TAKEOVER, scheduling: str = "") -> None:
    """The repository's own commit on main, queued or (as far as the store knows) running."""
    harness.github.add_commit(REPO, OWN, files(extra, scheduling))
    await deliver(harness, "push", push_payload(OWN))
    if running:
        async with harness.database.sessions() as session, session.begin():
            row = await session.scalar(select(SessionRow).where(SessionRow.head_sha == OWN))
            assert row is not None
            job = await session.scalar(select(JobRow).where(JobRow.session_pk == row.pk))
            assert job is not None
            job.state, job.started_at, job.device_id = "running", harness.database.clock(), "modalix-bluebox"
            row.state = "in_progress"


async def fork_arrives(
    harness: Harness, shape: str, sha: str = FORKED, extra: str = TAKEOVER, **more: str
) -> None:
    """mona's commit arrives as her pull request #8 (opened, or synchronize for a later commit) or as a run of
    GitHub Actions on her fork's ``main``."""
    harness.github.add_commit(REPO, sha, files(extra, **more))
    if NUMBER in harness.github.repositories[REPO].pulls:
        harness.github.push_to_pull(REPO, NUMBER, sha, at="2026-11-29T12:00:00Z")
    else:
        harness.github.add_pull(REPO, NUMBER, head_sha=sha, head_ref="main", fork="mona/firmware")
    if shape == "pull_request":
        payload = webhook("pull_request-fork")
        payload["action"] = "opened" if sha == FORKED else "synchronize"
        payload["pull_request"]["head"].update(sha=sha, ref="main")
        await deliver(harness, "pull_request", payload)
    else:
        payload = webhook("workflow_run-completed")
        payload["workflow_run"].update(head_sha=sha, head_branch="main")
        payload["workflow_run"]["head_repository"]["full_name"] = "mona/firmware"
        await deliver(harness, "workflow_run", payload)


async def approve(harness: Harness, sha: str) -> None:
    harness.github.set_permission(REPO, WRITER, "write")
    payload = webhook("issue_comment-retry")
    payload["comment"].update(body=f"/kerrigan approve {sha}", id=int(sha[:6], 16))
    payload["issue"]["number"] = NUMBER
    for user in (payload["sender"], payload["comment"]["user"]):
        user["login"] = WRITER
    await deliver(harness, "issue_comment", payload)


async def row_of(harness: Harness, sha: str) -> SessionRow:
    async with harness.database.sessions() as session:
        [row] = (await session.scalars(select(SessionRow).where(SessionRow.head_sha == sha))).all()
        return row


async def untouched(harness: Harness, sha: str, state: str) -> None:
    row = await row_of(harness, sha)
    assert (row.state, row.cancel_reason, row.cancelled_by) == (state, None, None)
    async with harness.database.sessions() as session:
        job = await session.scalar(select(JobRow).where(JobRow.session_pk == row.pk))
        assert job is not None
        assert job.cancel_requested_at is None


SHAPES = ["pull_request", "workflow_run"]


@pytest.mark.parametrize("running", [False, True], ids=["queued", "running"])
@pytest.mark.parametrize("shape", SHAPES)
async def test_a_fork_writing_the_repositorys_group_cancels_nothing_of_the_repositorys(
    harness: Harness, shape: str, running: bool
) -> None:
    await own_push(harness, running=running)
    state = "in_progress" if running else "queued"
    await fork_arrives(harness, shape)
    forked = await row_of(harness, FORKED)
    assert forked.awaiting_approval
    await untouched(harness, OWN, state)
    await approve(harness, FORKED)  # approved, it is still grouped apart
    forked = await row_of(harness, FORKED)
    assert (forked.awaiting_approval, forked.state, forked.fork_owner) == (False, "queued", "mona")
    await untouched(harness, OWN, state)


@pytest.mark.parametrize("shape", SHAPES)
async def test_the_repositorys_own_commit_does_not_supersede_a_forks_session(
    harness: Harness, shape: str
) -> None:
    await fork_arrives(harness, shape)
    await approve(harness, FORKED)
    await own_push(harness, running=False)
    await untouched(harness, FORKED, "queued")


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_forks_waiting_session_supersedes_nothing_until_approved_then_only_its_own(
    harness: Harness, shape: str
) -> None:
    await fork_arrives(harness, shape, extra="")
    await approve(harness, FORKED)
    await fork_arrives(harness, shape, FORKED_AGAIN, extra="")
    await untouched(harness, FORKED, "queued")  # the newer commit waits, and so cancels nothing yet
    await approve(harness, FORKED_AGAIN)
    older = await row_of(harness, FORKED)
    assert (older.state, older.cancel_reason) == ("completed", f"superseded by {FORKED_AGAIN[:7]}")


@pytest.mark.parametrize(
    ("shape", "branch", "group"),
    [
        ("pull_request", "mona:main", "nightly/pull/8"),
        ("workflow_run", "mona:main", "nightly/mona:main"),
    ],
)
async def test_a_forks_branch_is_named_with_its_owner(
    harness: Harness, shape: str, branch: str, group: str
) -> None:
    await own_push(harness, running=False, extra="")
    await fork_arrives(harness, shape, extra="")
    forked = await row_of(harness, FORKED)
    assert (forked.head_branch, forked.concurrency_group, forked.fork_owner) == (branch, group, "mona")
    own = await row_of(harness, OWN)
    assert (own.head_branch, own.concurrency_group, own.fork_owner) == ("main", "nightly/main", None)


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_forks_gate_priority_runs_as_normal_and_its_session_says_why(
    harness: Harness, shape: str
) -> None:
    await own_push(harness, running=False, extra="", scheduling="  priority: gate")
    await fork_arrives(harness, shape, extra="", scheduling="  priority: gate")
    assert (await row_of(harness, FORKED)).priority == "normal"  # waiting, it already stands as normal
    await approve(harness, FORKED)
    own, forked = await row_of(harness, OWN), await row_of(harness, FORKED)
    assert (own.priority, forked.priority) == ("gate", "normal")
    [warning] = forked.resolution["warnings"]  # the session page lists it under Warnings
    assert (warning["field"], warning["line"]) == ("scheduling.priority", 7)
    assert warning["message"].startswith("priority gate is the repository's own to ask for")
    assert own.resolution["warnings"] == []


async def test_a_retry_of_a_forks_session_stays_in_the_forks_scope(harness: Harness) -> None:
    await fork_arrives(harness, "pull_request", extra="", scheduling="  priority: gate")
    await approve(harness, FORKED)
    payload = webhook("issue_comment-retry")
    payload["comment"]["body"] = "/kerrigan retry nightly"
    payload["issue"]["number"] = NUMBER
    for user in (payload["sender"], payload["comment"]["user"]):
        user["login"] = WRITER
    await deliver(harness, "issue_comment", payload)
    first, retried = await harness.sessions(head_sha=FORKED)
    assert (retried.priority, retried.fork_owner, retried.head_branch) == ("normal", "mona", "mona:main")
    assert first.id != retried.id
