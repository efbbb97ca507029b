"""A newer commit supersedes an older one (the manifest's ``concurrency``), through the webhook route, the
store and the GitHub stand-in: no runner is up, so the jobs wait in the queue."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kerrigan.store.models import JobRow, SessionRow
from tests.integration.github.conftest import REPO, Harness, push_payload, webhook

FIRST = "1" * 40
SECOND = "2" * 40
MANIFEST = """name: hil
on: [push, merge_group]
{concurrency}
scheduling:
  labels: {{sdk: "2.2.0", form_factor: som}}
tasks:
  - id: smoke
    run: ./smoke.sh
"""


def files(concurrency: str = "") -> dict[str, str]:
    return {".kerrigan/workflows/hil.yml": MANIFEST.format(concurrency=concurrency)}


async def push(harness: Harness, sha: str, concurrency: str = "", ref: str = "refs/heads/main") -> None:
    harness.github.add_commit(REPO, sha, files(concurrency))
    assert await harness.deliver("push", push_payload(sha, ref=ref)) == 202
    await harness.settle()


def run_of(harness: Harness, sha: str) -> dict[str, Any]:
    [run] = [run for run in harness.github.check_runs.values() if run["head_sha"] == sha]
    return run


async def row_of(harness: Harness, sha: str) -> SessionRow:
    async with harness.database.sessions() as session:
        [row] = (await session.scalars(select(SessionRow).where(SessionRow.head_sha == sha))).all()
        return row


async def test_a_second_push_to_a_branch_cancels_the_first_commits_queued_session(harness: Harness) -> None:
    await push(harness, FIRST)
    await push(harness, SECOND)
    first, second = run_of(harness, FIRST), run_of(harness, SECOND)
    assert (first["status"], first.get("conclusion")) == ("completed", "cancelled")
    assert "Superseded by 2222222" in first["output"]["title"] + first["output"]["summary"]
    assert second["status"] == "queued"
    row = await row_of(harness, FIRST)
    assert (row.cancelled_by, row.cancel_reason) == (None, "superseded by 2222222")
    assert row.concurrency_group == "hil/main"
    assert (await row_of(harness, SECOND)).concurrency_group == "hil/main"


async def test_a_push_to_another_branch_supersedes_nothing(harness: Harness) -> None:
    await push(harness, FIRST)
    await push(harness, SECOND, ref="refs/heads/release/2")
    assert run_of(harness, FIRST)["status"] == "queued"
    assert (await row_of(harness, SECOND)).concurrency_group == "hil/release/2"


async def test_cancel_none_keeps_both_commits(harness: Harness) -> None:
    await push(harness, FIRST)
    await push(harness, SECOND, "concurrency: {cancel: none}")
    assert [run_of(harness, sha)["status"] for sha in (FIRST, SECOND)] == ["queued", "queued"]
    assert (await row_of(harness, FIRST)).cancel_reason is None


async def test_a_group_of_the_commit_never_meets_another_commit(harness: Harness) -> None:
    group = 'concurrency: {group: "{workflow}-{sha}"}'
    await push(harness, FIRST, group)
    await push(harness, SECOND, group)
    assert run_of(harness, FIRST)["status"] == "queued"
    assert (await row_of(harness, FIRST)).concurrency_group == f"hil-{FIRST}"


async def start_first_job(harness: Harness) -> None:
    """The first commit's job runs, as far as the store knows (no runner is needed to say so)."""
    async with harness.database.sessions() as session, session.begin():
        row = await session.scalar(select(SessionRow).where(SessionRow.head_sha == FIRST))
        assert row is not None
        job = await session.scalar(select(JobRow).where(JobRow.session_pk == row.pk))
        assert job is not None
        job.state, job.started_at, job.device_id = "running", harness.database.clock(), "modalix-bluebox"
        row.state = "in_progress"


async def test_a_running_session_is_left_alone_by_default(harness: Harness) -> None:
    await push(harness, FIRST)
    await start_first_job(harness)
    await push(harness, SECOND)
    row = await row_of(harness, FIRST)
    assert (row.state, row.cancel_reason) == ("in_progress", None)


async def test_cancel_in_progress_asks_the_running_job_to_stop(harness: Harness) -> None:
    await push(harness, FIRST, "concurrency: {cancel: in_progress}")
    await start_first_job(harness)
    await push(harness, SECOND, "concurrency: {cancel: in_progress}")
    row = await row_of(harness, FIRST)
    assert row.cancel_reason == "superseded by 2222222"
    async with harness.database.sessions() as session:
        job = await session.scalar(select(JobRow).where(JobRow.session_pk == row.pk))
        assert job is not None
        assert (job.state, job.cancel_requested_at is not None) == ("running", True)  # its runner stops it


async def merge_group(harness: Harness, sha: str) -> None:
    payload = webhook("merge_group-checks_requested")
    payload["merge_group"]["head_sha"] = sha
    harness.github.add_commit(REPO, sha, files())
    assert await harness.deliver("merge_group", payload) == 202
    await harness.settle()


async def test_merge_group_sessions_are_never_superseded_and_supersede_nothing(harness: Harness) -> None:
    await merge_group(harness, FIRST)
    await merge_group(harness, SECOND)  # the same merge queue branch, another commit
    assert [run_of(harness, sha)["status"] for sha in (FIRST, SECOND)] == ["queued", "queued"]
    assert (await row_of(harness, FIRST)).concurrency_group is None
