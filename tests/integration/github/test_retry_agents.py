"""Automatic retry with real runner agents, the server and the GitHub stand-in on loopback: a job whose
device fails it (exit status 75) is retried on another device, and the check run completes success listing
both attempts."""

from __future__ import annotations

from sqlalchemy import select

from kerrigan.store.models import JobRow
from tests.integration.github.conftest import OTHER_SHA, REPO, Harness
from tests.integration.runner.agents import (
    AgentFactory,
    completed,
    start_both,
)

MANIFEST = """name: hil-retry
on: push
scheduling:
  labels: {sdk: "2.2.0", form_factor: som}
  tags: [2.2.0-som-devkits, uart-debug]
tasks:
  - id: smoke
    run: ./smoke.sh
"""


def commit(failing_job: str) -> dict[str, str]:
    """The job ``failing_job`` finds its device unusable and says so with exit status 75."""
    smoke = (
        "#!/bin/sh\n"
        f'if [ "$KERRIGAN_JOB_ID" = "{failing_job}" ]; then\n'
        '  echo "no console on $KERRIGAN_DEVICE_ID"; exit 75\n'
        "fi\n"
        'echo "smoke passed on $KERRIGAN_DEVICE_ID"\n'
    )
    return {".kerrigan/workflows/hil-retry.yml": MANIFEST, "smoke.sh": smoke}


async def jobs(harness: Harness) -> list[JobRow]:
    async with harness.database.sessions() as session:
        return list((await session.scalars(select(JobRow).order_by(JobRow.pk))).all())


async def test_a_device_fault_is_retried_on_another_device_to_a_green_check_run(
    harness: Harness,
    agents: AgentFactory,
) -> None:
    [run] = await harness.push_commit(commit("none yet"))
    [first] = await jobs(harness)
    # The first attempt's id is known now; its commit's script fails that job only (the tarball is fetched
    # when the job starts, so the files can still change).
    harness.github.add_commit(REPO, OTHER_SHA, commit(str(first.pk)))
    await start_both(harness, agents)
    await completed(harness, run, timeout=60)
    final = harness.github.check_runs[run["id"]]
    rows = await jobs(harness)
    assert [(row.state, row.attempt, row.reason, row.failure_class) for row in rows] == [
        ("retried", 1, "device_fault", "infrastructure"),
        ("succeeded", 2, None, None),
    ]
    failed_on, passed_on = rows[0].device_id, rows[1].device_id
    assert {failed_on, passed_on} == {"modalix-bluebox", "modalix-redbox"}
    assert rows[1].avoid_devices == [failed_on]
    assert rows[1].retry_of == rows[0].pk
    assert final["conclusion"] == "success"
    assert final["output"]["title"] == "1 job passed"
    summary = final["output"]["summary"]
    assert f"- `smoke`: attempt 1 of 3 on {failed_on}: retried (device_fault)" in summary
    assert f"- `smoke`: attempt 2 of 3 on {passed_on} after device_fault on {failed_on}: succeeded" in summary
    assert f"smoke passed on {passed_on}" in summary
