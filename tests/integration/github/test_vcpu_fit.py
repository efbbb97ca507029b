"""A push of a task claiming more vCPUs than the lab's runner hosts reported: its check run fails at once,
naming the host and its allocatable vCPUs; before the hosts report, the task waits instead."""

from __future__ import annotations

from kerrigan.core.lifecycle import Conclusion, SessionState
from kerrigan.store.runners import create_runner_token
from kerrigan.store.tokens import create_token
from tests.integration.github.conftest import Harness

HOSTS = ("lab-a-01", "lab-a-02", "lab-b-01", "lab-b-02")

BIG = """\
name: big-build
on: {push: {branches: [main]}}
tasks:
  - id: build
    run: make -j8
    vcpus: 8
    requirements: {labels: {sdk: "2.2.0"}}
"""
FILES = {".kerrigan/workflows/big-build.yml": BIG}
REASON = "needs 8 vCPUs; runner host lab-a-01 has 2 allocatable"


async def report(harness: Harness, host: str, vcpus: int) -> None:
    """The host's agent registers through the runner protocol, reporting its allocatable vCPUs."""
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, host, harness.database.clock())
    response = await harness.client.post(
        "/api/runner/v1/register",
        json={"protocol": [1], "resources": {"vcpus": vcpus}},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status == 200, await response.text()


async def test_a_claim_no_host_can_fit_fails_the_check_run_at_once_naming_the_host(harness: Harness) -> None:
    for host in HOSTS:
        await report(harness, host, 2)
    [run] = await harness.push_commit(FILES)
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert run["output"]["title"].startswith("No device can ever run")
    assert REASON in run["output"]["summary"]
    [session] = await harness.sessions()
    assert (session.state, session.conclusion) == (SessionState.COMPLETED, Conclusion.FAILURE)


async def test_before_the_hosts_report_their_cpus_the_claim_waits(harness: Harness) -> None:
    [run] = await harness.push_commit(FILES)
    assert (run["status"], run["conclusion"]) == ("queued", None)
    assert "runner host lab-a-01 has not reported its CPUs" in run["output"]["summary"]


async def test_the_explain_api_checks_the_claim_against_the_hosts_reports(harness: Harness) -> None:
    await report(harness, "lab-a-01", 2)
    await report(harness, "lab-a-02", 16)
    async with harness.database.sessions() as session, session.begin():
        token = await create_token(session, "rita", harness.database.clock())
    response = await harness.client.post(
        "/api/v1/explain", json={"manifest": BIG}, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status == 200, await response.text()
    [task] = (await response.json())["tasks"]
    reasons = {item["device"]: item["reasons"] for item in task["rejected_devices"]}
    assert reasons["modalix-bluebox"] == [REASON]
    assert "modalix-redbox" in task["eligible_devices"]
