"""The end-to-end tests' shared lab (:mod:`kerrigan.testing.process_lab` starts and drives it).

``rigs``: two runner hosts of one board each, rig-01 with board-a and rig-02 with board-b, leases of
:data:`LEASE_S` seconds, and a repository whose push runs two tasks, flash and smoke, that hang on board-a and
pass anywhere else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import pytest

from kerrigan.testing.process_lab import ProcessLab, process_lab

LEASE_S: Final = 4

INVENTORY: Final = """
hosts:
  - id: rig-01
  - id: rig-02
pools:
  - id: bench
    name: Bench rig
    owners: [octocat]
    labels: {sdk: "2.2.0"}
    devices:
      - {id: board-a, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
      - {id: board-b, board: modalix, target_type: devkit, os_type: linux, host: rig-02}
"""

MANIFEST: Final = """
name: bench
on: {push: {branches: [main]}}
scheduling:
  max_devkits: 2
  labels: {sdk: "2.2.0"}
tasks:
  - id: flash
    run: ./scripts/task.sh
    vcpus: 1
  - id: smoke
    run: ./scripts/task.sh
    vcpus: 1
"""

TASK: Final = """#!/bin/sh
echo "on $KERRIGAN_DEVICE_ID"
case "$KERRIGAN_DEVICE_ID" in
  board-a) echo hanging; sleep 300 ;;
esac
echo "done"
"""


@pytest.fixture
async def rigs(tmp_path: Path) -> AsyncIterator[ProcessLab]:
    """The two rigs, served; no agent runs until the test starts one."""
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/bench.yml": MANIFEST, "scripts/task.sh": TASK},
        environment={"KERRIGAN_RUNNER_LEASE_S": str(LEASE_S)},
    ) as lab:
        yield lab
