"""A job that holds no device (``board: none``) through the API: the job says so, with no device and the
runner host it ran on; ``POST /explain`` explains such a task by its runner hosts; both as the OpenAPI
document describes them."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select

from kerrigan.store.models import RunnerHostRow
from tests.conftest import FakeClock
from tests.integration.api.conftest import Api
from tests.integration.api.history_rows import Run, add_session
from tests.integration.api.test_errors_and_openapi import openapi, validate

PIPELINE = """\
name: pipeline
on: {push: {}}
tasks:
  - id: build
    run: ./build.sh
    board: none
    requirements: {labels: {kerrigan.host: [lab-a-01, lab-b-01, lab-z-99]}}
  - {id: test, run: ./test.sh, needs: build}
"""


async def test_a_boardless_job_has_no_device_and_its_runner_host(api: Api, clock: FakeClock) -> None:
    async with api.db.sessions() as session, session.begin():
        _, (build, test) = await add_session(
            session,
            clock() - timedelta(hours=1),
            runs=(
                Run(task="build", device=None, host="lab-b-01", boardless=True),
                Run(task="test", device="dev-a1", host="lab-a-01"),
            ),
        )
    document = await openapi(api)
    reply = await api.get(f"/jobs/{build}")
    validate(document, "/jobs/{job_id}", "get", reply)
    assert (reply.body["device"], reply.body["host"], reply.body["boardless"]) == (None, "lab-b-01", True)
    other = (await api.get(f"/jobs/{test}")).body
    assert (other["device"], other["host"], other["boardless"]) == ("dev-a1", "lab-a-01", False)
    listed = await api.get(f"/sessions/{reply.body['session']}")
    assert [job["boardless"] for job in listed.body["jobs"]] == [True, False]


async def test_explain_gives_a_boardless_tasks_runner_hosts_as_documented(api: Api) -> None:
    async with api.db.sessions() as session, session.begin():  # what each host's agent reported
        for host in (await session.scalars(select(RunnerHostRow))).all():
            host.resources = {"vcpus": 16, "max_weight": 28}
    document = await openapi(api)
    asked = {"manifest": PIPELINE, "path": ".kerrigan/workflows/p.yml"}
    reply = await api.call("POST", "/explain", json=asked)
    validate(document, "/explain", "post", reply)
    build = reply.body["tasks"][0]
    assert build["board"] == "none"
    assert build["hosts"]["eligible"] == ["lab-a-01", "lab-b-01"]
    assert [host["host"] for host in build["hosts"]["rejected"]] == ["lab-a-02"]
    assert build["hints"] == []  # lab-z-99 is one of three: the others exist
    assert "board" not in reply.body["tasks"][1]


async def test_explain_says_a_host_no_agent_has_reported_from_cannot_run_it_yet(api: Api) -> None:
    reply = await api.call("POST", "/explain", json={"manifest": PIPELINE, "path": "p.yml"})
    build = reply.body["tasks"][0]
    assert (build["outcome"], build["hosts"]["eligible"]) == ("waiting", [])
    rejected = {verdict["host"]: verdict["reasons"] for verdict in build["hosts"]["rejected"]}
    assert rejected["lab-a-01"] == ["runner host lab-a-01 has not reported its CPUs"]
