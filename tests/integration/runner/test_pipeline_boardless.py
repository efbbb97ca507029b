"""A pipeline whose build holds no board, through the harness and real agents: ``build`` (``board: none``)
runs on a runner host while no device is leased to anyone, with no device in its environment; ``test``
(a board, ``needs: build``) is leased its board only once the build has succeeded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from kerrigan.store.leases import leased_devices
from kerrigan.store.models import HostLeaseRow, JobRow
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory, completed, job_output, job_rows, start_both

PIPELINE = """\
name: build-then-test
on: {push: {branches: [main]}}
tasks:
  - id: build
    run: ./scripts/build.sh
    board: none
    vcpus: 1
  - id: test
    run: ./scripts/test.sh
    vcpus: 1
    needs: build
    requirements: {labels: {sdk: "2.2.0", form_factor: som}}
"""
# The build tells the test it runs, then waits for the test's word (a file in its workspace) so the test
# can look at the leases while it runs; a bound keeps a forgotten build from hanging the run.
BUILD = """\
#!/bin/sh
echo "device [${KERRIGAN_DEVICE_ID-unset}] board [${KERRIGAN_DEVICE_BOARD-unset}]"
echo "devices [${KERRIGAN_DEVICES_JSON-unset}]"
echo "cpus $KERRIGAN_CPUS"
touch building
i=0
while [ ! -e go ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
echo built
"""
TEST = '#!/bin/sh\necho "test on $KERRIGAN_DEVICE_ID ($KERRIGAN_DEVICE_BOARD)"\n'


async def test_the_build_holds_no_board_and_the_test_is_leased_one_only_after_it(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    await start_both(harness, agents)
    files = {".kerrigan/workflows/pipeline.yml": PIPELINE, "scripts/build.sh": BUILD, "scripts/test.sh": TEST}
    [run] = await harness.push_commit(files)

    async def building() -> Path | None:
        found = sorted(tmp_path.glob("*/workspaces/*build*/building"))
        return found[0].parent if found else None

    workspace: Path = await wait_until(building, timeout=60)
    # The build runs: it holds room on its runner host, and no device is leased to anyone.
    async with harness.database.sessions() as session:
        assert await leased_devices(session) == set()
        build = await session.scalar(select(JobRow).where(JobRow.task_id == "build"))
        test = await session.scalar(select(JobRow).where(JobRow.task_id == "test"))
        rooms = dict((await session.execute(select(HostLeaseRow.job_pk, HostLeaseRow.host))).all())
    assert build is not None
    assert test is not None
    assert (build.state, build.device_id) == ("running", None)
    assert build.host in ("lab-a-01", "lab-a-02")
    assert rooms == {build.pk: build.host}
    assert workspace.parts[-3] == build.host  # it runs on the host the server leased it to
    assert (test.state, test.device_id) == ("waiting", None)
    (workspace / "go").touch()

    await completed(harness, run, timeout=60)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    rows = {row.task_id: row for row in await job_rows(harness)}
    built, tested = rows["build"], rows["test"]
    assert (built.state, built.device_id, built.host) == ("succeeded", None, build.host)
    assert tested.state == "succeeded"
    assert tested.device_id in ("modalix-bluebox", "modalix-redbox")
    assert built.finished_at is not None
    assert tested.started_at is not None
    assert tested.started_at >= built.finished_at
    output = await job_output(harness, built.pk)
    assert "device [unset] board [unset]\ndevices [unset]" in output
    assert "built" in output
    assert f"test on {tested.device_id} (modalix)" in await job_output(harness, tested.pk)
    summary = final["output"]["summary"]
    assert f"| `build` | succeeded | no board | `{build.host}` |" in summary
    assert built.accounting is not None
    assert built.accounting["reservation_use"]["vcpus"] == 1  # its claim, accounted as any job's
    async with harness.database.sessions() as session:
        assert await leased_devices(session) == set()
        assert (await session.execute(select(HostLeaseRow))).first() is None
