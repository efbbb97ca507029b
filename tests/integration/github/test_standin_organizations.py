"""The stand-in answers who the App is installed on, who belongs to an organization, and whether a
repository is private, the way GitHub answers an App."""

from __future__ import annotations

import aiohttp

from kerrigan.testing.github import GitHubStandIn
from tests.integration.conftest import mint_token, standin_app_jwt, token_auth
from tests.integration.github.conftest import INSTALLATION, REPO


async def test_the_app_lists_its_installations_with_their_accounts_a_page_at_a_time(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    github.add_installation(7, "mona", kind="User")
    github.add_installation(8, "octo-old")
    github.suspended.add(8)
    jwt_auth = {"Authorization": f"Bearer {standin_app_jwt(github)}"}
    async with api_session.get(f"{github.url}/app/installations?per_page=2", headers=jwt_auth) as response:
        assert response.status == 200
        first = await response.json()
        assert 'rel="next"' in response.headers["Link"]
    async with api_session.get(
        f"{github.url}/app/installations?per_page=2&page=2", headers=jwt_auth
    ) as response:
        second = await response.json()
        assert "Link" not in response.headers
    found = {item["id"]: item for item in first + second}
    assert found[INSTALLATION]["account"]["login"] == "octo"
    assert found[INSTALLATION]["target_type"] == found[INSTALLATION]["account"]["type"] == "Organization"
    assert found[7]["account"]["type"] == "User"
    assert found[8]["suspended_at"] is not None
    assert found[INSTALLATION]["suspended_at"] is None
    async with api_session.get(f"{github.url}/app/installations", headers=token_auth("ghs_x")) as response:
        assert response.status == 401  # the App's JWT, not a token
    async with api_session.post(
        f"{github.url}/app/installations/8/access_tokens", json={}, headers=jwt_auth
    ) as response:
        assert response.status == 403  # a suspended installation mints no token


async def test_membership_is_answered_204_or_404_to_the_installation_on_that_organization(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.add_member("octo", "Rita")
    async with api_session.get(
        f"{github.url}/orgs/Octo/members/rita", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 204
    github.remove_member("octo", "RITA")
    async with api_session.get(
        f"{github.url}/orgs/octo/members/rita", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 404
    async with api_session.get(
        f"{github.url}/orgs/octo-lab/members/rita", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 403  # another organization: not this installation's to ask
        assert (await response.json())["message"] == "Resource not accessible by integration"


async def test_an_app_without_the_members_permission_may_not_ask(
    api_session: aiohttp.ClientSession, github: GitHubStandIn
) -> None:
    del github.app_permissions["members"]
    token = await mint_token(api_session, github)
    async with api_session.get(f"{github.url}/orgs/octo/members/rita", headers=token_auth(token)) as response:
        assert response.status == 403


async def test_a_repository_says_whether_it_is_private(
    api_session: aiohttp.ClientSession, github: GitHubStandIn, installation_token: str
) -> None:
    github.add_repository("octo/public-sdk", INSTALLATION, private=False)
    for name, private in ((REPO, True), ("octo/public-sdk", False)):
        async with api_session.get(
            f"{github.url}/repos/{name}", headers=token_auth(installation_token)
        ) as response:
            assert response.status == 200
            body = await response.json()
            assert (body["full_name"], body["private"]) == (name, private)
            assert body["visibility"] == ("private" if private else "public")
    async with api_session.get(
        f"{github.url}/repos/octo/unknown", headers=token_auth(installation_token)
    ) as response:
        assert response.status == 404
