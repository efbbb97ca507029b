"""``/api/v1/repositories/{owner}/{repo}/secrets``: a repository's secrets by name, set and deleted; their
values go in and never come out.

Who may: System Admins, and the repository's writers (write, maintain or admin on GitHub). The web layer
does not talk to GitHub itself: the application hands it :class:`RepositoryWriters`, whose ``ask`` puts the
question to GitHub; while nothing does (no GitHub App configured), only System Admins may. A repository the
database does not know is looked up on GitHub through :class:`RepositoryFinder` (the App may have been
installed before Kerrigan's database existed), and remembered.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any, Final

from aiohttp import web

from kerrigan.core.inventory import RepositoryGlobError, validate_repository
from kerrigan.core.roles import Principal
from kerrigan.store.audit import Change
from kerrigan.store.installations import DiscoverRepository, DiscoveryError, Repository, installed_repository
from kerrigan.store.secrets import (
    Keyring,
    SecretError,
    SecretInfo,
    SecretsKeyError,
    delete_secret,
    list_secrets,
    set_secret,
    validate_name,
)
from kerrigan.web import bodies
from kerrigan.web.auth import forbidden, signed_in
from kerrigan.web.errors import ApiError, bad_request
from kerrigan.web.state import DATABASE, SETTINGS, writing
from kerrigan.web.writers import WritersUnknownError, github_unavailable, writes_to

log = logging.getLogger(__name__)
routes = web.RouteTableDef()

DEFAULT_LIMIT: Final = 50
MAX_LIMIT: Final = 500

"""``(installation id, owner/name, login)`` -> whether the login writes to the repository, and its role."""


class RepositoryFinder:
    """How the API asks GitHub for a repository's installation the database does not know (``discover``);
    ``None``: it cannot, and only the repositories the database knows are found."""

    def __init__(self, discover: DiscoverRepository | None = None) -> None:
        self.discover = discover


REPOSITORY_FINDER = web.AppKey("repository_finder", RepositoryFinder)


def _repository_name(request: web.Request) -> str:
    try:
        return validate_repository(f"{request.match_info['owner']}/{request.match_info['repo']}")
    except RepositoryGlobError as exc:
        raise bad_request(str(exc), field="repository") from None


def _name(request: web.Request) -> str:
    try:
        return validate_name(request.match_info["name"])
    except SecretError as exc:
        raise bad_request(str(exc), field="name") from None


async def _repository(request: web.Request, principal: Principal) -> Repository:
    """The installed repository of the path, once ``principal`` is known to manage its secrets."""
    name = _repository_name(request)
    finder = request.config_dict.get(REPOSITORY_FINDER)
    try:
        # A NotFoundError is the middleware's 404.
        repository = await installed_repository(
            request.config_dict[DATABASE], name, finder.discover if finder is not None else None
        )
    except DiscoveryError as exc:
        log.warning("cannot ask GitHub for the installation on %s: %s", name, exc)
        raise ApiError(
            503,
            "github_unavailable",
            f"cannot ask GitHub whether Kerrigan's App is installed on {name}; try again",
        ) from None
    if principal.admin:
        return repository
    what = f"manage the secrets of {repository.full_name}"
    try:
        answer = await writes_to(request, principal, repository.installation_id, repository.full_name)
    except WritersUnknownError:
        raise github_unavailable(principal, repository.full_name) from None
    if answer is None:
        raise forbidden(principal, f"{what}: only System Admins may (this server does not ask GitHub)")
    may_write, role = answer
    if not may_write:
        raise forbidden(principal, f"{what}: System Admins and its writers may (you have {role})")
    return repository


def _secret_json(secret: SecretInfo) -> dict[str, Any]:
    return {"name": secret.name, "set_by": secret.set_by, "set_at": secret.set_at.isoformat()}


def _paging(request: web.Request) -> tuple[int, str | None]:
    """``?limit=`` and ``?cursor=`` (the last name of the page before); any other parameter is a 400."""
    for key in request.query:
        if key not in ("limit", "cursor") or len(request.query.getall(key)) > 1:
            raise bad_request(f"unknown or repeated parameter {key!r}; expected limit, cursor", field=key)
    text = request.query.get("limit", str(DEFAULT_LIMIT))
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_LIMIT):
        raise bad_request(f"limit must be a whole number from 1 to {MAX_LIMIT}", field="limit")
    cursor = request.query.get("cursor")
    if cursor is None:
        return int(text), None
    try:
        after = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
        return int(text), validate_name(after)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad_request("cursor is not one this server gave out", field="cursor") from None


@routes.get("/repositories/{owner}/{repo}/secrets")
async def secrets_index(request: web.Request) -> web.Response:
    """The repository's secrets in name order: names, who set them and when, never values."""
    principal = await signed_in(request)
    limit, after = _paging(request)
    repository = await _repository(request, principal)
    async with request.config_dict[DATABASE].sessions() as session:
        page = await list_secrets(session, repository, after=after, limit=limit + 1)
    more = len(page) > limit
    page = page[:limit]
    cursor = base64.urlsafe_b64encode(page[-1].name.encode()).decode().rstrip("=") if more else None
    return web.json_response({"items": [_secret_json(secret) for secret in page], "next_cursor": cursor})


@routes.put("/repositories/{owner}/{repo}/secrets/{name}")
async def secrets_put(request: web.Request) -> web.Response:
    """Set a secret from ``{"value": "..."}``: 201 with the secret when new, 204 when replaced."""
    principal = await signed_in(request)
    repository = await _repository(request, principal)
    name = _name(request)
    body = await bodies.json_object(request, ("value",))
    value = bodies.required(body, "value")
    if not isinstance(value, str):
        raise bad_request("value must be a string", field="value")
    try:
        keys = Keyring(request.config_dict[SETTINGS].secrets_keys)
    except SecretsKeyError as exc:
        raise ApiError(503, "secrets_key_unset", str(exc)) from None
    database = request.config_dict[DATABASE]
    change = Change(principal.login, database.clock())
    try:
        async with writing(request) as session:
            created = await set_secret(session, keys, repository, name, value, change=change)
    except SecretError as exc:
        raise bad_request(str(exc), field=exc.field) from None
    if not created:
        return web.Response(status=204)
    return web.json_response(_secret_json(SecretInfo(name, change.actor, change.at)), status=201)


@routes.delete("/repositories/{owner}/{repo}/secrets/{name}")
async def secrets_delete(request: web.Request) -> web.Response:
    """Delete a secret: 204, or 404 when the repository has none of that name."""
    principal = await signed_in(request)
    repository = await _repository(request, principal)
    name = _name(request)
    database = request.config_dict[DATABASE]
    async with writing(request) as session:
        await delete_secret(session, repository, name, Change(principal.login, database.clock()))
    return web.Response(status=204)
