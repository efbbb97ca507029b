"""Gang tasks through the harness and a real agent: both roles' devices on one runner host, each named in
the job's environment; a gang no host can hold fails at once, saying so per role."""

from __future__ import annotations

import json
from typing import Any

from kerrigan.core.gang import NO_HOST_FOR_EVERY_ROLE
from tests.integration.github.conftest import Harness
from tests.integration.runner.agents import AgentFactory, completed, job_output, job_rows, tokens

GANG = """\
name: pair
on: {push: {branches: [main]}}
tasks:
  - id: pair
    run: ./scripts/pair.sh
    vcpus: 1
    devices:
      dut: {labels: {kerrigan.board: modalix}}
      peer: {labels: {kerrigan.board: davinci}}
"""
PAIR = (
    "#!/bin/sh\n"
    'echo "dut $KERRIGAN_DEVICE_DUT_ID ($KERRIGAN_DEVICE_DUT_BOARD) peer $KERRIGAN_DEVICE_PEER_ID"\n'
    'echo "first $KERRIGAN_DEVICE_ID"\n'
    'echo "all $KERRIGAN_DEVICES_JSON"\n'
)
# The lab's SDK 2.2.0 SoM modalix boards are on lab-a-01 and lab-a-02, its davinci boards on lab-b-*.
SPLIT = GANG.replace("kerrigan.board: modalix}", 'kerrigan.board: modalix, sdk: "2.2.0", form_factor: som}')


async def test_a_gang_task_runs_with_a_device_for_every_role_on_one_host(
    harness: Harness, agents: AgentFactory
) -> None:
    [run] = await harness.push_commit({".kerrigan/workflows/pair.yml": GANG, "scripts/pair.sh": PAIR})
    first = harness.github.check_runs[run["id"]]  # the resolution, before any runner takes the job
    assert "#### Role `dut`" in first["output"]["summary"]
    assert "role peer: 1/12 devices available" in first["output"]["summary"]
    [(host, token)] = (await tokens(harness, "lab-b-01")).items()
    agents(host, token)
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert "| dut `modalix-old-02`<br>peer `davinci-old-01` | `lab-b-01` |" in final["output"]["summary"]
    [row] = await job_rows(harness)
    assert (row.state, row.device_id, row.host) == ("succeeded", "modalix-old-02", "lab-b-01")
    text = await job_output(harness, row.pk)
    assert "dut modalix-old-02 (modalix) peer davinci-old-01" in text
    assert "first modalix-old-02" in text
    shown = json.loads(text.split("all ", 1)[1].splitlines()[0])
    assert [(d["role"], d["id"], d["board"]) for d in shown] == [
        ("dut", "modalix-old-02", "modalix"),
        ("peer", "davinci-old-01", "davinci"),
    ]
    assert shown[1]["labels"]["sdk"] == "2.1.0"


async def test_a_gang_no_runner_host_can_hold_fails_at_once_with_each_roles_verdict(harness: Harness) -> None:
    [run] = await harness.push_commit({".kerrigan/workflows/pair.yml": SPLIT, "scripts/pair.sh": PAIR})
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    assert (final["status"], final["conclusion"]) == ("completed", "failure")
    assert final["output"]["title"] == "No runner host holds a device for every role of pair"
    summary = final["output"]["summary"]
    assert f"| `pair` | unschedulable: {NO_HOST_FOR_EVERY_ROLE} |" in summary
    assert f"- **{NO_HOST_FOR_EVERY_ROLE}** (never)" in summary
    assert "role dut: 2/12 devices available" in summary
    assert "role peer: 1/12 devices available" in summary
    [row] = await job_rows(harness)
    assert row.state == "refused_before_start"
