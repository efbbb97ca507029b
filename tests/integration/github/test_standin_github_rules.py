"""Check-run bodies GitHub refuses for rules its description states only in prose, refused by the stand-in
with GitHub's 422 whether or not the description is at hand (a fresh clone, ``kerrigan demo``)."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from kerrigan.testing.github import GitHubStandIn
from tests.integration.conftest import token_auth
from tests.integration.github.conftest import REPO, SHA

ANNOTATION = {"path": "a.c", "start_line": 3, "end_line": 3, "annotation_level": "failure", "message": "m"}
OUTPUT = {"title": "t", "summary": "s"}
REFUSED = [
    pytest.param({"conclusion": "stale"}, "only GitHub sets a check run's conclusion to stale", id="stale"),
    pytest.param({"external_id": 7}, "For 'external_id', 7 is not of type 'string'", id="external-id-number"),
    pytest.param(
        {"output": {**OUTPUT, "annotations": [{**ANNOTATION, "end_line": 5, "start_column": 2}]}},
        "start_column and end_column are only allowed on one line",
        id="columns-across-lines",
    ),
    pytest.param(
        {"output": {**OUTPUT, "annotations": [{**ANNOTATION, "end_line": 4, "end_column": 9}]}},
        "start_column and end_column are only allowed on one line",
        id="end-column-across-lines",
    ),
]


async def _send(
    http: aiohttp.ClientSession, method: str, url: str, body: dict[str, Any], token: str
) -> tuple[int, dict[str, Any]]:
    async with http.request(method, url, json=body, headers=token_auth(token)) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("validating", [True, False], ids=["with-description", "without"])
@pytest.mark.parametrize(("body", "said"), REFUSED)
async def test_a_create_github_refuses_is_refused(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    body: dict[str, Any],
    said: str,
    validating: bool,
) -> None:
    if not validating:
        github.description = None
    status, answer = await _send(
        api_session,
        "POST",
        f"{github.url}/repos/{REPO}/check-runs",
        {"name": "n", "head_sha": SHA, **body},
        installation_token,
    )
    assert status == 422
    assert said in answer["message"]
    assert github.check_runs == {}


@pytest.mark.parametrize(("body", "said"), REFUSED)
async def test_an_update_github_refuses_is_refused_and_changes_nothing(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    body: dict[str, Any],
    said: str,
) -> None:
    github.description = None
    url = f"{github.url}/repos/{REPO}/check-runs"
    _, run = await _send(api_session, "POST", url, {"name": "n", "head_sha": SHA}, installation_token)
    before = dict(github.check_runs[run["id"]])
    status, answer = await _send(api_session, "PATCH", f"{url}/{run['id']}", body, installation_token)
    assert status == 422
    assert said in answer["message"]
    assert github.check_runs[run["id"]] == before


async def test_columns_on_one_line_and_every_other_conclusion_are_accepted(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    url = f"{github.url}/repos/{REPO}/check-runs"
    annotations = [{**ANNOTATION, "start_column": 2, "end_column": 9}, {**ANNOTATION, "end_line": 8}]
    body = {
        "name": "n",
        "head_sha": SHA,
        "external_id": "7",
        "output": {**OUTPUT, "annotations": annotations},
    }
    for conclusion in (
        "action_required",
        "cancelled",
        "failure",
        "neutral",
        "success",
        "skipped",
        "timed_out",
    ):
        status, _ = await _send(
            api_session, "POST", url, {**body, "conclusion": conclusion}, installation_token
        )
        assert status == 201, conclusion
