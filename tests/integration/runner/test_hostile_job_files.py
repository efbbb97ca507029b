"""What a hostile job leaves for the root agent to read, through the harness and real agents: the agent
reads a job's results and uploads as the job's own files only, whatever the job links into its workspace."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from kerrigan.runner.records import PAGE_BYTES
from kerrigan.store.artifacts import artifacts_of
from kerrigan.store.database import Database
from kerrigan.store.jobs import output
from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import Harness, StartApp, settings_for
from tests.integration.runner.agents import AgentFactory, completed, job_rows, markers, start_both

CAP = 1 << 20  # the server's KERRIGAN_OUTPUT_MAX_BYTES here


@pytest.fixture
async def harness(lab_db: Database, github: GitHubStandIn, start_app: StartApp) -> Harness:
    """The pair, with the lab inventory stored and a job's output capped at :data:`CAP`."""
    return Harness(await start_app(settings_for(lab_db, github, output_max_bytes=CAP)), github, lab_db)


LINKER = """\
name: linker
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: hil
    run: ./scripts/hil.sh
    vcpus: 1
    results: ["results/*.xml"]
    artifacts:
      upload: ["logs/**"]
"""
# The job makes its folders and waits for the links the test makes in them (as the kernel lets a job make
# them itself where fs.protected_hardlinks is 0).
HIL = """\
#!/bin/sh
mkdir -p logs results
echo "the job's console" > logs/console.log
cat > results/own.xml <<XML
<testsuite name="own"><testcase classname="own" name="test_own"/></testsuite>
XML
echo ready > ready
while [ ! -e go ]; do sleep 0.05; done
"""
SECRET_RESULTS = (
    '<testsuite name="leaked"><testcase classname="leaked" name="test_pdu_password_hunter2">'
    '<failure message="hunter2">hunter2</failure></testcase></testsuite>\n'
)


async def test_hard_links_to_root_files_in_a_jobs_workspace_are_neither_uploaded_nor_read_as_results(
    harness: Harness, agents: AgentFactory, tmp_path: Path
) -> None:
    started = await start_both(harness, agents)
    if started[0].isolation.users is None:
        pytest.skip(f"jobs run as the agent's own user here: {', '.join(started[0].isolation.missing)}")
    # Root's files on the work dir's filesystem, as /etc/kerrigan/devices.yml and runner.env are on a host's.
    devices = tmp_path / "devices.yml"
    devices.write_text("devices: {bluebox: {env: {PDU_PASSWORD: hunter2}}}\n")
    report = tmp_path / "report.xml"
    report.write_text(SECRET_RESULTS)
    for secret in (devices, report):
        secret.chmod(0o600)
    [run] = await harness.push_commit({".kerrigan/workflows/linker.yml": LINKER, "scripts/hil.sh": HIL})

    [marker] = await wait_until(lambda: markers(tmp_path, "ready"), timeout=30)
    workspace = marker.parent
    os.link(devices, workspace / "logs" / "x")
    os.link(report, workspace / "results" / "x.xml")
    (workspace / "go").touch()
    await completed(harness, run)

    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    summary = final["output"]["summary"]
    assert "test_own" in summary  # the job's own results are read
    assert "hunter2" not in summary
    assert "x.xml" not in summary
    [row] = await job_rows(harness)
    async with harness.database.sessions() as session:
        [files] = (await artifacts_of(session, [row.pk])).values()
    assert {file.path for file in files} == {"logs/console.log"}


TRUNCATE = """\
name: truncate
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: hil
    run: /usr/bin/python3 -I scripts/truncate.py
    vcpus: 1
"""
# The review's job: its stdout stretched to 128 MiB of holes, which the agent would have cut into pages.
TRUNCATE_PY = """\
import os
print("written before the truncation", flush=True)
try:
    os.ftruncate(1, 128 << 20)
except OSError as err:
    print("ftruncate refused:", err.strerror, flush=True)
print("written after the truncation", flush=True)
"""


async def test_a_job_that_stretches_its_stdout_cannot_push_the_agent_past_the_cap_nor_lose_its_output(
    harness: Harness, agents: AgentFactory
) -> None:
    started = await start_both(harness, agents)
    [run] = await harness.push_commit(
        {".kerrigan/workflows/truncate.yml": TRUNCATE, "scripts/truncate.py": TRUNCATE_PY}
    )
    await completed(harness, run, timeout=120)

    [row] = await job_rows(harness)
    async with harness.database.sessions() as session:
        printed = "".join(data for _, data in await output(session, row.pk))
    assert "written before the truncation" in printed
    assert "written after the truncation" in printed
    assert row.log_bytes <= CAP + PAGE_BYTES  # the pages sent stay within the server's cap
    for agent in started:  # and the pages the agent cut stay within its own, on its disk
        pages = agent.records.folder(str(row.pk)) / "pages"
        if pages.exists():
            assert sum(page.stat().st_size for page in pages.glob("*.log")) <= CAP + PAGE_BYTES


NAMES = """\
name: names
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: hil
    run: ./scripts/names.sh
    vcpus: 1
    results: ["results/*.xml"]
    artifacts:
      upload: ["logs/**"]
"""
# File names no URL can carry (not UTF-8), beside ordinary ones.
NAMES_SH = """\
#!/bin/sh
mkdir -p logs results
echo "the job's console" > logs/console.log
echo "odd" > "logs/$(printf 'odd-\\377')"
echo '<testsuite name="own"><testcase classname="own" name="test_own"/></testsuite>' > results/own.xml
cp results/own.xml "results/$(printf 'odd-\\377').xml"
"""


async def test_files_named_in_no_encoding_are_passed_over_and_the_job_still_ends(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit({".kerrigan/workflows/names.yml": NAMES, "scripts/names.sh": NAMES_SH})
    await completed(harness, run)

    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert "test_own" in final["output"]["summary"]
    [row] = await job_rows(harness)
    async with harness.database.sessions() as session:
        [files] = (await artifacts_of(session, [row.pk])).values()
    assert {file.path for file in files} == {"logs/console.log"}
