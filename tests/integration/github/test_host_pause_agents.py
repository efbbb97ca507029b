"""A paused runner host drains, with real agents: its running job finishes as ever, and a push after the
pause gets none of its devices; its check run says who paused the host and why. Resumed, it takes work again.
The lab is ``fixtures/inventory/lab.yml``; hil-smoke runs on lab-a-01 (modalix-bluebox) and lab-a-02."""

from __future__ import annotations

from pathlib import Path

from kerrigan.core.device_status import HostPause
from kerrigan.store.audit import Change
from kerrigan.store.runners import set_pause
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import (
    BOOT,
    AgentFactory,
    completed,
    job_rows,
    markers,
    smoke_commit,
    start_both,
)

SLOW = "#!/bin/sh\necho started > started-$KERRIGAN_DEVICE_ID\nsleep 2\necho smoke done\n"


async def test_a_paused_host_finishes_its_job_and_takes_no_new_one_until_resumed(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
) -> None:
    db = harness.database
    await start_both(harness, agents)
    files = smoke_commit(smoke=SLOW, boot=BOOT)
    [first] = await harness.push_commit(files)

    async def running_on_bluebox() -> bool:
        return any(
            row.device_id == "modalix-bluebox" and row.state == "running" for row in await job_rows(harness)
        )

    await harness.wait_until(running_on_bluebox, timeout=30)
    async with db.sessions() as session, session.begin():
        pause = HostPause("kernel upgrade", "octocat", db.clock())
        assert await set_pause(session, "lab-a-01", pause, Change("octocat", db.clock())) is not None
    await completed(harness, first)  # drained: the job there ended as ever
    assert harness.github.check_runs[first["id"]]["conclusion"] == "success"

    [second] = [run for run in await harness.push_commit(files, sha="c" * 40) if run["head_sha"] == "c" * 40]
    await completed(harness, second, timeout=60)  # both tasks, one after the other, on lab-a-02
    rows = await job_rows(harness)
    later = [row for row in rows if row.session_pk == rows[-1].session_pk]
    assert {row.host for row in later} == {"lab-a-02"}
    assert harness.github.check_runs[second["id"]]["conclusion"] == "success"
    # While one task waited, its check run said why bluebox was not used (in some version sent).
    sent = harness.requests("PATCH", f"/check-runs/{second['id']}") + harness.requests("POST", "/check-runs")
    texts = [str(request.body) for request in sent]
    assert any("runner host lab-a-01 paused by octocat: kernel upgrade" in text for text in texts)

    async with db.sessions() as session, session.begin():
        await set_pause(session, "lab-a-01", None, Change("octocat", db.clock()))
    [third] = [run for run in await harness.push_commit(files, sha="d" * 40) if run["head_sha"] == "d" * 40]
    await completed(harness, third)
    assert "lab-a-01" in {row.host for row in await job_rows(harness)}
    assert markers(tmp_path, "started-modalix-bluebox")
