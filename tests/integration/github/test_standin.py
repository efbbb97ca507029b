"""The GitHub stand-in itself, over real HTTP on loopback: faults, tokens, and the check runs of a commit."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kerrigan.testing.github import DROPPED, GitHubStandIn
from tests.integration.conftest import mint_token, standin_app_jwt, token_auth
from tests.integration.github.conftest import INSTALLATION, REPO, SHA

OTHER_HEAD = "1" * 40


async def create_run(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    name: str = "kerrigan / smoke",
    **extra: Any,
) -> aiohttp.ClientResponse:
    async with api_session.post(
        f"{github.url}/repos/{REPO}/check-runs",
        json={"name": name, "head_sha": SHA, "external_id": "session-1", **extra},
        headers=token_auth(installation_token),
    ) as response:
        await response.read()
        return response


# -- faults ----------------------------------------------------------------------------------------


async def test_a_status_fault_answers_instead_of_handling_with_github_body_and_headers(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    fault = github.faults.inject("POST", r"/check-runs$", status=429, headers={"Retry-After": "7"})
    async with api_session.post(
        f"{github.url}/repos/{REPO}/check-runs",
        json={"name": "n", "head_sha": SHA},
        headers=token_auth(installation_token),
    ) as response:
        assert response.status == 429
        assert response.headers["Retry-After"] == "7"
        body = await response.json()
    assert body["message"] == "Too Many Requests"
    assert body["documentation_url"].startswith("https://docs.github.com/")
    assert github.check_runs == {}
    assert fault.hits == 1


async def test_a_status_fault_carries_its_message(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("GET", r"/contents/", status=503, message="Service Unavailable, try later")
    async with api_session.get(
        f"{github.url}/repos/{REPO}/contents/.kerrigan?ref={SHA}", headers=token_auth(installation_token)
    ) as response:
        assert (response.status, (await response.json())["message"]) == (
            503,
            "Service Unavailable, try later",
        )


async def test_a_fault_applies_times_then_requests_are_handled_again(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    fault = github.faults.inject("POST", r"/check-runs$", status=502, times=2)
    statuses = [(await create_run(api_session, github, installation_token)).status for _ in range(3)]
    assert statuses == [502, 502, 201]
    assert fault.hits == 2
    assert len(github.check_runs) == 1


async def test_a_fault_without_times_applies_to_every_matching_request(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    fault = github.faults.inject("POST", r"/check-runs$", status=500, times=None)
    statuses = [(await create_run(api_session, github, installation_token)).status for _ in range(5)]
    assert statuses == [500] * 5
    assert fault.hits == 5


async def test_a_fault_leaves_other_methods_and_paths_alone(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("GET", r"/check-runs", status=500, times=None)
    github.faults.inject("POST", r"/comments$", status=500, times=None)
    assert (await create_run(api_session, github, installation_token)).status == 201


async def test_act_first_creates_the_check_run_and_then_answers_the_error(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("POST", r"/check-runs$", status=502, act_first=True)
    assert (await create_run(api_session, github, installation_token)).status == 502
    [run] = github.check_runs.values()
    assert run["external_id"] == "session-1"


async def test_a_drop_closes_the_connection_without_handling(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("POST", r"/check-runs$", drop=True)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await create_run(api_session, github, installation_token)
    assert github.check_runs == {}
    assert github.requests[-1].status == DROPPED


async def test_act_first_drop_creates_the_check_run_and_loses_the_answer(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("POST", r"/check-runs$", drop=True, act_first=True)
    with pytest.raises(aiohttp.ServerDisconnectedError):
        await create_run(api_session, github, installation_token)
    assert len(github.check_runs) == 1
    assert (
        await create_run(api_session, github, installation_token)
    ).status == 201  # the next connection works


async def test_a_delay_alone_still_handles_the_request(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    fault = github.faults.inject("POST", r"/check-runs$", delay_s=0.01)
    assert (await create_run(api_session, github, installation_token)).status == 201
    assert fault.hits == 1


async def test_a_delayed_request_times_out_at_the_client(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("GET", r"/check-runs/", delay_s=0.5)
    with pytest.raises(TimeoutError):
        async with api_session.get(
            f"{github.url}/repos/{REPO}/check-runs/1",
            headers=token_auth(installation_token),
            timeout=aiohttp.ClientTimeout(total=0.05),
        ):
            pass


async def pick_pattern(seed: int) -> list[int]:
    async with GitHubStandIn(public_key="unused", seed=seed) as github:
        fault = github.faults.inject("GET", "/user", status=500, probability=0.5, times=None)
        statuses = []
        async with aiohttp.ClientSession() as session:
            for _ in range(40):
                async with session.get(f"{github.url}/user") as response:
                    statuses.append(response.status)
        assert fault.hits == statuses.count(500)
        return statuses


async def test_a_probable_fault_picks_some_requests_the_same_way_for_the_same_seed() -> None:
    first, again, other = await pick_pattern(0), await pick_pattern(0), await pick_pattern(1)
    assert first == again
    assert first != other
    assert 0 < first.count(500) < 40
    assert set(first) == {500, 401}


async def test_clear_forgets_the_faults(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.faults.inject("POST", r"/check-runs$", status=500, times=None)
    github.faults.clear()
    assert (await create_run(api_session, github, installation_token)).status == 201


async def test_fail_next_answers_the_status_the_next_times(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.fail_next("POST", r"/check-runs$", 503, headers={"Retry-After": "1"}, times=1)
    first = await create_run(api_session, github, installation_token)
    assert (first.status, first.headers["Retry-After"]) == (503, "1")
    assert (await create_run(api_session, github, installation_token)).status == 201


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"status": 500, "drop": True},
        {"act_first": True, "delay_s": 1.0},
        {"status": 500, "probability": 0},
    ],
)
def test_inject_refuses_a_fault_that_says_nothing_or_contradicts_itself(
    github: GitHubStandIn, kwargs: dict[str, Any]
) -> None:
    with pytest.raises(ValueError, match=r"fault|act_first|probability"):
        github.faults.inject("GET", "/", **kwargs)


# -- recording -------------------------------------------------------------------------------------


async def test_every_request_is_recorded_with_its_headers_body_and_status(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    await create_run(api_session, github, installation_token)
    recorded = github.requests[-1]
    assert (recorded.method, recorded.path, recorded.status) == ("POST", f"/repos/{REPO}/check-runs", 201)
    assert recorded.headers["Accept"] == "application/vnd.github+json"
    assert recorded.headers["X-GitHub-Api-Version"] == "2022-11-28"
    assert recorded.headers["User-Agent"] == "standin-tests"
    assert recorded.body["external_id"] == "session-1"


async def test_an_unknown_route_answers_githubs_not_found(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    async with api_session.get(
        f"{github.url}/repos/{REPO}/no-such-thing", headers=token_auth(installation_token)
    ) as response:
        assert (response.status, (await response.json())["message"]) == (404, "Not Found")


# -- tokens ----------------------------------------------------------------------------------------


async def test_a_revoked_token_is_refused_with_bad_credentials(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    async with api_session.delete(
        f"{github.url}/installation/token", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 204
    assert installation_token not in github.tokens
    response = await create_run(api_session, github, installation_token)
    assert response.status == 401
    async with api_session.get(
        f"{github.url}/repos/{REPO}/check-runs/1", headers=token_auth(installation_token)
    ) as answer:
        assert (answer.status, (await answer.json())["message"]) == (401, "Bad credentials")


async def test_revoking_one_token_leaves_the_installations_other_tokens_working(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    other = await mint_token(api_session, github)
    async with api_session.delete(f"{github.url}/installation/token", headers=token_auth(other)):
        pass
    assert (await create_run(api_session, github, installation_token)).status == 201


async def test_a_token_scoped_to_repositories_hides_the_others(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.add_repository("octo/other", INSTALLATION)
    github.add_commit("octo/other", SHA, {"README.md": "other"})
    scoped = await mint_token(api_session, github, repositories=["other"])
    assert (await create_run(api_session, github, scoped)).status == 404


async def test_a_token_for_a_repository_the_installation_lacks_is_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    async with api_session.post(
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        json={"repositories": ["nowhere"]},
        headers={"Authorization": f"Bearer {standin_app_jwt(github)}"},
    ) as response:
        assert response.status == 422


async def test_a_token_asking_more_than_the_installation_grants_is_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    async with api_session.post(
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        json={"permissions": {"contents": "write"}},
        headers={"Authorization": f"Bearer {standin_app_jwt(github)}"},
    ) as response:
        assert response.status == 422
        assert "not granted" in (await response.json())["message"]


async def test_a_token_narrowed_to_permissions_reports_them(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    async with api_session.post(
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        json={"repositories": ["firmware"], "permissions": {"contents": "read"}},
        headers={"Authorization": f"Bearer {standin_app_jwt(github)}"},
    ) as response:
        body = await response.json()
    assert (body["permissions"], body["repository_selection"]) == ({"contents": "read"}, "selected")


# -- check runs of a commit ------------------------------------------------------------------------


async def list_runs(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    ref: str = SHA,
    **query: str,
) -> tuple[dict[str, Any], str | None]:
    async with api_session.get(
        f"{github.url}/repos/{REPO}/commits/{ref}/check-runs",
        params=query,
        headers=token_auth(installation_token),
    ) as response:
        assert response.status == 200, await response.text()
        return await response.json(), response.headers.get("Link")


async def test_listing_a_commits_check_runs_by_name_finds_the_external_id(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    await create_run(api_session, github, installation_token, "kerrigan / smoke", external_id="session-7")
    await create_run(api_session, github, installation_token, "kerrigan / other", external_id="session-8")
    body, link = await list_runs(api_session, github, installation_token, check_name="kerrigan / smoke")
    assert body["total_count"] == 1
    assert [(run["name"], run["external_id"]) for run in body["check_runs"]] == [
        ("kerrigan / smoke", "session-7")
    ]
    assert link is None


async def test_listing_latest_keeps_the_newest_run_of_each_name_and_all_keeps_every_one(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    for session in ("s1", "s2"):
        await create_run(api_session, github, installation_token, "kerrigan / smoke", external_id=session)
    latest, _ = await list_runs(api_session, github, installation_token)
    every, _ = await list_runs(api_session, github, installation_token, filter="all")
    assert [run["external_id"] for run in latest["check_runs"]] == ["s2"]
    assert [run["external_id"] for run in every["check_runs"]] == ["s2", "s1"]


async def test_listing_filters_by_status_and_leaves_out_other_commits(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    await create_run(api_session, github, installation_token, "a", status="in_progress")
    await create_run(api_session, github, installation_token, "b", status="completed", conclusion="success")
    body, _ = await list_runs(api_session, github, installation_token, status="completed")
    assert [run["name"] for run in body["check_runs"]] == ["b"]
    other, _ = await list_runs(api_session, github, installation_token, ref=OTHER_HEAD)
    assert other == {"total_count": 0, "check_runs": []}


async def test_listing_pages_with_link_headers(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    for number in range(5):
        await create_run(api_session, github, installation_token, f"run {number}")
    first, link = await list_runs(api_session, github, installation_token, per_page="2")
    assert (first["total_count"], len(first["check_runs"])) == (5, 2)
    assert link is not None
    assert 'rel="next"' in link
    assert 'rel="last"' in link
    assert "page=3" in link
    last, last_link = await list_runs(api_session, github, installation_token, per_page="2", page="3")
    assert len(last["check_runs"]) == 1
    assert last_link is not None
    assert 'rel="next"' not in last_link
    assert 'rel="prev"' in last_link
    names = {
        run["name"]
        for page in ("1", "2", "3")
        for run in (await list_runs(api_session, github, installation_token, per_page="2", page=page))[0][
            "check_runs"
        ]
    }
    assert names == {f"run {number}" for number in range(5)}


# -- check run semantics ---------------------------------------------------------------------------


async def test_a_conclusion_completes_the_check_run_and_annotations_add_up(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    annotation = {"path": "a.c", "start_line": 1, "end_line": 1, "annotation_level": "notice", "message": "m"}
    output = {"title": "t", "summary": "s", "annotations": [annotation]}
    created = await create_run(api_session, github, installation_token, output=output)
    run_id = next(iter(github.check_runs))
    assert created.status == 201
    async with api_session.patch(
        f"{github.url}/repos/{REPO}/check-runs/{run_id}",
        json={"conclusion": "failure", "output": output},
        headers=token_auth(installation_token),
    ) as response:
        body = await response.json()
    assert (body["status"], body["conclusion"]) == ("completed", "failure")
    assert body["completed_at"] is not None
    assert body["output"]["annotations_count"] == 2
    assert "repository" not in body  # the stand-in's own bookkeeping stays out of GitHub's answer
    assert github.check_runs[run_id]["updates"] == 1


async def test_a_check_run_of_another_repository_is_not_found(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.add_repository("octo/other", INSTALLATION)
    await create_run(api_session, github, installation_token)
    run_id = next(iter(github.check_runs))
    async with api_session.get(
        f"{github.url}/repos/octo/other/check-runs/{run_id}", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 404
