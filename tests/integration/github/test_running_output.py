"""A running job's check run shows its latest lines while it runs, through the reconciler and the GitHub
stand-in; output makes a check-run version at most once every 10 s of the store's (fake) clock, however
many chunks arrive."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from kerrigan.store.check_runs import OUTPUT_VERSION_EVERY
from kerrigan.store.leases import leased_devices
from kerrigan.store.models import SessionRow
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import OTHER_SHA, REPO, Harness, push_payload

MANIFEST = (
    "name: one\non: [push]\nscheduling: {labels: {kerrigan.target_id: modalix-bluebox}}\n"
    "tasks:\n  - {id: only, run: ./x.sh}\n"
)


class RunningJob:
    """The job of ``one.yml`` on lab-a-01, started, sending output as its runner host would."""

    def __init__(self, harness: Harness, job: str, headers: dict[str, str]) -> None:
        self.harness, self.job, self.headers = harness, job, headers
        self.seq = self.offset = 0

    async def call(self, step: str, body: dict[str, Any] | None = None) -> None:
        response = await self.harness.client.post(
            f"/api/runner/v1/jobs/{self.job}/{step}", json=body or {}, headers=self.headers
        )
        assert response.status == 200, await response.text()

    async def send(self, data: str) -> None:
        await self.call("output", {"seq": self.seq, "offset": self.offset, "data": data})
        self.seq += 1
        self.offset += len(data.encode())


async def running_job(harness: Harness) -> tuple[RunningJob, int]:
    """The job, running, and its check run's id once GitHub shows it in progress."""
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/one.yml": MANIFEST})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()

    async def leased() -> bool:
        async with harness.database.sessions() as session:
            return await leased_devices(session) == {"modalix-bluebox"}

    await wait_until(leased)
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", harness.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    await harness.client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=headers)
    [offer] = (await (await harness.client.get("/api/runner/v1/poll", headers=headers)).json())["offers"]
    job = RunningJob(harness, str(offer["id"]), headers)
    await job.call("accept")
    await job.call("start")
    await harness.settle()
    [run] = harness.github.check_runs.values()
    assert run["status"] == "in_progress"
    return job, int(run["id"])


async def version(harness: Harness) -> int:
    async with harness.database.sessions() as session:
        return int(await session.scalar(select(SessionRow.version)) or 0)


def updates(harness: Harness, run_id: int) -> int:
    """How many times Kerrigan updated the check run at the stand-in."""
    path = f"/repos/{REPO}/check-runs/{run_id}"
    return sum(1 for request in harness.github.requests if request.method == "PATCH" and request.path == path)


async def test_a_running_jobs_check_run_shows_its_latest_lines(harness: Harness, clock: FakeClock) -> None:
    job, run_id = await running_job(harness)
    clock.advance(OUTPUT_VERSION_EVERY.total_seconds())
    await job.send("".join(f"step {n} <ok>\n" for n in range(1, 31)))
    await harness.settle()

    shown = harness.github.check_runs[run_id]
    assert shown["status"] == "in_progress"
    summary = shown["output"]["summary"]
    assert "<details open><summary>only: latest lines of output, while it runs</summary>" in summary
    tail = summary.split("```\n", 1)[1].split("\n```", 1)[0]
    assert tail.splitlines() == [f"step {n} <ok>" for n in range(11, 31)]  # the last 20 lines

    # Its end shows the last lines as before, folded.
    await job.call("finish", {"exit_status": 0})
    await harness.settle()
    done = harness.github.check_runs[run_id]
    assert done["conclusion"] == "success"
    assert "<details><summary>only: last lines of output</summary>" in done["output"]["summary"]


async def test_output_records_at_most_one_version_every_10_s(harness: Harness, clock: FakeClock) -> None:
    job, run_id = await running_job(harness)
    started, patched = await version(harness), updates(harness, run_id)

    for n in range(50):  # within 10 s of the start's version: none of these makes one
        await job.send(f"early {n}\n")
    await harness.settle()
    assert await version(harness) == started
    assert updates(harness, run_id) == patched
    assert "early" not in harness.github.check_runs[run_id]["output"]["summary"]

    for _ in range(6):  # every 4 s for 24 s: versions at 12 s and 24 s, each 10 s after the last
        clock.advance(4)
        for n in range(10):
            await job.send(f"late {n}\n")
        await harness.settle()
    assert await version(harness) == started + 2
    assert updates(harness, run_id) == patched + 2
    assert "late 9" in harness.github.check_runs[run_id]["output"]["summary"]
