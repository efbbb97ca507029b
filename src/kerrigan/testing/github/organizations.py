"""The App's installations (``GET /app/installations``) and who belongs to an organization
(``GET /orgs/{org}/members/{username}``), as GitHub answers an App.

GitHub answers the membership question for an installation token of the App's installation on that
organization, when the App holds the ``members`` permission: 204 for a member, 404 for anyone else. A
token of another installation, or of an App without the permission, gets 403 "Resource not accessible by
integration".
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web

from kerrigan.testing.github.accounts import user_body, user_id
from kerrigan.testing.github.auth import app_permissions, check_app_jwt, installation_token
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

MAX_PER_PAGE = 100
NOT_ACCESSIBLE = "Resource not accessible by integration"


def installation_body(github: GitHubStandIn, installation_id: int) -> dict[str, Any]:
    """An ``installation`` as the App's list gives it."""
    account = github.installations[installation_id]
    kind = github.installation_kinds.get(installation_id, "Organization")
    app_id = github.installation_apps.get(installation_id, github.app_id)
    suspended = installation_id in github.suspended
    settings = f"{HTML_URL}/organizations/{account}" if kind == "Organization" else HTML_URL
    return {
        "id": installation_id,
        "account": user_body(account, kind=kind),
        "repository_selection": "all",
        "access_tokens_url": f"{github.url}/app/installations/{installation_id}/access_tokens",
        "repositories_url": f"{github.url}/installation/repositories",
        "html_url": f"{settings}/settings/installations/{installation_id}",
        "app_id": int(app_id) if app_id.isdigit() else user_id(app_id),
        "app_slug": github.app_slug,
        "target_id": user_id(account),
        "target_type": kind,
        "permissions": app_permissions(github, app_id),
        "events": ["check_run", "check_suite", "issue_comment", "merge_group", "pull_request", "push"],
        "created_at": "2020-01-01T00:00:00Z",
        "updated_at": "2020-01-01T00:00:00Z",
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "suspended_by": user_body("octo-admin") if suspended else None,
        "suspended_at": "2020-01-02T00:00:00Z" if suspended else None,
    }


async def list_installations(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /app/installations`` (the App's JWT), a page at a time (``per_page``, ``page``) with a
    ``Link`` to the next page."""
    app_id = check_app_jwt(github, request)
    mine = sorted(i for i in github.installations if github.installation_apps.get(i, github.app_id) == app_id)
    per_page = _number(request.query.get("per_page"), 30, MAX_PER_PAGE)
    page = _number(request.query.get("page"), 1, 10**6)
    shown = mine[(page - 1) * per_page : page * per_page]
    headers = {}
    if page * per_page < len(mine):
        headers["Link"] = f'<{github.url}/app/installations?per_page={per_page}&page={page + 1}>; rel="next"'
    return web.json_response([installation_body(github, i) for i in shown], headers=headers)


def _number(text: str | None, default: int, most: int) -> int:
    if text is None:
        return default
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 10**9:
        raise GitHubError(422, "Invalid request: not a positive number")
    return min(int(text), most)


async def check_membership(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /orgs/{org}/members/{username}``: 204 for a member, 404 otherwise."""
    _, installation = installation_token(github, request)
    org = request.match_info["org"].lower()
    account = github.installations.get(installation, "")
    app_id = github.installation_apps.get(installation, github.app_id)
    if account.lower() != org or "members" not in app_permissions(github, app_id):
        raise GitHubError(403, NOT_ACCESSIBLE)
    if request.match_info["username"].lower() not in github.members.get(org, set()):
        raise GitHubError(404, "User does not exist or is not a member of the organization")
    return web.Response(status=204)


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Installations and organization members."""
    router.add_get("/app/installations", partial(list_installations, github))
    router.add_get("/orgs/{org}/members/{username}", partial(check_membership, github))
