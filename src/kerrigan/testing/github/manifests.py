"""GitHub's App manifest flow: a form posts a manifest to ``/settings/apps/new`` (or an organization's), the
App is created and the browser sent to the manifest's ``redirect_url`` with a one-time ``code``, which
``POST /app-manifests/{code}/conversions`` turns into the App's id, private key, webhook secret and OAuth
client. The stand-in then accepts JWTs signed with that key for that App (``auth.app_key``).

GitHub's page shows the form to a signed-in person, who names the App and clicks "Create"; the stand-in
creates it at once, as that person would. It refuses what GitHub refuses, with an error page (422): a
manifest that is not a JSON object, without ``url``, with a permission or level GitHub does not know, or with
an event whose permission it does not ask for (``merge_group`` without ``merge_queues``, say).
"""

from __future__ import annotations

import html
import json
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from kerrigan.testing.github.accounts import user_body
from kerrigan.testing.github.auth import generate_app_key
from kerrigan.testing.github.errors import GitHubError
from kerrigan.testing.github.records import HTML_URL, node_id

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

CODE_LIFETIME: Final = timedelta(hours=1)  # GitHub: "the code expires after one hour"
MAX_NAME: Final = 34  # GitHub's limit on an App's name
MAX_CALLBACK_URLS: Final = 10
SIGNED_IN: Final = "octocat"  # who creates Apps on the stand-in's pages (the owner of a user's App)
LEVELS: Final = ("read", "write", "admin")
# The permission each webhook event needs (at least read), from the availability notes of GitHub's "Webhook
# events and payloads"; any of several will do where the tuple names more than one. Metadata every App has.
EVENT_PERMISSIONS: Final[dict[str, tuple[str, ...]]] = {
    "branch_protection_rule": ("administration",),
    "check_run": ("checks",),
    "check_suite": ("checks",),
    "code_scanning_alert": ("security_events",),
    "commit_comment": ("contents",),
    "create": ("contents",),
    "delete": ("contents",),
    "deployment": ("deployments",),
    "deployment_status": ("deployments",),
    "discussion": ("discussions",),
    "discussion_comment": ("discussions",),
    "fork": ("contents",),
    "gollum": ("contents",),
    "issue_comment": ("issues",),
    "issues": ("issues",),
    "label": ("metadata",),
    "merge_group": ("merge_queues",),
    "milestone": ("issues", "pull_requests"),
    "package": ("packages",),
    "page_build": ("pages",),
    "public": ("metadata",),
    "pull_request": ("pull_requests",),
    "pull_request_review": ("pull_requests",),
    "pull_request_review_comment": ("pull_requests",),
    "pull_request_review_thread": ("pull_requests",),
    "push": ("contents",),
    "release": ("contents",),
    "repository": ("metadata",),
    "repository_dispatch": ("contents",),
    "star": ("metadata",),
    "status": ("statuses",),
    "watch": ("metadata",),
    "workflow_job": ("actions",),
    "workflow_run": ("actions",),
}


@dataclass(frozen=True)
class CreatedApp:
    """An App made from a manifest: what the conversion hands out, and the key its JWTs are checked with."""

    id: int
    slug: str
    name: str
    owner: str
    owner_type: str  # "User" or "Organization"
    description: str
    url: str
    public_key: str
    pem: str
    webhook_secret: str | None
    client_id: str
    client_secret: str
    permissions: dict[str, str]
    events: list[str]
    created_at: str

    def body(self) -> dict[str, Any]:
        """The conversion's answer: an ``integration`` with the App's secrets."""
        return {
            "id": self.id,
            "slug": self.slug,
            "node_id": node_id("A", self.id),
            "owner": user_body(self.owner, kind=self.owner_type),
            "name": self.name,
            "description": self.description,
            "external_url": self.url,
            "html_url": f"{HTML_URL}/apps/{self.slug}",
            "created_at": self.created_at,
            "updated_at": self.created_at,
            "permissions": dict(self.permissions),
            "events": list(self.events),
            "installations_count": 0,
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "webhook_secret": self.webhook_secret,
            "pem": self.pem,
        }


def known_permissions(github: GitHubStandIn) -> dict[str, tuple[str, ...]] | None:
    """The App permissions GitHub's description names, with their levels (``None`` without it)."""
    if github.description is None:
        return None
    schema = github.description.document["components"]["schemas"]["app-permissions"]["properties"]
    return {name: tuple(field.get("enum", LEVELS)) for name, field in schema.items()}


def _is_url(value: object) -> bool:
    if not isinstance(value, str):
        return False
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def manifest_problems(manifest: object, known: dict[str, tuple[str, ...]] | None) -> list[str]:
    """Why GitHub would refuse the manifest (empty: it is accepted)."""
    if not isinstance(manifest, dict):
        return ["the manifest must be a JSON object"]
    problems = []
    if not _is_url(manifest.get("url")):
        problems.append("url is required: the App's homepage, an http(s) URL")
    name = manifest.get("name")
    if name is not None and (not isinstance(name, str) or not 0 < len(name) <= MAX_NAME):
        problems.append(f"name must be text of 1 to {MAX_NAME} characters")
    hook = manifest.get("hook_attributes")
    if hook is not None:
        if not isinstance(hook, dict) or not _is_url(hook.get("url")):
            problems.append("hook_attributes.url is required: the webhook's http(s) URL")
        elif not isinstance(hook.get("active", True), bool):
            problems.append("hook_attributes.active must be true or false")
    for field in ("redirect_url", "setup_url"):
        if field in manifest and not _is_url(manifest[field]):
            problems.append(f"{field} must be an http(s) URL")
    if "redirect_url" not in manifest:
        problems.append("redirect_url is required by the stand-in: where the code goes")
    callbacks = manifest.get("callback_urls", [])
    if (
        not isinstance(callbacks, list)
        or len(callbacks) > MAX_CALLBACK_URLS
        or not all(map(_is_url, callbacks))
    ):
        problems.append(f"callback_urls must be a list of at most {MAX_CALLBACK_URLS} http(s) URLs")
    for field in ("public", "request_oauth_on_install", "setup_on_update"):
        if not isinstance(manifest.get(field, False), bool):
            problems.append(f"{field} must be true or false")
    permissions = manifest.get("default_permissions", {})
    if not isinstance(permissions, dict):
        return [*problems, "default_permissions must be an object of permission: level"]
    for permission, level in permissions.items():
        levels = LEVELS if known is None else known.get(permission)
        if levels is None:
            problems.append(f"default_permissions: GitHub has no permission {permission!r}")
        elif level not in levels:
            problems.append(f"default_permissions.{permission}: {level!r} is not one of {', '.join(levels)}")
    events = manifest.get("default_events", [])
    if not isinstance(events, list) or not all(isinstance(event, str) for event in events):
        return [*problems, "default_events must be a list of event names"]
    granted = {*permissions, "metadata"}
    for event in events:
        needed = EVENT_PERMISSIONS.get(event)
        if needed is None:
            problems.append(f"default_events: the stand-in knows no event {event!r}")
        elif not granted.intersection(needed):
            problems.append(
                f"default_events: {event} needs the {' or '.join(needed)} permission, which the manifest "
                "does not ask for"
            )
    return problems


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "app"


def _error_page(problems: list[str]) -> web.Response:
    items = "".join(f"<li>{html.escape(problem)}</li>" for problem in problems)
    page = (
        "<!doctype html><title>Invalid GitHub App manifest</title><h1>Invalid GitHub App configuration</h1>"
        f"<ul>{items}</ul>"
    )
    return web.Response(status=422, text=page, content_type="text/html")


async def new_app(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /settings/apps/new`` (and ``/organizations/{org}/settings/apps/new``): create the App of the
    form's ``manifest`` and send the browser to its ``redirect_url`` with a code and the ``state``."""
    form = await request.post()
    text = form.get("manifest")
    if not isinstance(text, str) or not text.strip():
        return _error_page(["the form has no manifest field"])
    try:
        manifest: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        return _error_page([f"the manifest is not JSON: {exc}"])
    problems = manifest_problems(manifest, known_permissions(github))
    number = next(github.ids)
    name = str(manifest.get("name") or f"app-{number}") if isinstance(manifest, dict) else ""
    if not problems and any(app.slug == _slug(name) for app in github.created_apps.values()):
        problems.append(f"name {name!r} is already taken")
    if problems:
        return _error_page(problems)
    org = request.match_info.get("org")
    private_key, public_key = generate_app_key()
    hook = manifest.get("hook_attributes")
    app = CreatedApp(
        id=number,
        slug=_slug(name),
        name=name,
        owner=org or SIGNED_IN,
        owner_type="Organization" if org else "User",
        description=str(manifest.get("description") or ""),
        url=str(manifest["url"]),
        public_key=public_key,
        pem=private_key,
        webhook_secret=secrets.token_hex(20) if hook else None,
        client_id="Iv23" + secrets.token_hex(8),
        client_secret=secrets.token_hex(20),
        permissions={"metadata": "read", **manifest.get("default_permissions", {})},
        events=list(manifest.get("default_events", [])),
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    github.created_apps[str(app.id)] = app
    code = secrets.token_hex(20)
    github.manifest_codes[code] = (str(app.id), datetime.now(UTC) + CODE_LIFETIME)
    query = {"code": code} | ({"state": request.query["state"]} if "state" in request.query else {})
    redirect = str(manifest["redirect_url"])
    location = f"{redirect}{'&' if '?' in redirect else '?'}{urlencode(query)}"
    return web.Response(status=302, headers={"Location": location})


async def conversion(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /app-manifests/{code}/conversions``: the App's credentials, once per code (no authentication,
    as on GitHub; an unknown, used or expired code is 404)."""
    found = github.manifest_codes.pop(request.match_info["code"], None)
    if found is None or found[1] < datetime.now(UTC):
        raise GitHubError(404, "Not Found")
    return web.json_response(github.created_apps[found[0]].body(), status=201)


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """The manifest flow's pages and its conversion."""
    router.add_post("/settings/apps/new", partial(new_app, github))
    router.add_post("/organizations/{org}/settings/apps/new", partial(new_app, github))
    router.add_post("/app-manifests/{code}/conversions", partial(conversion, github))
