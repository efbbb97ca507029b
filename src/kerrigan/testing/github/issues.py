"""Issue comments and reactions to them."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from kerrigan.testing.github.accounts import user_body
from kerrigan.testing.github.auth import authorized_repository
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL, node_id, now_iso

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

COMMENT_LIMIT: Final = 65_536  # GitHub's documented maximum of a comment body, in characters
REACTIONS: Final = frozenset({"+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"})


def comment_body(github: GitHubStandIn, comment: dict[str, Any]) -> dict[str, Any]:
    """An ``issue-comment`` as GitHub answers it."""
    api = f"{github.url}/repos/{comment['repository']}/issues"
    html = f"{HTML_URL}/{comment['repository']}/issues/{comment['issue']}"
    now = comment["created_at"]
    return {
        "id": comment["id"],
        "node_id": node_id("IC", comment["id"]),
        "url": f"{api}/comments/{comment['id']}",
        "html_url": f"{html}#issuecomment-{comment['id']}",
        "issue_url": f"{api}/{comment['issue']}",
        "body": comment["body"],
        "user": user_body(f"{github.app_slug}[bot]", kind="Bot"),
        "created_at": now,
        "updated_at": now,
        "author_association": "NONE",
    }


def reaction_body(github: GitHubStandIn, reaction: dict[str, Any]) -> dict[str, Any]:
    """A ``reaction`` as GitHub answers it."""
    return {
        "id": reaction["id"],
        "node_id": node_id("REA", reaction["id"]),
        "user": user_body(f"{github.app_slug}[bot]", kind="Bot"),
        "content": reaction["content"],
        "created_at": reaction["created_at"],
    }


async def create_comment(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /repos/{owner}/{repo}/issues/{issue_number}/comments``."""
    repo = authorized_repository(github, request)
    body = await request.json()
    github.check_body(request, body)
    if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
        raise GitHubError(422, 'Invalid request.\n\n"body" wasn\'t supplied.')
    if len(body["body"]) > COMMENT_LIMIT:
        raise GitHubError(422, f"Validation Failed: body is too long (maximum is {COMMENT_LIMIT} characters)")
    comment: dict[str, Any] = {
        "id": next(github.ids),
        "repository": repo.full_name,
        "issue": int(request.match_info["issue_number"]),
        "body": body["body"],
        "created_at": now_iso(),
    }
    github.comments.append(comment)
    pull = repo.pulls.get(comment["issue"])
    if pull is not None:  # a comment is a change of the pull request: GitHub moves its updated_at
        pull["updated_at"] = comment["created_at"]
    return web.json_response(comment_body(github, comment), status=201)


async def create_reaction(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions``."""
    repo = authorized_repository(github, request)
    body = await request.json()
    github.check_body(request, body)
    if not isinstance(body, dict) or body.get("content") not in REACTIONS:
        raise GitHubError(422, f"Invalid request.\n\ncontent must be one of {sorted(REACTIONS)}.")
    reaction: dict[str, Any] = {
        "id": next(github.ids),
        "repository": repo.full_name,
        "comment": int(request.match_info["comment_id"]),
        "content": body["content"],
        "created_at": now_iso(),
    }
    github.reactions.append(reaction)
    return web.json_response(reaction_body(github, reaction), status=201)


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Comments and reactions."""
    router.add_post("/repos/{owner}/{repo}/issues/{issue_number}/comments", partial(create_comment, github))
    router.add_post(
        "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions", partial(create_reaction, github)
    )
