"""The devices file's ``secret_env`` with a real agent against the real server: a fork's pull request
approved with ``/kerrigan approve`` runs without it (its ``env`` still comes); approved with
``/kerrigan approve secrets`` it gets it, masked in its output and its results, and a results file that
would show it once parsed is not sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sqlalchemy import select

from kerrigan.runner.devices_file import load_devices_file
from kerrigan.store.models import JobLogRow, JobResultRow
from tests.integration.github.conftest import FORK_SHA, MAINTAINER, REPO, Harness, comment, webhook
from tests.integration.runner.agents import (
    AgentFactory,
    completed,
    tokens,
)

PDU_PASSWORD: Final = "pdu-pass-9c4e1a77"
DEVICES: Final = f"""\
devices:
  modalix-bluebox:
    env: {{POWER_OUTLET: "pdu-3:7"}}
    secret_env: {{PDU_PASSWORD: "{PDU_PASSWORD}"}}
"""
MANIFEST: Final = """\
name: power
on: {pull_request: {branches: [main]}}
scheduling:
  labels: {kerrigan.target_id: modalix-bluebox}
tasks:
  - id: cycle
    run: ./scripts/cycle.sh
    vcpus: 1
    results: "results/*.xml"
"""
# The password as written (masked by its bytes) and spelled with character references (only the parse shows
# it: that file is not sent).
CYCLE: Final = """\
#!/bin/sh
echo "outlet $POWER_OUTLET password ${PDU_PASSWORD:-unset} length ${#PDU_PASSWORD}"
mkdir -p results
printf '<testsuite><testcase name="plain"><failure message="%s"/></testcase></testsuite>' \\
  "${PDU_PASSWORD:-unset}" > results/plain.xml
python3 -c '
import os
spelled = "".join(f"&#{ord(c)};" for c in os.environ.get("PDU_PASSWORD", "unset"))
open("results/spelled.xml", "w").write(f"<testsuite><testcase name=\\"{spelled}\\"/></testsuite>")
'
"""


async def fork_session_after(harness: Harness, start: AgentFactory, tmp_path: Path, approval: str) -> str:
    """Run the fork's pull request after ``approval`` on lab-a-01 with the devices file; its output."""
    path = tmp_path / "devices.yml"
    path.write_text(DEVICES, encoding="utf-8")
    hosts = await tokens(harness, "lab-a-01")
    start("lab-a-01", hosts["lab-a-01"], devices_file=load_devices_file(path))
    github = harness.github
    github.add_commit(REPO, FORK_SHA, {".kerrigan/workflows/power.yml": MANIFEST, "scripts/cycle.sh": CYCLE})
    github.add_pull(REPO, 8, head_sha=FORK_SHA, head_ref="fix-uart-timeout", fork="mona/firmware")
    assert await harness.deliver("pull_request", webhook("pull_request-fork")) == 202
    await harness.settle()
    github.set_permission(REPO, MAINTAINER, "write")
    assert await harness.deliver("issue_comment", comment(approval, number=8)) == 202
    await harness.settle()
    [run] = [run for run in github.check_runs.values() if run["name"] == "kerrigan / power"]
    await completed(harness, run, timeout=60)
    async with harness.database.sessions() as session:
        return "".join((await session.scalars(select(JobLogRow.data).order_by(JobLogRow.seq))).all())


async def stored_results(harness: Harness) -> dict[str, Any]:
    async with harness.database.sessions() as session:
        rows = (await session.execute(select(JobResultRow.path, JobResultRow.report))).all()
    return {str(path): report for path, report in rows}


async def test_a_fork_approved_without_secrets_gets_the_devices_env_but_not_its_secret_env(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
) -> None:
    output = await fork_session_after(harness, agents, tmp_path, "/kerrigan approve")
    assert "outlet pdu-3:7 password unset length 0" in output
    assert (
        "kerrigan: the devices file's secret_env PDU_PASSWORD is not given to this job: a fork's pull "
        "request gets it only when approved with `/kerrigan approve secrets`"
    ) in output
    results = await stored_results(harness)
    assert results["results/plain.xml"]["cases"][0]["m"] == "unset"  # nothing masked: it was not given
    assert PDU_PASSWORD not in str(harness.github.requests)


async def test_a_fork_approved_with_secrets_gets_secret_env_masked_in_its_output_and_results(
    harness: Harness,
    agents: AgentFactory,
    tmp_path: Path,
) -> None:
    output = await fork_session_after(harness, agents, tmp_path, "/kerrigan approve secrets")
    assert f"outlet pdu-3:7 password *** length {len(PDU_PASSWORD)}" in output
    assert PDU_PASSWORD not in output
    results = await stored_results(harness)
    assert results["results/plain.xml"]["cases"][0]["m"] == "***"
    spelled = results["results/spelled.xml"]
    assert spelled["cases"] == []
    assert spelled["problems"] == [
        [
            "not sent by the runner host: once parsed, its text shows a secret setting of the host's devices "
            "file (secret_env), spelled so that the host could not hide it in the file's bytes",
            None,
            None,
        ]
    ]
    assert PDU_PASSWORD not in str(results)
    assert PDU_PASSWORD not in str([request.body for request in harness.github.requests])
