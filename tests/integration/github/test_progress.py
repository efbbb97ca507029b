"""A push's check run follows its jobs through the runner protocol: queued, in_progress, completed."""

from __future__ import annotations

from kerrigan.store.leases import leased_devices
from kerrigan.store.runners import create_runner_token
from kerrigan.testing.waiting import wait_until
from tests.integration.github.conftest import MANIFESTS, OTHER_SHA, REPO, Harness, push_payload


async def test_a_check_run_goes_in_progress_when_a_job_starts_and_completes_with_the_results(
    harness: Harness,
) -> None:
    smoke = (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/hil-smoke.yml": smoke})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()
    [run] = harness.github.check_runs.values()
    assert run["status"] == "queued"

    async def two_leases() -> bool:
        async with harness.database.sessions() as session:
            return len(await leased_devices(session)) == 2

    await wait_until(two_leases)  # the dispatcher leases a device to each task
    client = harness.client
    auth = {}
    async with harness.database.sessions() as session, session.begin():
        for host in ("lab-a-01", "lab-a-02"):
            token = await create_runner_token(session, host, harness.database.clock())
            auth[host] = {"Authorization": f"Bearer {token}"}
    offers = {}
    for host, headers in auth.items():
        await client.post("/api/runner/v1/register", json={"protocol": [1], "resources": {}}, headers=headers)
        polled = await (await client.get("/api/runner/v1/poll", headers=headers)).json()
        [offer] = polled["offers"]
        offers[host] = offer["id"]
        await client.post(f"/api/runner/v1/jobs/{offer['id']}/accept", headers=headers)

    first_host, second_host = sorted(offers)
    await client.post(f"/api/runner/v1/jobs/{offers[first_host]}/start", headers=auth[first_host])

    async def running() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "in_progress")

    await wait_until(running)

    for host in (first_host, second_host):
        job = offers[host]
        await client.post(f"/api/runner/v1/jobs/{job}/start", headers=auth[host])
        await client.post(
            f"/api/runner/v1/jobs/{job}/output",
            json={"seq": 0, "offset": 0, "data": f"{host} ok\n"},
            headers=auth[host],
        )
        await client.post(f"/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=auth[host])

    async def completed() -> bool:
        return bool(harness.github.check_runs[run["id"]]["status"] == "completed")

    await wait_until(completed)
    final = harness.github.check_runs[run["id"]]
    assert final["conclusion"] == "success"
    assert "lab-a-01 ok" in final["output"]["summary"]
    assert final["actions"][0]["identifier"] == "retry"
    [session] = await harness.sessions()
    assert (session.state.value, session.conclusion.value if session.conclusion else None) == (
        "completed",
        "success",
    )


async def test_a_failing_job_fails_the_check_run(harness: Harness) -> None:
    manifest = (
        "name: one\non: [push]\nscheduling: {labels: {kerrigan.target_id: modalix-bluebox}}\n"
        "tasks:\n  - {id: only, run: ./x.sh}\n"
    )
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/one.yml": manifest})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()

    async def leased() -> bool:
        async with harness.database.sessions() as session:
            return await leased_devices(session) == {"modalix-bluebox"}

    await wait_until(leased)
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", harness.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    await harness.client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=headers)
    [offer] = (await (await harness.client.get("/api/runner/v1/poll", headers=headers)).json())["offers"]
    for step, body in (("accept", {}), ("start", {}), ("finish", {"exit_status": 3})):
        await harness.client.post(f"/api/runner/v1/jobs/{offer['id']}/{step}", json=body, headers=headers)
    [run] = harness.github.check_runs.values()

    async def failed() -> bool:
        return bool(harness.github.check_runs[run["id"]].get("conclusion") == "failure")

    await wait_until(failed)


async def test_a_board_that_does_not_boot_shows_its_console_on_the_check_run(harness: Harness) -> None:
    manifest = (
        "name: one\non: [push]\nscheduling: {labels: {kerrigan.target_id: modalix-bluebox}}\n"
        "tasks:\n  - {id: only, run: ./x.sh}\n"
    )
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/one.yml": manifest})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()

    async def leased() -> bool:
        async with harness.database.sessions() as session:
            return await leased_devices(session) == {"modalix-bluebox"}

    await wait_until(leased)
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", harness.database.clock())
    headers = {"Authorization": f"Bearer {token}"}
    await harness.client.post("/api/runner/v1/register", json={"protocol": [1]}, headers=headers)
    [offer] = (await (await harness.client.get("/api/runner/v1/poll", headers=headers)).json())["offers"]
    job = f"/api/runner/v1/jobs/{offer['id']}"
    await harness.client.post(f"{job}/accept", json={}, headers=headers)
    boot = "U-Boot 2024.01\r\nStarting kernel ...\r\n```\r\nKernel panic - not syncing\r\n"
    chunk = {"seq": 0, "offset": 0, "data": boot}
    assert (await harness.client.post(f"{job}/console", json=chunk, headers=headers)).status == 200
    await harness.client.post(
        f"{job}/finish", json={"exit_status": -1, "outcome": "boot_failed"}, headers=headers
    )
    [run] = harness.github.check_runs.values()

    async def shown() -> bool:
        return "Kernel panic - not syncing" in harness.github.check_runs[run["id"]]["output"]["summary"]

    await wait_until(shown)
    summary = harness.github.check_runs[run["id"]]["output"]["summary"]
    assert "only (attempt 1): last lines of its board's console</summary>" in summary
    assert "````\nU-Boot 2024.01\nStarting kernel ...\n```\nKernel panic - not syncing\n````" in summary
    assert "`boot_failed`: its board did not boot" in summary
