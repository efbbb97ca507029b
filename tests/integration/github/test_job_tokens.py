"""The token an accepted job fetches its source with: minted once per acceptance, through GitHub's passing
failures, never for a job that is not in the runner's hands; and a transition the state machine does not
allow, refused where the runner attempts it."""

from __future__ import annotations

from typing import Any

from kerrigan.app import PROTOCOL
from kerrigan.store.leases import leased_devices
from kerrigan.store.runners import create_runner_token
from kerrigan.store.sessions import get_session
from kerrigan.testing.waiting import wait_until
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
