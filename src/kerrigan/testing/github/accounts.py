"""Users, the App, its installations and repositories, as GitHub describes them in its answers."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Any

from kerrigan.testing.github.records import HTML_URL, LONG_AGO, node_id

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


def installation_body(github: GitHubStandIn, installation_id: int) -> dict[str, Any]:
    """An ``installation`` of the App (or of the App created from a manifest that it belongs to)."""
    account = github.installations[installation_id]
    app_id = github.installation_apps.get(installation_id, github.app_id)
    created = github.created_apps.get(app_id)
    permissions = dict(created.permissions) if created is not None else dict(github.app_permissions)
    owner = user_body(account, kind="Organization")
    return {
        "id": installation_id,
        "account": owner,
        "access_tokens_url": f"{github.url}/app/installations/{installation_id}/access_tokens",
        "repositories_url": f"{github.url}/installation/repositories",
        "html_url": f"{HTML_URL}/organizations/{account}/settings/installations/{installation_id}",
        "app_id": created.id if created is not None else app_body(github)["id"],
        "app_slug": created.slug if created is not None else github.app_slug,
        "client_id": created.client_id if created is not None else github.oauth_client_id,
        "target_id": owner["id"],
        "target_type": "Organization",
        "permissions": permissions,
        "events": list(created.events) if created is not None else app_body(github)["events"],
        "repository_selection": "selected",
        "single_file_name": None,
        "created_at": "2020-01-01T00:00:00Z",
        "updated_at": "2020-01-01T00:00:00Z",
        "suspended_by": None,
        "suspended_at": None,
    }


_REPOSITORY_URLS = (  # every *_url a repository object carries, as GitHub spells them (URI templates kept)
    "archive_url:/{archive_format}{/ref}",
    "assignees_url:/assignees{/user}",
    "blobs_url:/git/blobs{/sha}",
    "branches_url:/branches{/branch}",
    "collaborators_url:/collaborators{/collaborator}",
    "comments_url:/comments{/number}",
    "commits_url:/commits{/sha}",
    "compare_url:/compare/{base}...{head}",
    "contents_url:/contents/{+path}",
    "contributors_url:/contributors",
    "deployments_url:/deployments",
    "downloads_url:/downloads",
    "events_url:/events",
    "forks_url:/forks",
    "git_commits_url:/git/commits{/sha}",
    "git_refs_url:/git/refs{/sha}",
    "git_tags_url:/git/tags{/sha}",
    "hooks_url:/hooks",
    "issue_comment_url:/issues/comments{/number}",
    "issue_events_url:/issues/events{/number}",
    "issues_url:/issues{/number}",
    "keys_url:/keys{/key_id}",
    "labels_url:/labels{/name}",
    "languages_url:/languages",
    "merges_url:/merges",
    "milestones_url:/milestones{/number}",
    "notifications_url:/notifications{?since,all,participating}",
    "pulls_url:/pulls{/number}",
    "releases_url:/releases{/id}",
    "stargazers_url:/stargazers",
    "statuses_url:/statuses/{sha}",
    "subscribers_url:/subscribers",
    "subscription_url:/subscription",
    "tags_url:/tags",
    "teams_url:/teams",
    "trees_url:/git/trees{/sha}",
)


def repository_body(github: GitHubStandIn, full_name: str) -> dict[str, Any]:
    """A ``repository`` object (a fork the stand-in does not hold gets an id of its own)."""
    known = github.repositories.get(full_name)
    number = known.id if known is not None else user_id(full_name)
    owner, name = full_name.split("/", 1)
    api = f"{github.url}/repos/{full_name}"
    body: dict[str, Any] = {
        "id": number,
        "node_id": node_id("R", number),
        "name": name,
        "full_name": full_name,
        "owner": user_body(owner, kind="Organization"),
        "private": known.private if known is not None else False,  # a fork it does not hold: public
        "visibility": "private" if known is not None and known.private else "public",
        "html_url": f"{HTML_URL}/{full_name}",
        "description": None,
        "fork": known is None,
        "url": api,
        "clone_url": f"{HTML_URL}/{full_name}.git",
        "git_url": f"git://github.com/{full_name}.git",
        "ssh_url": f"git@github.com:{full_name}.git",
        "svn_url": f"{HTML_URL}/{full_name}",
        "mirror_url": None,
        "homepage": None,
        "language": "C",
        "license": None,
        "default_branch": "main",
        "size": 0,
        "forks": 0,
        "forks_count": 0,
        "open_issues": 0,
        "open_issues_count": 0,
        "stargazers_count": 0,
        "watchers": 0,
        "watchers_count": 0,
        "has_downloads": False,
        "has_issues": True,
        "has_projects": False,
        "has_wiki": False,
        "has_pages": False,
        "archived": False,
        "disabled": False,
        "pushed_at": github.pushed_at.get(full_name, LONG_AGO),
        "created_at": LONG_AGO,
        "updated_at": LONG_AGO,
    }
    for entry in _REPOSITORY_URLS:
        key, _, suffix = entry.partition(":")
        body[key] = api + suffix
    return body
