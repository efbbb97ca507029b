"""A repository, its pull requests (one, and those of a commit), a collaborator's permission on it, and the
App's installation on it."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kerrigan.testing.github.accounts import installation_body, repository_body, user_body
from kerrigan.testing.github.auth import authorized_repository, check_app_jwt
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL, LONG_AGO, node_id

if TYPE_CHECKING:
    from kerrigan.testing.github.records import FakeRepository
    from kerrigan.testing.github.server import GitHubStandIn


def pull_body(github: GitHubStandIn, repo: FakeRepository, pull: dict[str, Any]) -> dict[str, Any]:
    """A ``pull-request`` as ``GET .../pulls/{pull_number}`` answers it (a superset of the simple one)."""
    number = pull["number"]
    api = f"{github.url}/repos/{repo.full_name}"
    html = f"{HTML_URL}/{repo.full_name}/pull/{number}"

    def end(side: dict[str, Any]) -> dict[str, Any]:
        full_name = side["repo"]["full_name"]
        return {
            "label": f"{full_name.split('/', 1)[0]}:{side['ref']}",
            "ref": side["ref"],
            "sha": side["sha"],
            "repo": repository_body(github, full_name),
            "user": user_body(full_name.split("/", 1)[0]),
        }

    links = {
        "self": f"{api}/pulls/{number}",
        "html": html,
        "issue": f"{api}/issues/{number}",
        "comments": f"{api}/issues/{number}/comments",
        "review_comments": f"{api}/pulls/{number}/comments",
        "review_comment": f"{api}/pulls/comments{{/number}}",
        "commits": f"{api}/pulls/{number}/commits",
        "statuses": f"{api}/statuses/{pull['head']['sha']}",
    }
    return {
        "id": pull["id"],
        "node_id": node_id("PR", pull["id"]),
        "number": number,
        "state": pull["state"],
        "locked": False,
        "title": pull.get("title", f"Pull request {number}"),
        "body": None,
        "user": user_body(pull["head"]["repo"]["full_name"].split("/", 1)[0]),
        "labels": [],
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "draft": False,
        "head": end(pull["head"]),
        "base": end(pull["base"]),
        "url": links["self"],
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": links["issue"],
        "comments_url": links["comments"],
        "commits_url": links["commits"],
        "review_comments_url": links["review_comments"],
        "review_comment_url": links["review_comment"],
        "statuses_url": links["statuses"],
        "_links": {name: {"href": href} for name, href in links.items()},
        "created_at": pull.get("created_at", LONG_AGO),
        "updated_at": pull.get("updated_at", LONG_AGO),
        "closed_at": None,
        "merged_at": None,
        "merge_commit_sha": None,
        "author_association": "CONTRIBUTOR",
        "auto_merge": None,
        "merged": False,
        "mergeable": None,
        "mergeable_state": "unknown",
        "merged_by": None,
        "maintainer_can_modify": False,
        "comments": 0,
        "review_comments": 0,
        "commits": 1,
        "additions": 0,
        "deletions": 0,
        "changed_files": 0,
    }


def pull_minimal(github: GitHubStandIn, repo: FakeRepository, pull: dict[str, Any]) -> dict[str, Any]:
    """A ``pull-request-minimal``, as check runs list them."""

    def side(end: dict[str, Any]) -> dict[str, Any]:
        full_name = end["repo"]["full_name"]
        short = {"id": repository_body(github, full_name)["id"], "url": f"{github.url}/repos/{full_name}"}
        return {"ref": end["ref"], "sha": end["sha"], "repo": {**short, "name": full_name.split("/", 1)[1]}}

    return {
        "id": pull["id"],
        "number": pull["number"],
        "url": f"{github.url}/repos/{repo.full_name}/pulls/{pull['number']}",
        "head": side(pull["head"]),
        "base": side(pull["base"]),
    }


async def pulls_for_commit(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/commits/{commit_sha}/pulls``."""
    repo = authorized_repository(github, request)
    sha = request.match_info["commit_sha"]
    found = [pull_body(github, repo, pull) for pull in repo.pulls.values() if pull["head"]["sha"] == sha]
    return web.json_response(found)


async def pull(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/pulls/{pull_number}``."""
    repo = authorized_repository(github, request)
    found = repo.pulls.get(int(request.match_info["pull_number"]))
    if found is None:
        raise GitHubError(404, "Not Found")
    return web.json_response(pull_body(github, repo, found))


async def permission(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/collaborators/{username}/permission``: GitHub's legacy permission (maintain
    reads as write, triage as read) and the role name."""
    repo = authorized_repository(github, request)
    login = request.match_info["username"]
    role = repo.permissions.get(login)
    if role is None:
        raise GitHubError(404, f"{login} is not a user")
    legacy = {"maintain": "write", "triage": "read"}.get(role, role)
    user = {**user_body(login), "role_name": role}
    return web.json_response({"permission": legacy, "role_name": role, "user": user})


async def repository(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}``: the repository, to a token that may see it."""
    repo = authorized_repository(github, request)
    return web.json_response(repository_body(github, repo.full_name))


async def repository_installation(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/installation``: the installation of the App whose JWT asks (names in any
    case, as GitHub matches them); 404 when the App is not installed there."""
    app_id = check_app_jwt(github, request)
    repo = github.repository_named(f"{request.match_info['owner']}/{request.match_info['repo']}")
    if repo is None or github.installation_apps.get(repo.installation_id, github.app_id) != app_id:
        raise GitHubError(404, "Not Found")
    return web.json_response(installation_body(github, repo.installation_id))


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Repositories, pulls, permissions and a repository's installation."""
    router.add_get("/repos/{owner}/{repo}", partial(repository, github))
    router.add_get("/repos/{owner}/{repo}/commits/{commit_sha}/pulls", partial(pulls_for_commit, github))
    router.add_get("/repos/{owner}/{repo}/pulls/{pull_number}", partial(pull, github))
    router.add_get("/repos/{owner}/{repo}/collaborators/{username}/permission", partial(permission, github))
    router.add_get("/repos/{owner}/{repo}/installation", partial(repository_installation, github))
