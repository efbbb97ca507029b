"""The token an accepted job fetches its source with: minted once per acceptance, through GitHub's passing
failures, never for a job that is not in the runner's hands; and a transition the state machine does not
allow, refused where the runner attempts it."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from kerrigan.app import PROTOCOL
from kerrigan.core.inventory import DeviceState
from kerrigan.dispatch.dispatcher import Dispatcher
from kerrigan.store.audit import Change
from kerrigan.store.inventory import set_state
from kerrigan.store.leases import leased_devices
from kerrigan.store.models import JobRow
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import get_session
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.waiting import wait_until
from kerrigan.web.state import DATABASE, SETTINGS
from tests.integration.github.conftest import INSTALLATION, MANIFESTS, OTHER_SHA, REPO, Harness, push_payload

TOKENS = r"/app/installations/\d+/access_tokens$"


async def offered(harness: Harness) -> tuple[str, dict[str, str]]:
    """Push hil-smoke, let dispatch lease its jobs, and poll one offer as lab-a-01: (job id, auth headers)."""
    smoke = (MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8")
    harness.github.add_commit(REPO, OTHER_SHA, {".kerrigan/workflows/hil-smoke.yml": smoke})
    assert await harness.deliver("push", push_payload(OTHER_SHA)) == 202
    await harness.settle()

    async def leased() -> bool:
        async with harness.database.sessions() as session:
            return len(await leased_devices(session)) == 2

    await wait_until(leased)
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, "lab-a-01", harness.database.clock())
    auth = {"Authorization": f"Bearer {token}"}
    client = harness.client
    await client.post("/api/runner/v1/register", json={"protocol": [1], "resources": {}}, headers=auth)
    polled = await (await client.get("/api/runner/v1/poll", headers=auth)).json()
    [offer] = polled["offers"]
    return str(offer["id"]), auth


async def accept(harness: Harness, job: str, auth: dict[str, str]) -> tuple[int, Any]:
    response = await harness.client.post(f"/api/runner/v1/jobs/{job}/accept", headers=auth)
    return response.status, await response.json()


def mints(harness: Harness) -> int:
    return len(
        [r for r in harness.github.requests if r.method == "POST" and r.path.endswith("/access_tokens")]
    )


async def test_a_repeated_accept_gets_the_same_token_without_minting_again(harness: Harness) -> None:
    job, auth = await offered(harness)
    before = mints(harness)
    status, first = await accept(harness, job, auth)
    again_status, again = await accept(harness, job, auth)
    assert (status, again_status) == (200, 200)
    assert first["github"]["token"] == again["github"]["token"]
    assert again["changed"] is False
    assert mints(harness) == before + 1
    assert harness.github.token_scopes[first["github"]["token"]] == frozenset({"firmware"})


async def test_an_accept_mints_through_githubs_passing_failures(harness: Harness) -> None:
    job, auth = await offered(harness)
    harness.github.faults.inject("POST", TOKENS, status=502, times=1)
    harness.github.faults.inject("POST", TOKENS, drop=True, times=1)
    status, answer = await accept(harness, job, auth)
    assert status == 200
    assert answer["github"]["token"] in harness.github.tokens


async def test_an_accept_github_refuses_for_good_gets_no_token(harness: Harness) -> None:
    # The runner then fails the job rather than run stale files (tests/integration/runner/test_runner_agent).
    job, auth = await offered(harness)
    harness.github.faults.inject("POST", TOKENS, status=422, message="Invalid permissions", times=None)
    status, answer = await accept(harness, job, auth)
    assert status == 200
    assert answer["state"] == "accepted"
    assert answer["github"] is None


async def test_the_token_is_not_handed_out_again_once_the_job_ended(harness: Harness) -> None:
    job, auth = await offered(harness)
    _, first = await accept(harness, job, auth)
    client = harness.client
    await client.post(f"/api/runner/v1/jobs/{job}/start", headers=auth)
    await client.post(f"/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=auth)
    status, after = await accept(harness, job, auth)
    assert status == 200
    assert after["state"] == "succeeded"
    assert "github" not in after  # an ended job's accept answers its state, and no token
    assert first["github"]["token"]


async def test_a_runner_ending_a_job_it_never_accepted_is_refused_and_nothing_changes(
    harness: Harness,
) -> None:
    job, auth = await offered(harness)
    response = await harness.client.post(
        f"/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=auth
    )
    assert response.status == 409
    error = (await response.json())["error"]
    assert error["code"] == "invalid_transition"
    assert error["message"] == "a job cannot go from leased to failed"
    [found] = await harness.sessions()
    async with harness.database.sessions() as db:
        session = await get_session(db, found.id)
    assert [job.state.value for job in session.jobs] == ["leased", "leased"]


async def test_a_job_tokens_revocation_is_counted_in_its_installations_budget(harness: Harness) -> None:
    # The runner's DELETE /installation/token counts in the installation's hourly allowance: the server
    # counts it where it paces its own check-run requests (not among the content-creating ones).
    counted: list[int] = []
    protocol = harness.client.app[PROTOCOL]
    original = protocol.revoking
    assert original is not None

    def revoking(installation_id: int) -> None:
        counted.append(installation_id)
        original(installation_id)

    protocol.revoking = revoking
    job, auth = await offered(harness)
    await accept(harness, job, auth)
    await accept(harness, job, auth)  # the same token: one revocation to come
    client = harness.client
    await client.post(f"/api/runner/v1/jobs/{job}/start", headers=auth)
    await client.post(f"/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=auth)
    await client.post(f"/api/runner/v1/jobs/{job}/finish", json={"exit_status": 0}, headers=auth)
    assert counted == [INSTALLATION]


# A job's token belongs to one lease: the host that accepted it, for as long as that lease lasts. The lab
# (fixtures/inventory/lab.yml) has hil-smoke's two jobs leased to modalix-bluebox on lab-a-01 and
# modalix-redbox on lab-a-02; lab-a-02 refuses its job for good, which leaves redbox free for a job lab-a-01
# loses.


async def host_auth(harness: Harness, host: str) -> dict[str, str]:
    """A runner token for ``host``, registered (which is also how a silent host comes back)."""
    async with harness.database.sessions() as session, session.begin():
        token = await create_runner_token(session, host, harness.database.clock())
    auth = {"Authorization": f"Bearer {token}"}
    await register(harness, auth)
    return auth


async def register(harness: Harness, auth: dict[str, str]) -> None:
    response = await harness.client.post(
        "/api/runner/v1/register", json={"protocol": [1], "resources": {}}, headers=auth
    )
    assert response.status == 200


async def poll(harness: Harness, auth: dict[str, str]) -> list[str]:
    polled = await (await harness.client.get("/api/runner/v1/poll", headers=auth)).json()
    return [str(offer["id"]) for offer in polled["offers"]]


async def offered_to_lab_a_01_alone(harness: Harness) -> tuple[str, dict[str, str], dict[str, str]]:
    """lab-a-01's job, with lab-a-02's refused for good: (job id, lab-a-01's auth, lab-a-02's auth)."""
    job, auth_a = await offered(harness)
    auth_b = await host_auth(harness, "lab-a-02")
    [other] = await poll(harness, auth_b)
    refused = await harness.client.post(
        f"/api/runner/v1/jobs/{other}/refuse",
        json={"reason": "invalid_claim", "detail": "not here", "retry": False},
        headers=auth_b,
    )
    assert (await refused.json())["state"] == "refused_before_start"
    return job, auth_a, auth_b


async def in_maintenance(harness: Harness, device: str) -> None:
    clock = harness.database.clock
    async with harness.database.sessions() as session, session.begin():
        await set_state(
            session,
            device,
            DeviceState.MAINTENANCE,
            "reflashing the bootloader",
            until=clock() + timedelta(hours=2),
            change=Change("octocat", clock()),
        )


async def lose_the_lease(harness: Harness, clock: FakeClock, *back: dict[str, str]) -> Dispatcher:
    """Every host falls silent past its lease; the hosts ``back`` come back; then the server's dispatcher
    (this server process's, on its own database) ends the leases it no longer hears of."""
    app = harness.client.app
    clock.advance(app[SETTINGS].runner_lease_s + 1)
    dispatcher = Dispatcher(app[DATABASE], lease_ttl_s=app[SETTINGS].runner_lease_s)
    await dispatcher.expire()
    for auth in back:
        await register(harness, auth)
    return dispatcher


async def leased_again(harness: Harness, dispatcher: Dispatcher, job: str) -> None:
    """A dispatch round leases the job again (this one, or the server's own, which runs beside it)."""

    async def leased() -> bool:
        await dispatcher.dispatch_once()
        return await job_state(harness, job) == "leased"

    await wait_until(leased)


async def job_state(harness: Harness, job: str) -> str:
    async with harness.database.sessions() as session:
        row = await session.get(JobRow, int(job))
    assert row is not None
    return row.state.value


def count_revocations(harness: Harness) -> list[int]:
    """The installations the server counts a runner's token revocation in, from now."""
    counted: list[int] = []
    protocol = harness.client.app[PROTOCOL]
    original = protocol.revoking
    assert original is not None

    def revoking(installation_id: int) -> None:
        counted.append(installation_id)
        original(installation_id)

    protocol.revoking = revoking
    return counted


async def test_a_job_leased_again_to_another_host_gets_a_token_of_its_own(
    harness: Harness, clock: FakeClock
) -> None:
    job, auth_a, auth_b = await offered_to_lab_a_01_alone(harness)
    status, first = await accept(harness, job, auth_a)
    assert status == 200
    await in_maintenance(harness, "modalix-bluebox")  # lab-a-01's device: the job can only go to lab-a-02
    dispatcher = await lose_the_lease(harness, clock, auth_b)
    assert await job_state(harness, job) == "queued"
    await leased_again(harness, dispatcher, job)
    assert await poll(harness, auth_b) == [job]
    status, second = await accept(harness, job, auth_b)
    assert (status, second["state"]) == (200, "accepted")
    assert second["github"]["token"] != first["github"]["token"]
    assert second["github"]["token"] in harness.github.tokens
    # lab-a-01, back, is no longer the job's host: nothing is handed to it.
    await register(harness, auth_a)
    status, late = await accept(harness, job, auth_a)
    assert status == 404
    assert "github" not in late


async def test_a_job_leased_again_to_the_same_host_gets_a_new_token(
    harness: Harness, clock: FakeClock
) -> None:
    # The host dropped the job when it lost the lease (and revoked its token): the new lease is a new one.
    job, auth_a, _ = await offered_to_lab_a_01_alone(harness)
    _, first = await accept(harness, job, auth_a)
    await in_maintenance(harness, "modalix-redbox")  # the job can only go back to lab-a-01
    dispatcher = await lose_the_lease(harness, clock, auth_a)
    await leased_again(harness, dispatcher, job)
    assert await poll(harness, auth_a) == [job]
    status, second = await accept(harness, job, auth_a)
    assert (status, second["state"], second["changed"]) == (200, "accepted", True)
    assert second["github"]["token"] != first["github"]["token"]
    _, again = await accept(harness, job, auth_a)  # the same lease's repeated accept: the same token
    assert again["github"]["token"] == second["github"]["token"]


async def test_a_job_whose_runner_was_lost_has_its_token_forgotten(
    harness: Harness, clock: FakeClock
) -> None:
    counted = count_revocations(harness)
    job, auth_a, _ = await offered_to_lab_a_01_alone(harness)
    await accept(harness, job, auth_a)
    await accept(harness, job, auth_a)
    assert counted == []
    await lose_the_lease(harness, clock)
    assert await job_state(harness, job) == "queued"
    assert counted == [INSTALLATION]  # forgotten: its host revokes it when it hears it lost the job


async def test_a_started_job_whose_runner_was_lost_has_its_token_forgotten(
    harness: Harness, clock: FakeClock
) -> None:
    counted = count_revocations(harness)
    job, auth_a, _ = await offered_to_lab_a_01_alone(harness)
    await accept(harness, job, auth_a)
    await harness.client.post(f"/api/runner/v1/jobs/{job}/start", headers=auth_a)
    await lose_the_lease(harness, clock)
    assert await job_state(harness, job) == "retried"  # it failed runner_lost, and runs again as a new job
    assert counted == [INSTALLATION]


async def test_two_accepts_of_a_job_at_once_mint_one_token(harness: Harness) -> None:
    job, auth = await offered(harness)
    before = mints(harness)
    harness.github.faults.inject("POST", TOKENS, delay_s=0.3, times=None)
    (status, first), (again_status, again) = await asyncio.gather(
        accept(harness, job, auth), accept(harness, job, auth)
    )
    assert (status, again_status) == (200, 200)
    assert first["github"]["token"] == again["github"]["token"]
    assert mints(harness) == before + 1


async def test_a_token_minted_for_a_lease_that_ended_meanwhile_is_not_handed_out(
    harness: Harness, clock: FakeClock
) -> None:
    counted = count_revocations(harness)
    job, auth_a, _ = await offered_to_lab_a_01_alone(harness)
    harness.github.faults.inject("POST", TOKENS, delay_s=1.0, times=None)
    accepting = asyncio.create_task(accept(harness, job, auth_a))

    async def accepted() -> bool:
        return await job_state(harness, job) == "accepted"

    await wait_until(accepted)
    await lose_the_lease(harness, clock)  # while GitHub mints its token
    status, answer = await accepting
    assert status == 200
    assert answer["state"] == "queued"  # not the host's any more: it drops the job
    assert answer.get("github") is None
    assert counted == []  # handed to no one: no runner revokes it
