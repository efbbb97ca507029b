"""Users and the App, as GitHub describes them in its answers."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from kerrigan.testing.github.records import HTML_URL, node_id

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

_API = "https://api.github.com"  # the URLs inside user objects are GitHub's own; nobody follows them


def user_id(login: str) -> int:
    """A stable id for a login (``hash`` differs between processes)."""
    return zlib.crc32(login.encode()) % 10**8


def user_body(login: str, *, private: bool = False, kind: str = "User") -> dict[str, Any]:
    """A ``simple-user``; ``private``: the signed-in user's own, longer ``private-user``."""
    number = user_id(login)
    url = f"{_API}/users/{login}"
    body: dict[str, Any] = {
        "login": login,
        "id": number,
        "node_id": node_id("U", number),
        "avatar_url": f"https://avatars.githubusercontent.com/u/{number}",
        "gravatar_id": "",
        "url": url,
        "html_url": f"{HTML_URL}/{login}",
        "followers_url": f"{url}/followers",
        "following_url": f"{url}/following{{/other_user}}",
        "gists_url": f"{url}/gists{{/gist_id}}",
        "starred_url": f"{url}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{url}/subscriptions",
        "organizations_url": f"{url}/orgs",
        "repos_url": f"{url}/repos",
        "events_url": f"{url}/events{{/privacy}}",
        "received_events_url": f"{url}/received_events",
        "type": kind,
        "site_admin": False,
    }
    if private:
        body |= {
            "name": login,
            "company": None,
            "blog": "",
            "location": None,
            "email": None,
            "hireable": None,
            "bio": None,
            "public_repos": 0,
            "public_gists": 0,
            "followers": 0,
            "following": 0,
            "created_at": "2020-01-01T00:00:00Z",
            "updated_at": "2020-01-01T00:00:00Z",
            "private_gists": 0,
            "total_private_repos": 0,
            "owned_private_repos": 0,
            "disk_usage": 0,
            "collaborators": 0,
            "two_factor_authentication": True,
        }
    return body


def app_body(github: GitHubStandIn) -> dict[str, Any]:
    """The App (an ``integration``)."""
    number = int(github.app_id) if github.app_id.isdigit() else user_id(github.app_id)
    return {
        "id": number,
        "slug": github.app_slug,
        "node_id": node_id("A", number),
        "client_id": github.oauth_client_id,
        "owner": user_body("octo", kind="Organization"),
        "name": github.app_slug,
        "description": "Hardware-in-the-loop test sessions",
        "external_url": "https://kerrigan.test",
        "html_url": f"{HTML_URL}/apps/{github.app_slug}",
        "created_at": "2020-01-01T00:00:00Z",
        "updated_at": "2020-01-01T00:00:00Z",
        "permissions": dict(github.app_permissions),
        "events": ["check_run", "check_suite", "issue_comment", "merge_group", "pull_request", "push"],
    }
