"""The stand-in's answers have the fields GitHub's response schemas require, for each operation it serves."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from kerrigan.testing.github import GitHubStandIn
from tests.integration.conftest import standin_app_jwt, token_auth
from tests.integration.github.conftest import INSTALLATION, REPO, SHA

pytestmark = pytest.mark.github_description
Answer = tuple[str, str, int, Any]  # method, path, status, JSON body
Act = Callable[[aiohttp.ClientSession, GitHubStandIn, str], Awaitable[Answer]]
RUN = {
    "name": "kerrigan / smoke",
    "head_sha": SHA,
    "external_id": "s1",
    "output": {"title": "t", "summary": "s"},
}


async def call(
    http: aiohttp.ClientSession, github: GitHubStandIn, method: str, path: str, **kwargs: Any
) -> Answer:
    async with http.request(method, github.url + path, allow_redirects=False, **kwargs) as response:
        body = await response.json() if response.content_type == "application/json" else None
        return method, response.url.path, response.status, body


async def create_run(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> dict[str, Any]:
    *_, body = await call(
        http, github, "POST", f"/repos/{REPO}/check-runs", json=RUN, headers=token_auth(token)
    )
    created: dict[str, Any] = body
    return created


async def access_token(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    jwt = {"Authorization": f"Bearer {standin_app_jwt(github)}"}
    body = {"repositories": ["firmware"], "permissions": {"checks": "write"}}
    return await call(
        http, github, "POST", f"/app/installations/{INSTALLATION}/access_tokens", json=body, headers=jwt
    )


async def access_token_refused(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    jwt = {"Authorization": f"Bearer {standin_app_jwt(github)}"}
    body = {"permissions": {"contents": "admin"}}
    return await call(
        http, github, "POST", f"/app/installations/{INSTALLATION}/access_tokens", json=body, headers=jwt
    )


async def repository_installation(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    jwt = {"Authorization": f"Bearer {standin_app_jwt(github)}"}
    return await call(http, github, "GET", f"/repos/{REPO.upper()}/installation", headers=jwt)


async def repository_installation_missing(
    http: aiohttp.ClientSession, github: GitHubStandIn, token: str
) -> Answer:
    jwt = {"Authorization": f"Bearer {standin_app_jwt(github)}"}
    return await call(http, github, "GET", "/repos/octo/elsewhere/installation", headers=jwt)


async def create_check_run(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    github.add_pull(REPO, 7, head_sha=SHA)
    return await call(http, github, "POST", f"/repos/{REPO}/check-runs", json=RUN, headers=token_auth(token))


async def update_check_run(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    run = await create_run(http, github, token)
    body = {"conclusion": "success", "output": {"title": "done", "summary": "s", "text": "t"}}
    path = f"/repos/{REPO}/check-runs/{run['id']}"
    return await call(http, github, "PATCH", path, json=body, headers=token_auth(token))


async def get_check_run(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    run = await create_run(http, github, token)
    return await call(http, github, "GET", f"/repos/{REPO}/check-runs/{run['id']}", headers=token_auth(token))


async def list_check_runs(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    await create_run(http, github, token)
    path = f"/repos/{REPO}/commits/{SHA}/check-runs?check_name=kerrigan+/+smoke"
    return await call(http, github, "GET", path, headers=token_auth(token))


async def file_contents(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    path = f"/repos/{REPO}/contents/.kerrigan/workflows/hil-smoke.yml?ref={SHA}"
    return await call(http, github, "GET", path, headers=token_auth(token))


async def directory_contents(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    return await call(
        http, github, "GET", f"/repos/{REPO}/contents/.kerrigan?ref={SHA}", headers=token_auth(token)
    )


async def missing_contents(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    path = f"/repos/{REPO}/contents/nowhere?ref={SHA}"
    return await call(http, github, "GET", path, headers=token_auth(token))


async def comment(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    path = f"/repos/{REPO}/issues/7/comments"
    return await call(http, github, "POST", path, json={"body": "hello"}, headers=token_auth(token))


async def reaction(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    path = f"/repos/{REPO}/issues/comments/42/reactions"
    return await call(http, github, "POST", path, json={"content": "rocket"}, headers=token_auth(token))


async def pull(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    github.add_pull(REPO, 8, head_sha=SHA, fork="mona/firmware")
    return await call(http, github, "GET", f"/repos/{REPO}/pulls/8", headers=token_auth(token))


async def pulls_of_commit(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    github.add_pull(REPO, 7, head_sha=SHA)
    return await call(http, github, "GET", f"/repos/{REPO}/commits/{SHA}/pulls", headers=token_auth(token))


async def permission(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    github.set_permission(REPO, "mona", "maintain")
    path = f"/repos/{REPO}/collaborators/mona/permission"
    return await call(http, github, "GET", path, headers=token_auth(token))


async def permission_of_a_stranger(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    path = f"/repos/{REPO}/collaborators/nobody/permission"
    return await call(http, github, "GET", path, headers=token_auth(token))


async def signed_in_user(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    form = {"client_id": github.oauth_client_id, "redirect_uri": "http://kerrigan.test/cb", "login": "mona"}
    async with http.post(f"{github.url}/login/oauth/authorize", data=form, allow_redirects=False) as response:
        code = parse_qs(urlsplit(response.headers["Location"]).query)["code"][0]
    exchange = {
        "client_id": github.oauth_client_id,
        "client_secret": github.oauth_client_secret,
        "code": code,
    }
    async with http.post(f"{github.url}/login/oauth/access_token", data=exchange) as response:
        user_token = (await response.json())["access_token"]
    return await call(http, github, "GET", "/user", headers={"Authorization": f"Bearer {user_token}"})


async def tarball(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    return await call(http, github, "GET", f"/repos/{REPO}/tarball/{SHA}", headers=token_auth(token))


async def rate_limit(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    github.limits.enabled = True
    return await call(http, github, "GET", "/rate_limit", headers=token_auth(token))


async def revoke(http: aiohttp.ClientSession, github: GitHubStandIn, token: str) -> Answer:
    return await call(http, github, "DELETE", "/installation/token", headers=token_auth(token))


CASES: dict[str, tuple[Act, int]] = {
    "apps/create-installation-access-token": (access_token, 201),
    "apps/create-installation-access-token refused": (access_token_refused, 422),
    "apps/revoke-installation-access-token": (revoke, 204),
    "apps/get-repo-installation": (repository_installation, 200),
    "apps/get-repo-installation missing": (repository_installation_missing, 404),
    "checks/create": (create_check_run, 201),
    "checks/update": (update_check_run, 200),
    "checks/get": (get_check_run, 200),
    "checks/list-for-ref": (list_check_runs, 200),
    "repos/get-content file": (file_contents, 200),
    "repos/get-content directory": (directory_contents, 200),
    "repos/get-content missing": (missing_contents, 404),
    "repos/download-tarball-archive": (tarball, 302),
    "issues/create-comment": (comment, 201),
    "reactions/create-for-issue-comment": (reaction, 201),
    "pulls/get": (pull, 200),
    "repos/list-pull-requests-associated-with-commit": (pulls_of_commit, 200),
    "repos/get-collaborator-permission-level": (permission, 200),
    "repos/get-collaborator-permission-level stranger": (permission_of_a_stranger, 404),
    "users/get-authenticated": (signed_in_user, 200),
    "rate-limit/get": (rate_limit, 200),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_answer_has_what_githubs_response_schema_requires(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str, case: str
) -> None:
    assert github.description is not None
    act, expected = CASES[case]
    method, path, status, body = await act(api_session, github, installation_token)
    assert status == expected, body
    operation = github.description.operation(method, path)
    assert operation is not None
    assert operation.operation_id == case.split(maxsplit=1)[0]
    problems = github.description.response_problems(operation, status, body)
    assert problems == ([] if body is not None else None)  # 204 and 302 carry no JSON, and GitHub none


def test_an_answer_missing_a_required_field_is_reported(github: GitHubStandIn) -> None:
    assert github.description is not None
    operation = github.description.operation("POST", f"/repos/{REPO}/check-runs")
    assert operation is not None
    problems = github.description.response_problems(operation, 201, {"id": 1})
    assert problems is not None
    assert any("'node_id' is a required property" in problem for problem in problems)


def test_every_operation_of_githubs_description_the_stand_in_serves_has_a_case(github: GitHubStandIn) -> None:
    assert github.description is not None
    served = {case.split()[0] for case in CASES}
    unserved = {
        "apps/get-authenticated",
        "apps/create-from-manifest",
        "apps/get-installation",
        "apps/get-repo-installation",
        "actions/download-artifact",
        "actions/get-workflow-run",
        "actions/list-workflow-run-artifacts",
        "repos/get-commit",
        "git/get-blob",
        "git/get-tree",
    }
    assert {operation.operation_id for operation in github.description.operations} == served | unserved


async def test_a_push_and_a_comment_move_a_pull_requests_times_as_githubs_do(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    # What /kerrigan approve reads to tell whether the head moved after a comment (docs/github-app.md).
    github.add_pull(REPO, 8, head_sha=SHA, fork="mona/firmware", at="2026-11-29T11:00:00Z")
    github.push_to_pull(REPO, 8, "b" * 40, at="2026-11-29T12:00:00Z")
    *_, body = await call(
        api_session, github, "GET", f"/repos/{REPO}/pulls/8", headers=token_auth(installation_token)
    )
    assert (body["head"]["sha"], body["created_at"], body["updated_at"]) == (
        "b" * 40,
        "2026-11-29T11:00:00Z",
        "2026-11-29T12:00:00Z",
    )
    assert body["head"]["repo"]["pushed_at"] == "2026-11-29T12:00:00Z"
    assert body["base"]["repo"]["pushed_at"] != "2026-11-29T12:00:00Z"  # the fork was pushed, not the base
    *_, created = await call(
        api_session,
        github,
        "POST",
        f"/repos/{REPO}/issues/8/comments",
        json={"body": "a reply"},
        headers=token_auth(installation_token),
    )
    *_, body = await call(
        api_session, github, "GET", f"/repos/{REPO}/pulls/8", headers=token_auth(installation_token)
    )
    assert body["updated_at"] == created["created_at"]
    assert body["head"]["repo"]["pushed_at"] == "2026-11-29T12:00:00Z"
