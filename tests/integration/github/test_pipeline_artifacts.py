"""Artifacts a job takes from the workflow run that triggered its session, through the stand-in's artifacts
API and real agents: unpacked into the folder the manifest names before the command runs; a hostile zip, an
artifact the run does not have, or a session no workflow run triggered fails the job before it starts."""

from __future__ import annotations

import io
import stat
import zipfile
from typing import Any, Final

from kerrigan.store.jobs import output
from tests.integration.github.conftest import REPO, SHA, Harness, webhook
from tests.integration.runner.agents import AgentFactory, completed, job_rows, start_both

RUN_ID: Final = 12087000123  # fixtures/webhooks/workflow_run-completed.json
MANIFEST: Final = """\
name: flash
on: {workflow_run: {workflows: [build-firmware]}}
scheduling:
  labels: {form_factor: som, sdk: "2.2.0"}
tasks:
  - id: flash
    run: ./scripts/flash.sh
    vcpus: 1
    artifacts:
      download: [{workflow_run: firmware-image, path: build/}]
"""
FLASH: Final = (
    '#!/bin/sh\nset -e\necho "image: $(cat build/out/image.bin)"\nls -l build/out/flash.sh | cut -c1-10\n'
)


async def run_after_build(harness: Harness) -> dict[str, Any]:
    harness.github.add_commit(
        REPO, SHA, {".kerrigan/workflows/flash.yml": MANIFEST, "scripts/flash.sh": FLASH}
    )
    await harness.deliver("workflow_run", webhook("workflow_run-completed"))
    await harness.settle()
    [run] = harness.github.check_runs.values()
    await completed(harness, run)
    final: dict[str, Any] = harness.github.check_runs[run["id"]]
    return final


async def printed(harness: Harness) -> str:
    [row] = await job_rows(harness)
    async with harness.database.sessions() as session:
        return "".join(data for _, data in await output(session, row.pk))


async def test_the_runs_artifact_is_in_the_workspace_before_the_command(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    harness.github.add_artifact(REPO, RUN_ID, "firmware-image", {"out/image.bin": b"fw-2.2.0-rc1"})
    # An older artifact of the same name that expired is passed over; another run's is not seen.
    harness.github.add_artifact(REPO, RUN_ID, "firmware-image", {"out/image.bin": b"old"}, expired=True)
    harness.github.add_artifact(REPO, RUN_ID + 1, "firmware-image", {"out/image.bin": b"other run"})
    final = await run_after_build(harness)
    assert final["conclusion"] == "success", final["output"]["summary"]
    assert "image: fw-2.2.0-rc1" in await printed(harness)


async def test_a_zip_with_a_link_or_a_climbing_name_is_refused_before_the_command(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("out/image.bin", b"fw")
        link = zipfile.ZipInfo("out/passwd")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(link, "/etc/passwd")
    harness.github.add_artifact(REPO, RUN_ID, "firmware-image", data=buffer.getvalue())
    final = await run_after_build(harness)
    assert final["conclusion"] == "failure"
    [row] = await job_rows(harness)
    assert row.started_at is None
    assert "artifact 'firmware-image': member 'out/passwd' is not a file or a folder" in await printed(
        harness
    )


async def test_an_artifact_the_run_does_not_have_fails_the_job_naming_it(
    harness: Harness, agents: AgentFactory
) -> None:
    await start_both(harness, agents)
    final = await run_after_build(harness)
    assert final["conclusion"] == "failure"
    assert f"workflow run {RUN_ID} has no artifact 'firmware-image'" in await printed(harness)
