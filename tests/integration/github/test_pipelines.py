"""Pipelines through the harness and real agents: ``env`` reaches the command, ``needs`` orders tasks and
skips the dependents of a failure, ``matrix`` makes a job per combination with its values in."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from kerrigan.core.matrix import shown_name
from kerrigan.runner import reporting
from kerrigan.store.artifacts import artifact_data, artifacts_of
from tests.integration.github.conftest import PUBLIC_URL, Harness
from tests.integration.runner.agents import (
    HIL,
    RESULTS,
    AgentFactory,
    completed,
    job_output,
    job_rows,
    start_both,
)

PIPELINE = """\
name: pipeline
on: {push: {branches: [main]}}
env: {BAUD: "115200", MODE: workflow}
scheduling:
  labels: {form_factor: som}
tasks:
  - id: build
    run: ./scripts/build.sh
    vcpus: 1
    env: {MODE: task}
    requirements: {labels: {sdk: "2.2.0"}}
  - id: test
    run: ./scripts/test.sh
    vcpus: 1
    needs: build
    matrix: {sdk: ["2.2.0", "2.1.1"]}
    requirements: {labels: {sdk: "{matrix.sdk}"}}
    env: {SDK: "{matrix.sdk}"}
"""
TEST = '#!/bin/sh\necho "sdk $SDK baud $BAUD on $KERRIGAN_DEVICE_ID"\n'


def pipeline(build_exit: int = 0) -> dict[str, str]:
    build = f'#!/bin/sh\necho "baud $BAUD mode $MODE"\nexit {build_exit}\n'
    return {".kerrigan/workflows/pipeline.yml": PIPELINE, "scripts/build.sh": build, "scripts/test.sh": TEST}


async def test_env_reaches_the_command_and_a_matrix_task_runs_after_its_need(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit(pipeline())
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    rows = {row.task_id: row for row in await job_rows(harness)}
    assert set(rows) == {"build", "test[sdk=2.2.0]", "test[sdk=2.1.1]"}
    assert {row.state for row in rows.values()} == {"succeeded"}
    build = rows["build"]
    assert build.finished_at is not None
    for key in ("test[sdk=2.2.0]", "test[sdk=2.1.1]"):
        started = rows[key].started_at
        assert started is not None
        assert started >= build.finished_at  # queued only once build succeeded
    assert "baud 115200 mode task" in await job_output(harness, build.pk)  # the task's MODE wins
    assert "sdk 2.1.1 baud 115200 on modalix-old-01" in await job_output(harness, rows["test[sdk=2.1.1]"].pk)
    assert "sdk 2.2.0 baud 115200 on " in await job_output(harness, rows["test[sdk=2.2.0]"].pk)


async def test_a_failed_need_skips_its_dependents_and_the_check_run_fails(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    [run] = await harness.push_commit(pipeline(build_exit=3))
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "failure"
    rows = {row.task_id: row for row in await job_rows(harness)}
    assert rows["build"].state == "failed"
    for key in ("test[sdk=2.2.0]", "test[sdk=2.1.1]"):
        assert (rows[key].state, rows[key].detail) == ("skipped", "needs build (failed)")
        assert f"| `{shown_name(key)}` | skipped (needs build (failed)) |" in final["output"]["summary"]
        assert rows[key].started_at is None
    assert "needs build (failed)" in final["output"]["summary"]


async def test_junit_results_become_a_table_and_an_annotation_on_the_failing_line(
    harness: Harness, agents: AgentFactory
) -> None:
    failed_before = REGISTRY.get_sample_value("kerrigan_tests_total", {"outcome": "failed"}) or 0.0
    await start_both(harness, agents)
    files = {".kerrigan/workflows/results.yml": RESULTS, "scripts/hil.sh": HIL, "tests/test_uart.py": "x\n"}
    [run] = await harness.push_commit(files)
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    summary = final["output"]["summary"]
    assert final["conclusion"] == "failure"
    assert "### Test results" in summary
    assert "3 tests in 2 files" in summary
    # Failures first; the broken file is reported, not fatal; the symlink out of the workspace is not read.
    table = summary[summary.index("| result | test |") :]
    assert table.index("tests.test_uart.test_echo") < table.index("tests.test_uart.test_baud")
    assert "results/broken.xml" in summary
    assert "malformed XML" in summary
    assert "passwd" not in summary
    [annotation] = final["output"]["annotations"]
    assert (annotation["path"], annotation["start_line"]) == ("tests/test_uart.py", 42)
    assert annotation["title"] == "tests.test_uart.test_echo"
    assert annotation["message"] == "assert 'x' == 'y'"
    metrics = await (await harness.client.get("/metrics")).text()
    assert f'kerrigan_tests_total{{outcome="failed"}} {failed_before + 1}' in metrics  # process-wide


UPLOAD = """\
name: upload
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: soak
    run: ./scripts/soak.sh
    vcpus: 1
    artifacts:
      upload: ["logs/**", big.bin, missing.txt]
"""
SOAK = """\
#!/bin/sh
mkdir -p logs/uart
i=0; while [ $i -lt 2000 ]; do echo "console line $i"; i=$((i+1)); done > logs/console.log
echo rx > logs/uart/rx.txt
head -c 60000 /dev/zero > big.bin
ln -s /etc/passwd logs/passwd
"""


async def test_uploaded_files_are_kept_with_the_job_and_linked_from_the_check_run(
    harness: Harness, agents: AgentFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reporting, "MAX_UPLOAD_BYTES", 50_000)  # big.bin is over it: declared, not sent
    await start_both(harness, agents)
    [run] = await harness.push_commit({".kerrigan/workflows/upload.yml": UPLOAD, "scripts/soak.sh": SOAK})
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    [row] = await job_rows(harness)
    async with harness.database.sessions() as session:
        [files] = (await artifacts_of(session, [row.pk])).values()
        by_path = {file.path: file for file in files}
        assert set(by_path) == {"big.bin", "logs/console.log", "logs/uart/rx.txt"}  # no link, nothing missing
        console = by_path["logs/console.log"]
    data = b"".join([chunk async for chunk in artifact_data(harness.database, console.pk)])
    assert data == "".join(f"console line {i}\n" for i in range(2000)).encode()
    assert console.size == len(data)
    assert by_path["big.bin"].note == "not kept: 60000 bytes, over the limit of 100 MiB a file"
    summary = final["output"]["summary"]
    assert "**Files**" in summary
    assert f"`logs/console.log` ([34.1 KiB]({PUBLIC_URL}/sessions/" in summary
    assert f"/jobs/{row.pk}/files/{console.pk})" in summary
    assert "`big.bin`: not kept: 60000 bytes" in summary


HIJACK = """\
name: hijack
on: {push: {branches: [main]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
env: {PYTHONPATH: ".", PYTHONSTARTUP: ./evil.py, LD_PRELOAD: ./missing.so}
tasks:
  - id: plain
    run: echo "the command ran with PYTHONPATH=$PYTHONPATH"
    vcpus: 1
"""
EVIL = "import sys\nprint('the repository ran as root')\nsys.exit(0)\n"


async def test_nothing_a_repository_sets_or_holds_reaches_the_root_launcher(
    harness: Harness, agents: AgentFactory
) -> None:
    # A kerrigan/runner/launch.py in the workspace, PYTHONPATH and LD_PRELOAD in the manifest's env: the
    # launcher (root) starts isolated in /, and only the command gets the job's environment.
    await start_both(harness, agents)
    files = {
        ".kerrigan/workflows/hijack.yml": HIJACK,
        "kerrigan/__init__.py": "",
        "kerrigan/runner/__init__.py": "",
        "kerrigan/runner/launch.py": EVIL,
        "evil.py": EVIL,
    }
    [run] = await harness.push_commit(files)
    await completed(harness, run)
    [row] = await job_rows(harness)
    printed = await job_output(harness, row.pk)
    assert "the command ran with PYTHONPATH=." in printed
    assert "ran as root" not in printed
