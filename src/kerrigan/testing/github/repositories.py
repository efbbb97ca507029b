"""Pull requests (one, and those of a commit) and a collaborator's permission on a repository."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kerrigan.testing.github.accounts import user_body
from kerrigan.testing.github.auth import authorized_repository
from kerrigan.testing.github.errors import GitHubError

if TYPE_CHECKING:
    from kerrigan.testing.github.records import FakeRepository
    from kerrigan.testing.github.server import GitHubStandIn


def pull_minimal(github: GitHubStandIn, repo: FakeRepository, pull: dict[str, Any]) -> dict[str, Any]:
    """A ``pull-request-minimal``, as check runs list them."""

    def side(end: dict[str, Any]) -> dict[str, Any]:
        name = end["repo"]["full_name"]
        other = github.repositories.get(name)
        number = other.id if other is not None else repo.id
        return {
            "ref": end["ref"],
            "sha": end["sha"],
            "repo": {"id": number, "url": f"{github.url}/repos/{name}", "name": name.split("/", 1)[1]},
        }

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
    return web.json_response([pull for pull in repo.pulls.values() if pull["head"]["sha"] == sha])


async def pull(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/pulls/{pull_number}``."""
    repo = authorized_repository(github, request)
    found = repo.pulls.get(int(request.match_info["pull_number"]))
    if found is None:
        raise GitHubError(404, "Not Found")
    return web.json_response(found)


async def permission(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /repos/{owner}/{repo}/collaborators/{username}/permission``: GitHub's legacy permission (maintain
    reads as write, triage as read) and the role name."""
    repo = authorized_repository(github, request)
    login = request.match_info["username"]
    role = repo.permissions.get(login)
    if role is None:
        raise GitHubError(404, f"{login} is not a user")
    legacy = {"maintain": "write", "triage": "read"}.get(role, role)
    return web.json_response({"permission": legacy, "role_name": role, "user": user_body(login)})


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Pulls and permissions."""
    router.add_get("/repos/{owner}/{repo}/commits/{commit_sha}/pulls", partial(pulls_for_commit, github))
    router.add_get("/repos/{owner}/{repo}/pulls/{pull_number}", partial(pull, github))
    router.add_get("/repos/{owner}/{repo}/collaborators/{username}/permission", partial(permission, github))
