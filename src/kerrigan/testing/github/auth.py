"""Who is asking: the App's JWT, installation access tokens (and their revocation), and the OAuth web flow
with which people sign in to Kerrigan's pages."""

from __future__ import annotations

import html
import json
import secrets
import time
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jwt
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from kerrigan.testing.github.accounts import repository_body, user_body
from kerrigan.testing.github.errors import GitHubError

if TYPE_CHECKING:
    from kerrigan.testing.github.records import FakeRepository
    from kerrigan.testing.github.server import GitHubStandIn


_LEVELS = {"read": 1, "write": 2, "admin": 3}


def generate_app_key() -> tuple[str, str]:
    """A fresh RSA key pair for a test GitHub App: (private PEM, public PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


def _credentials(request: web.Request) -> tuple[str, str]:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower(), token.strip()


def app_key(github: GitHubStandIn, app_id: str) -> str | None:
    """The public key JWTs of ``app_id`` are checked with: the stand-in's own App's, or a created App's."""
    if app_id == github.app_id:
        return github.public_key
    created = github.created_apps.get(app_id)
    return created.public_key if created is not None else None


def app_permissions(github: GitHubStandIn, app_id: str) -> dict[str, str]:
    """What an installation of the App grants."""
    created = github.created_apps.get(app_id)
    return dict(created.permissions) if created is not None else dict(github.app_permissions)


def check_app_jwt(github: GitHubStandIn, request: web.Request) -> str:
    """The App whose valid JWT the request carries (the stand-in's own or one created from a manifest);
    refused otherwise, as GitHub checks it."""
    scheme, token = _credentials(request)
    if scheme != "bearer":
        raise GitHubError(401, "A JSON web token could not be decoded")
    try:
        issuer = str(jwt.decode(token, options={"verify_signature": False}).get("iss"))
    except jwt.PyJWTError as exc:
        raise GitHubError(401, f"A JSON web token could not be decoded: {exc}") from None
    public_key = app_key(github, issuer)
    if public_key is None:
        raise GitHubError(401, "'Issuer' claim ('iss') must be the App's id")
    try:
        claims = jwt.decode(
            token,
            public_key,
            algorithms=["RS256"],
            options={"require": ["iat", "exp", "iss"]},
            leeway=0,
        )
    except jwt.PyJWTError as exc:
        raise GitHubError(401, f"A JSON web token could not be decoded: {exc}") from None
    now = time.time()
    if claims["exp"] - claims["iat"] > 600 or claims["exp"] > now + 600:
        raise GitHubError(401, "'Expiration time' claim ('exp') is too far in the future")
    if claims["iat"] > now + 60:
        raise GitHubError(401, "'Issued at' claim ('iat') must be an Integer representing a time in the past")
    return issuer


def installation_of(github: GitHubStandIn, request: web.Request) -> int | None:
    """The installation whose live token authenticates the request, if any."""
    scheme, token = _credentials(request)
    found = github.tokens.get(token) if scheme in ("token", "bearer") else None
    if found is None or found[1] < datetime.now(UTC):
        return None
    return found[0]


def installation_token(github: GitHubStandIn, request: web.Request) -> tuple[str, int]:
    """The request's installation token and its installation; 401 unless the token is live."""
    scheme, token = _credentials(request)
    if scheme not in ("token", "bearer") or token not in github.tokens:
        raise GitHubError(401, "Bad credentials")
    installation, expires = github.tokens[token]
    if expires < datetime.now(UTC):
        raise GitHubError(401, "Bad credentials")
    return token, installation


def authorized_repository(github: GitHubStandIn, request: web.Request) -> FakeRepository:
    """The repository of the path, when the request's token may see it (GitHub answers 404 otherwise)."""
    token, installation = installation_token(github, request)
    full_name = f"{request.match_info['owner']}/{request.match_info['repo']}"
    repo = github.repositories.get(full_name)
    if repo is None or repo.installation_id != installation:
        raise GitHubError(404, "Not Found")
    scope = github.token_scopes.get(token)
    if scope is not None and full_name.split("/", 1)[1] not in scope:
        raise GitHubError(404, "Not Found")  # GitHub hides repositories a token may not see
    return repo


async def create_access_token(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /app/installations/{installation_id}/access_tokens``, optionally narrowed to repositories and
    permissions (which must be within the installation's)."""
    app_id = check_app_jwt(github, request)
    installation = int(request.match_info["installation_id"])
    if installation not in github.installations:
        raise GitHubError(404, "Not Found")
    if github.installation_apps.get(installation, github.app_id) != app_id:
        raise GitHubError(404, "Not Found")  # another App's installation
    if installation in github.suspended:
        raise GitHubError(403, "This installation has been suspended")
    raw = await request.read()  # read once already by the middleware; aiohttp keeps it
    body: Any = json.loads(raw) if raw else {}
    if not isinstance(body, dict):
        raise GitHubError(400, "Problems parsing JSON")
    github.check_body(request, body)
    names = body.get("repositories")
    if isinstance(names, list):
        account = github.installations[installation]
        for name in names:
            repo = github.repository_named(f"{account}/{name}")
            if repo is None or repo.installation_id != installation:
                raise GitHubError(
                    422,
                    "There is at least one repository that does not exist or is not accessible to the parent "
                    "installation.",
                )
    granted = app_permissions(github, app_id)
    asked = body.get("permissions")
    if isinstance(asked, dict):
        for name, level in asked.items():
            if _LEVELS.get(str(level), 99) > _LEVELS.get(granted.get(name, ""), -1):
                raise GitHubError(422, "The permissions requested are not granted to this installation.")
        granted = {str(name): str(level) for name, level in asked.items()}
    token = "ghs_" + secrets.token_urlsafe(24)
    expires = datetime.now(UTC).replace(microsecond=0) + github.token_lifetime
    github.tokens[token] = (installation, expires)
    answer: dict[str, Any] = {
        "token": token,
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "permissions": granted,
        "repository_selection": "all",
    }
    if isinstance(names, list):
        github.token_scopes[token] = frozenset(str(name) for name in names)
        answer["repository_selection"] = "selected"
        # GitHub lists the repositories a narrowed token may see, as it spells their names.
        seen = [github.repository_named(f"{account}/{name}") for name in names]
        answer["repositories"] = [repository_body(github, repo.full_name) for repo in seen if repo]
    return web.json_response(answer, status=201)


async def revoke_access_token(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``DELETE /installation/token``: the token is refused from then on."""
    token, _ = installation_token(github, request)
    del github.tokens[token]  # token_scopes keeps it: a record of what the token could see
    return web.Response(status=204)


async def authorize_page(github: GitHubStandIn, request: web.Request) -> web.Response:
    """GitHub's "Authorize" page, reduced to a form: which login signs in (tests and the demo type it)."""
    if request.query.get("client_id") != github.oauth_client_id:
        raise GitHubError(404, "unknown OAuth client_id")
    hidden = "".join(
        f'<input type="hidden" name="{name}" value="{html.escape(request.query.get(name, ""))}">'
        for name in ("client_id", "redirect_uri", "state")
    )
    page = (
        "<!doctype html><title>Authorize Kerrigan</title><h1>Sign in to GitHub (stand-in)</h1>"
        f'<form method="post" action="/login/oauth/authorize">{hidden}'
        '<label>Login <input name="login" autofocus></label> '
        '<button type="submit">Authorize</button></form>'
    )
    return web.Response(text=page, content_type="text/html")


async def authorize(github: GitHubStandIn, request: web.Request) -> web.Response:
    """The "Authorize" button: back to the App's callback with a one-time code."""
    form = await request.post()
    login, redirect_uri, state = (str(form.get(name, "")) for name in ("login", "redirect_uri", "state"))
    if form.get("client_id") != github.oauth_client_id or not login or not redirect_uri:
        raise GitHubError(400, "client_id, redirect_uri and login are required")
    code = secrets.token_urlsafe(16)
    github.oauth_codes[code] = (login, redirect_uri)
    separator = "&" if "?" in redirect_uri else "?"
    location = f"{redirect_uri}{separator}{urlencode({'code': code, 'state': state})}"
    return web.Response(status=302, headers={"Location": location})


async def oauth_token(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``POST /login/oauth/access_token``: a code for a user token (errors come with status 200, as there)."""
    form = await request.post()
    if (
        form.get("client_id") != github.oauth_client_id
        or form.get("client_secret") != github.oauth_client_secret
    ):
        return web.json_response({"error": "incorrect_client_credentials"})
    found = github.oauth_codes.pop(str(form.get("code", "")), None)
    if found is None or ("redirect_uri" in form and form["redirect_uri"] != found[1]):
        return web.json_response({"error": "bad_verification_code", "error_description": "bad code"})
    token = "gho_" + secrets.token_urlsafe(24)
    github.user_tokens[token] = found[0]
    return web.json_response({"access_token": token, "token_type": "bearer", "scope": ""})


async def user(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /user``: the signed-in user of a user token."""
    scheme, token = _credentials(request)
    login = github.user_tokens.get(token) if scheme in ("bearer", "token") else None
    if login is None:
        raise GitHubError(401, "Requires authentication")
    return web.json_response(user_body(login, private=True))


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """Tokens, the OAuth web flow and the signed-in user."""
    router.add_post(
        "/app/installations/{installation_id}/access_tokens", partial(create_access_token, github)
    )
    router.add_delete("/installation/token", partial(revoke_access_token, github))
    router.add_get("/login/oauth/authorize", partial(authorize_page, github))
    router.add_post("/login/oauth/authorize", partial(authorize, github))
    router.add_post("/login/oauth/access_token", partial(oauth_token, github))
    router.add_get("/user", partial(user, github))
