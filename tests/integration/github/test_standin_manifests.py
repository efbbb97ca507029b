"""The stand-in's App manifest flow: the form GitHub's page takes, the redirect with a code, and the code's
conversion into the App's credentials, once."""

from __future__ import annotations

import html
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pytest

from kerrigan.github.client import app_jwt
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import INSTALLATION

REDIRECT = "http://127.0.0.1:9/setup/callback"
MANIFEST: dict[str, Any] = {
    "name": "Lab A",
    "url": "https://example.com/kerrigan",
    "hook_attributes": {"url": "https://lab.example.com/webhooks/github"},
    "redirect_url": REDIRECT,
    "callback_urls": ["https://lab.example.com/auth/callback"],
    "default_events": ["merge_group", "push"],
    "default_permissions": {"merge_queues": "read", "contents": "read"},
}


async def create(
    http: aiohttp.ClientSession, github: GitHubStandIn, manifest: object, *, path: str = "/settings/apps/new"
) -> tuple[int, str, str]:
    """The form's post, as a browser sends it: (status, Location, page)."""
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    async with http.post(
        f"{github.url}{path}?state=s1", data={"manifest": text}, allow_redirects=False
    ) as response:
        return response.status, response.headers.get("Location", ""), await response.text()


async def code_of(http: aiohttp.ClientSession, github: GitHubStandIn, manifest: object = MANIFEST) -> str:
    status, redirect, page = await create(http, github, manifest)
    assert status == 302, page
    location = urlsplit(redirect)
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT
    query = parse_qs(location.query)
    assert query["state"] == ["s1"]
    return query["code"][0]


async def convert(http: aiohttp.ClientSession, github: GitHubStandIn, code: str) -> tuple[int, Any]:
    async with http.post(f"{github.url}/app-manifests/{code}/conversions") as response:
        return response.status, await response.json()


async def test_a_manifest_makes_an_app_whose_code_converts_once(github: GitHubStandIn) -> None:
    async with aiohttp.ClientSession() as http:
        code = await code_of(http, github)
        status, app = await convert(http, github, code)
        assert status == 201
        assert (app["name"], app["slug"], app["owner"]["login"]) == ("Lab A", "lab-a", "octocat")
        assert app["permissions"] == {"metadata": "read", "merge_queues": "read", "contents": "read"}
        assert app["events"] == ["merge_group", "push"]
        assert app["pem"].startswith("-----BEGIN PRIVATE KEY-----")
        assert all(
            isinstance(app[name], str) and app[name]
            for name in ("webhook_secret", "client_id", "client_secret")
        )
        assert app["html_url"].endswith("/apps/lab-a")
        again, body = await convert(http, github, code)
        assert (again, body["message"]) == (404, "Not Found")


async def test_the_conversion_answers_as_githubs_description_says(github: GitHubStandIn) -> None:
    assert github.description is not None, "GitHub's description is needed for this test"
    async with aiohttp.ClientSession() as http:
        _, app = await convert(http, github, await code_of(http, github))
    operation = github.description.operation("POST", "/app-manifests/x/conversions")
    assert operation is not None
    assert github.description.response_problems(operation, 201, app) == []


async def test_an_unknown_or_expired_code_is_not_found(github: GitHubStandIn) -> None:
    async with aiohttp.ClientSession() as http:
        assert (await convert(http, github, "no-such-code"))[0] == 404
        code = await code_of(http, github)
        app_id, _ = github.manifest_codes[code]
        github.manifest_codes[code] = (app_id, datetime.now(UTC) - timedelta(seconds=1))
        assert (await convert(http, github, code))[0] == 404


async def test_an_organizations_app_is_owned_by_it(github: GitHubStandIn) -> None:
    async with aiohttp.ClientSession() as http:
        _, redirect, _ = await create(http, github, MANIFEST, path="/organizations/acme/settings/apps/new")
        code = parse_qs(urlsplit(redirect).query)["code"][0]
        _, app = await convert(http, github, code)
    assert (app["owner"]["login"], app["owner"]["type"]) == ("acme", "Organization")


async def test_the_new_apps_key_mints_tokens_for_its_installations_only(github: GitHubStandIn) -> None:
    async with aiohttp.ClientSession() as http:
        _, app = await convert(http, github, await code_of(http, github))
        github.add_installation(77, "lab-a", app_id=str(app["id"]))
        headers = {"Authorization": f"Bearer {app_jwt(str(app['id']), app['pem'], time.time())}"}
        async with http.post(f"{github.url}/app/installations/77/access_tokens", headers=headers) as minted:
            assert minted.status == 201
            assert (await minted.json())["permissions"] == app["permissions"]
        own = f"{github.url}/app/installations/{INSTALLATION}/access_tokens"  # the stand-in's own App's
        async with http.post(own, headers=headers) as refused:
            assert refused.status == 404


def _without(field: str) -> dict[str, Any]:
    return {name: value for name, value in MANIFEST.items() if name != field}


@pytest.mark.parametrize(
    ("manifest", "says"),
    [
        ({**MANIFEST, "default_permissions": {"contents": "read"}}, "merge_group needs the merge_queues"),
        ("{not json", "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        (_without("url"), "url is required"),
        ({**MANIFEST, "hook_attributes": {"active": True}}, "hook_attributes.url is required"),
        ({**MANIFEST, "default_permissions": {"merge_queues": "read", "lasers": "read"}}, "no permission"),
        ({**MANIFEST, "default_permissions": {"merge_queues": "admin"}}, "is not one of read, write"),
        ({**MANIFEST, "default_events": ["merge_group", "teleport"]}, "knows no event 'teleport'"),
        ({**MANIFEST, "name": "x" * 35}, "1 to 34 characters"),
    ],
)
async def test_a_manifest_github_would_refuse_gets_an_error_page(
    github: GitHubStandIn, manifest: object, says: str
) -> None:
    async with aiohttp.ClientSession() as http:
        status, _, page = await create(http, github, manifest)
    assert status == 422
    assert says in html.unescape(page)
    assert github.created_apps == {}
