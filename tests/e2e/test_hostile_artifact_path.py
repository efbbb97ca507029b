"""An artifact whose folder climbs out of the workspace, against a real root agent with isolation required.

The parser refuses ``..`` in an artifact's ``path`` now, but a job stored before it did still carries one,
and the runner host must not trust the offer either. So the session here is made from a good manifest, and
its job's stored ``artifacts`` are then given the path a hostile manifest used to get through
(``../../../..``, as many as lead from the workspace to ``/``), as a job row kept from before the fix would
have it, before any agent is online to take it. The artifact (served by the GitHub stand-in) holds Kerrigan's
own launcher at its place below ``/``, a file for ``/var/lib`` and one for ``/`` itself: unpacked where the
path leads, every later job's launcher would have run the repository's code as root. The agent must fail
the job before it starts, naming the artifact and the path, with nothing written outside the workspace and
the launcher unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Final

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

import kerrigan.runner.launch
from kerrigan.runner.isolation.probe import IsolationUnavailableError, agent_key, choose, read_host_facts
from kerrigan.store.jobs import output
from kerrigan.store.models import JobRow
from kerrigan.testing.job_users import spare_job_users
from kerrigan.testing.process_lab import ProcessLab, deliver, finished_check_run, process_lab, runner_agent
from tests.e2e.workflow_run import RUN, RUN_ID, SHA

INVENTORY: Final = """
hosts:
  - id: rig-01
pools:
  - id: bench
    name: Bench rigs
    owners: [octocat]
    devices:
      - {id: dut-01, board: modalix, target_type: devkit, os_type: linux, host: rig-01}
"""
MANIFEST: Final = """
name: flash
on: {workflow_run: {workflows: [build-firmware], types: [completed]}}
tasks:
  - id: flash
    run: ./ci/flash.sh
    vcpus: 1
    artifacts:
      download: [{workflow_run: firmware-image, path: build/}]
"""
FLASH: Final = "#!/bin/sh\necho flashing\n"
LAUNCHER: Final = Path(kerrigan.runner.launch.__file__).resolve()
MARK: Final = f"kerrigan-e2e-{uuid.uuid4().hex}"
PLANTED: Final = (Path("/var/lib") / MARK / "planted", Path("/") / f"{MARK}.txt")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def launcher() -> Iterator[bytes]:
    """The launcher's bytes, put back (and anything planted removed) should the agent let the artifact out."""
    original = LAUNCHER.read_bytes()
    try:
        yield original
    finally:
        if LAUNCHER.read_bytes() != original:
            LAUNCHER.write_bytes(original)
        for path in PLANTED:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            PLANTED[0].parent.rmdir()


def hostile_artifact(folder: Path, original: bytes) -> Path:
    """A folder of what the artifact holds, each at its path below ``/``."""
    image = folder / "hostile-image"
    files = {
        # Harmless should it land (a comment), and put back by the fixture: the hash tells it landed.
        LAUNCHER.relative_to("/"): original + b"\n# planted by the repository's artifact\n",
        PLANTED[0].relative_to("/"): b"written as root\n",
        PLANTED[1].relative_to("/"): b"written as root\n",
        Path("image.bin"): b"fw-2.2.0-rc1",
    }
    for path, data in files.items():
        (image / path).parent.mkdir(parents=True, exist_ok=True)
        (image / path).write_bytes(data)
    return image


@pytest.fixture
async def lab(tmp_path: Path, launcher: bytes) -> AsyncIterator[ProcessLab]:
    if os.geteuid() != 0:
        pytest.skip("the agent runs jobs apart only as root; this test runs as a user")
    key = agent_key(tmp_path / "rig-01")
    try:
        choose(read_host_facts(key), "require", spare_job_users(), "never", key)
    except IsolationUnavailableError as err:
        pytest.skip(f"this machine cannot isolate jobs: {err}")
    image = hostile_artifact(tmp_path, launcher)
    async with process_lab(
        tmp_path,
        inventory=INVENTORY,
        files={".kerrigan/workflows/flash.yml": MANIFEST, "ci/flash.sh": FLASH},
        environment={"KERRIGAN_SECRETS_KEY": Fernet.generate_key().decode()},
        github_arguments=["--artifact", f"{RUN_ID}:firmware-image:{image}"],
    ) as started:
        yield started


async def queued_job(lab: ProcessLab, timeout: float = 60) -> JobRow:
    """The session's job, once the workflow run made it (no agent is online yet: it waits)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        async with lab.database.sessions() as db:
            rows = (await db.scalars(select(JobRow))).all()
        if rows:
            [row] = rows
            return row
        assert asyncio.get_running_loop().time() < deadline, "the workflow run made no job"
        await asyncio.sleep(0.1)


async def test_a_stored_artifact_path_out_of_the_workspace_fails_the_job_and_writes_nothing_outside(
    lab: ProcessLab, launcher: bytes
) -> None:
    before = digest(LAUNCHER)
    workspace = lab.folder / "rig-01" / "workspaces" / "octo-firmware--flash"
    climb = "/".join([".."] * (len(workspace.parts) + 2))  # from the workspace past "/", which stays "/"
    await deliver(lab, "workflow_run", RUN)
    job = await queued_job(lab)
    assert job.artifacts["download"] == [{"name": "firmware-image", "path": "build"}]
    async with lab.database.sessions() as db, db.begin():
        row = await db.get(JobRow, job.pk)
        assert row is not None
        row.artifacts = {"download": [{"name": "firmware-image", "path": climb}], "upload": []}

    async with runner_agent(lab, "rig-01", "--isolation", "require", graceful=True):
        check_run = await finished_check_run(lab, SHA)

    async with lab.database.sessions() as db:
        row = await db.get(JobRow, job.pk)
        assert row is not None
        text = "".join(data for _, data in await output(db, row.pk))
    assert row.started_at is None, text
    assert row.state == "failed"
    refusal = f"kerrigan: artifact 'firmware-image': path {climb!r} climbs out of the workspace with '..'"
    assert refusal in text
    assert check_run["conclusion"] != "success"
    assert digest(LAUNCHER) == before
    assert LAUNCHER.read_bytes() == launcher
    assert not any(path.exists() for path in PLANTED)
    assert not (workspace / "build").exists()
    log = (lab.folder / "rig-01.log").read_text(encoding="utf-8", errors="replace")
    assert "jobs isolated" in log  # the agent really ran jobs apart, as root
