"""The stand-in refuses, with GitHub's 422, request bodies that GitHub's own description refuses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kerrigan.testing.github import GitHubStandIn
from kerrigan.testing.github.schema import (
    ENVIRONMENT_VARIABLE,
    RELATIVE_PATH,
    find_description,
    to_json_schema,
)
from tests.integration.conftest import standin_app_jwt, token_auth
from tests.integration.github.conftest import INSTALLATION, REPO, SHA

ANNOTATION = {"path": "a.c", "start_line": 1, "end_line": 1, "annotation_level": "failure", "message": "m"}
ACTION = {"label": "Retry", "description": "Run the session again", "identifier": "retry"}
OUTPUT = {"title": "t", "summary": "s"}


@pytest.mark.github_description
def test_the_suite_runs_the_stand_in_with_validation_on(github: GitHubStandIn) -> None:
    assert github.validating


def test_a_stand_in_told_not_to_validate_is_not_validating() -> None:
    assert not GitHubStandIn(public_key="unused", validate=False).validating


def test_without_the_description_the_stand_in_does_not_validate(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ENVIRONMENT_VARIABLE, str(tmp_path / "missing.json"))
    assert not GitHubStandIn(public_key="unused").validating


async def test_without_validation_a_body_only_the_schema_refuses_is_accepted(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.description = None
    body = {"name": "n", "head_sha": SHA, "details_url": 7}
    status, _ = await post(
        api_session, f"{github.url}/repos/{REPO}/check-runs", body, token_auth(installation_token)
    )
    assert status == 201


async def post(
    api_session: aiohttp.ClientSession, url: str, body: Any, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    async with api_session.post(url, json=body, headers=headers) as response:
        return response.status, await response.json()


@pytest.mark.github_description
@pytest.mark.parametrize(
    ("body", "what"),
    [
        ({"status": "waiting"}, "'waiting' is not one of"),
        (
            {"output": {**OUTPUT, "annotations": [{**ANNOTATION, "title": "x" * 256}]}},
            "output/annotations/0/title",
        ),
        (
            {"output": {**OUTPUT, "annotations": [{**ANNOTATION, "annotation_level": "error"}]}},
            "annotation_level",
        ),
        ({"output": {**OUTPUT, "annotations": [ANNOTATION] * 51}}, "output/annotations"),
        ({"output": {**OUTPUT, "summary": "s" * 65_536}}, "output/summary"),
        ({"output": {**OUTPUT, "text": "s" * 65_536}}, "output/text"),
        ({"output": {"title": "t"}}, '"summary" wasn\'t supplied'),
        ({"actions": [{"label": "Retry", "identifier": "retry"}]}, '"description" wasn\'t supplied'),
        ({"actions": [ACTION] * 4}, "actions"),
        ({"actions": [{**ACTION, "label": "l" * 21}]}, "actions/0/label"),
        ({"actions": [{**ACTION, "description": "d" * 41}]}, "actions/0/description"),
        ({"actions": [{**ACTION, "identifier": "i" * 21}]}, "actions/0/identifier"),
        ({"conclusion": "finished"}, "conclusion"),
        ({"external_id": 7}, "external_id"),
        ({"details_url": 7}, "details_url"),
    ],
)
async def test_a_check_run_github_would_refuse_is_refused_with_its_reason(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    body: dict[str, Any],
    what: str,
) -> None:
    status, answer = await post(
        api_session,
        f"{github.url}/repos/{REPO}/check-runs",
        {"name": "n", "head_sha": SHA, **body},
        token_auth(installation_token),
    )
    assert status == 422
    assert answer["message"].startswith("Invalid request.\n\n")
    assert what in answer["message"]
    assert answer["documentation_url"].startswith("https://docs.github.com/")
    assert github.check_runs == {}


async def test_a_check_run_at_every_limit_is_accepted(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    body = {
        "name": "n",
        "head_sha": SHA,
        "status": "completed",
        "conclusion": "success",
        "output": {
            "title": "t",
            "summary": "s" * 65_535,
            "text": "s" * 65_535,
            "annotations": [{**ANNOTATION, "title": "x" * 255}] * 50,
        },
        "actions": [{"label": "l" * 20, "description": "d" * 40, "identifier": "i" * 20}] * 3,
    }
    status, _ = await post(
        api_session, f"{github.url}/repos/{REPO}/check-runs", body, token_auth(installation_token)
    )
    assert status == 201


async def test_an_update_completing_a_check_run_without_a_conclusion_is_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    _, run = await post(
        api_session,
        f"{github.url}/repos/{REPO}/check-runs",
        {"name": "n", "head_sha": SHA},
        token_auth(installation_token),
    )
    async with api_session.patch(
        f"{github.url}/repos/{REPO}/check-runs/{run['id']}",
        json={"status": "completed"},
        headers=token_auth(installation_token),
    ) as response:
        assert response.status == 422
    assert github.check_runs[run["id"]]["status"] == "queued"


@pytest.mark.github_description
async def test_a_token_asking_contents_admin_is_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    status, answer = await post(
        api_session,
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        {"permissions": {"contents": "admin"}},
        {"Authorization": f"Bearer {standin_app_jwt(github)}"},
    )
    assert status == 422
    assert "permissions/contents" in answer["message"]
    assert github.tokens == {}


async def test_the_app_is_authenticated_before_its_body_is_validated(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    status, _ = await post(
        api_session,
        f"{github.url}/app/installations/{INSTALLATION}/access_tokens",
        {"permissions": {"contents": "admin"}},
        {},
    )
    assert status == 401


@pytest.mark.parametrize(
    ("body", "status"),
    [({"body": "b" * 65_536}, 201), ({"body": "b" * 65_537}, 422), ({"body": 3}, 422), ({}, 422)],
)
async def test_a_comment_body_takes_at_most_65536_characters(
    api_session: aiohttp.ClientSession,
    github: GitHubStandIn,
    installation_token: str,
    body: dict[str, Any],
    status: int,
) -> None:
    answer, _ = await post(
        api_session, f"{github.url}/repos/{REPO}/issues/7/comments", body, token_auth(installation_token)
    )
    assert answer == status


async def test_a_reaction_github_does_not_know_is_refused(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    status, answer = await post(
        api_session,
        f"{github.url}/repos/{REPO}/issues/comments/9/reactions",
        {"content": "tada"},
        token_auth(installation_token),
    )
    assert (status, "content" in answer["message"]) == (422, True)
    assert github.reactions == []


async def test_a_body_that_is_not_json_is_a_bad_request(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    async with api_session.post(
        f"{github.url}/repos/{REPO}/check-runs", data=b"{nope", headers=token_auth(installation_token)
    ) as response:
        assert (response.status, (await response.json())["message"]) == (400, "Problems parsing JSON")


def test_nullable_admits_null_beside_the_type_and_the_enum() -> None:
    converted = to_json_schema({"type": "string", "enum": ["a"], "nullable": True})
    assert converted == {"type": ["string", "null"], "enum": ["a", None]}


def test_a_nullable_reference_becomes_a_choice_with_null() -> None:
    assert to_json_schema({"$ref": "#/x", "nullable": True}) == {"anyOf": [{"$ref": "#/x"}, {"type": "null"}]}


def test_a_maximum_size_written_in_prose_becomes_a_max_length() -> None:
    converted = to_json_schema({"type": "string", "description": "The maximum size is 255 characters."})
    assert converted["maxLength"] == 255


def test_the_description_is_found_upward_from_a_folder_beside_shared(tmp_path: Path) -> None:
    target = tmp_path / RELATIVE_PATH
    target.parent.mkdir(parents=True)
    target.write_text("{}", encoding="utf-8")
    deep = tmp_path / "main" / "src" / "kerrigan"
    deep.mkdir(parents=True)
    assert find_description({}, [deep]) == target


def test_the_environment_names_the_description_and_a_missing_one_is_none(tmp_path: Path) -> None:
    named = tmp_path / "d.json"
    named.write_text("{}", encoding="utf-8")
    assert find_description({ENVIRONMENT_VARIABLE: str(named)}, [tmp_path]) == named
    assert find_description({ENVIRONMENT_VARIABLE: str(tmp_path / "gone.json")}, [tmp_path]) is None
    assert find_description({}, [tmp_path]) is None
