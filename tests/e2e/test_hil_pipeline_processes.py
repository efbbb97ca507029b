"""A hardware-in-the-loop pipeline across real processes: the GitHub stand-in, ``kerrigan serve`` and two
runner agents, each its own process on loopback.

A workflow run of ``build-firmware`` completes (its ``firmware-image`` artifact held by the stand-in), and
the lab's manifest runs a two-board gang task for it: a device under test and its peer, which only one
runner host (rig-01) holds together. The command flashes the run's image, reads a secret set with
``kerrigan secrets set`` (masked in its output), keeps a console log and writes a JUnit file with one failing
test. The check run ends ``failure`` with the failing test as an annotation on its line and the log linked.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from kerrigan.store.artifacts import artifact_data, artifacts_of
from kerrigan.store.installations import repositories
from kerrigan.store.jobs import output
from kerrigan.store.models import JobRow
from kerrigan.store.sessions import find_sessions
from kerrigan.testing.process_lab import (
    REPOSITORY,
    ProcessLab,
    deliver,
    finished_check_run,
    process_lab,
    runner_agent,
)
from tests.e2e.workflow_run import ROOT, RUN, RUN_ID, SHA

INSTALLATION = json.loads((ROOT / "fixtures/webhooks/installation-created.json").read_text(encoding="utf-8"))
VPN_KEY = "vpn-5f1c2a9e7d3b"

INVENTORY = """
hosts:
  - id: rig-01
  - id: rig-02
pools:
  - id: bench
    name: Bench rigs
    owners: [octocat]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: dut-01, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: peer-01, board: davinci, target_type: devkit, os_type: linux, host: rig-01}
      - {id: dut-02, board: modalix, target_type: devkit, os_type: linux, host: rig-02}
"""

MANIFEST = """
name: hil
on: {workflow_run: {workflows: [build-firmware], types: [completed]}}
tasks:
  - id: uart-pair
    run: ./ci/hil.sh
    vcpus: 1
    secrets: [LAB_VPN_KEY]
    artifacts:
      download: [{workflow_run: firmware-image, path: build/}]
      upload: ["logs/**"]
    results: "results/*.xml"
    devices:
      dut: {labels: {kerrigan.board: modalix}}
      peer: {labels: {kerrigan.board: davinci}}
"""

HIL = """#!/bin/sh
set -e
echo "flashing $(cat build/image.bin) to $KERRIGAN_DEVICE_DUT_ID; peer $KERRIGAN_DEVICE_PEER_ID"
echo "vpn key $LAB_VPN_KEY"
mkdir -p logs results
echo "console of $KERRIGAN_DEVICE_DUT_ID: boot ok, echo lost 3 bytes" > logs/console.log
cat > results/uart.xml <<XML
<?xml version="1.0"?>
<testsuite name="uart">
  <testcase classname="tests.test_uart" name="test_baud" time="0.4"/>
  <testcase classname="tests.test_uart" name="test_echo" file="tests/test_uart.py" line="42" time="1.1">
    <failure message="echo lost 3 of 64 bytes">tests/test_uart.py:42: AssertionError</failure>
  </testcase>
</testsuite>
XML
exit 1
"""

TEST_UART = "def test_baud():\n    pass\n" + "\n" * 38 + "def test_echo():\n    assert echo() == 64\n"


@pytest.fixture
async def lab(tmp_path: Path) -> AsyncIterator[ProcessLab]:
    image = tmp_path / "firmware-image"
    image.mkdir()
    (image / "image.bin").write_text("fw-2.2.0-rc1", encoding="utf-8")
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/hil.yml": MANIFEST, "ci/hil.sh": HIL, "tests/test_uart.py": TEST_UART},
        environment={"KERRIGAN_SECRETS_KEY": Fernet.generate_key().decode()},
        github_arguments=["--artifact", f"{RUN_ID}:firmware-image:{image}"],
    ) as started:
        yield started


async def set_secret(lab: ProcessLab) -> None:
    """``kerrigan secrets set octo/firmware LAB_VPN_KEY``, the value on standard input."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "kerrigan.cli", "secrets", "set", REPOSITORY, "LAB_VPN_KEY"),
        env={**os.environ, **lab.env},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(f"{VPN_KEY}\n".encode())
    assert process.returncode == 0, err.decode()
    assert VPN_KEY not in out.decode() + err.decode()


async def installed(lab: ProcessLab, timeout: float = 30) -> None:
    """The App is installed on the repository (its ``installation`` event), as before ``secrets set``."""
    await deliver(lab, "installation", INSTALLATION)
    deadline = time.monotonic() + timeout
    while True:
        async with lab.database.sessions() as db:
            if REPOSITORY in {name for name, _ in await repositories(db)}:
                return
        assert time.monotonic() < deadline, "the installation event was not processed"
        await asyncio.sleep(0.1)


async def test_a_two_board_gang_flashes_the_runs_artifact_masks_its_secret_and_reports_its_tests(
    lab: ProcessLab,
) -> None:
    await installed(lab)
    await set_secret(lab)
    async with runner_agent(lab, "rig-01", graceful=True), runner_agent(lab, "rig-02", graceful=True):
        await deliver(lab, "workflow_run", RUN)
        check_run = await finished_check_run(lab, SHA)
    assert check_run["conclusion"] == "failure"
    annotations = check_run["output"]["annotations"]
    failures = [a for a in annotations if a["annotation_level"] == "failure"]
    assert [(a["path"], a["start_line"], a["end_line"]) for a in failures] == [("tests/test_uart.py", 42, 42)]
    assert "echo lost 3 of 64 bytes" in failures[0]["message"]
    summary = check_run["output"]["summary"]
    assert "`logs/console.log`" in summary
    assert VPN_KEY not in json.dumps(check_run)

    async with lab.database.sessions() as db:
        [session] = await find_sessions(db, REPOSITORY, head_sha=SHA)
        [job] = (await db.scalars(select(JobRow))).all()
        text = "".join(data for _, data in await output(db, job.pk))
        [log] = (await artifacts_of(db, [job.pk]))[job.pk]
    assert session.conclusion is not None
    assert session.conclusion.value == "failure"
    # Both boards on the one host that holds both; the other host's modalix was not taken.
    assert (job.host, job.state, job.exit_status) == ("rig-01", "failed", 1)
    assert job.devices == [{"role": "dut", "device": "dut-01"}, {"role": "peer", "device": "peer-01"}]
    assert "flashing fw-2.2.0-rc1 to dut-01; peer peer-01" in text
    assert "vpn key ***" in text
    assert VPN_KEY not in text
    assert log.path == "logs/console.log"
    kept = b"".join([chunk async for chunk in artifact_data(lab.database, log.pk)])
    assert kept == b"console of dut-01: boot ok, echo lost 3 bytes\n"
    for host in ("rig-01", "rig-02"):
        assert VPN_KEY not in (lab.folder / f"{host}.log").read_text(encoding="utf-8", errors="replace")
