"""Who is calling: a bearer API token mapped to a GitHub login, and whether that login is an admin."""

from __future__ import annotations

from dataclasses import dataclass

from aiohttp import web

from kerrigan.core.roles import Principal
from kerrigan.store.tokens import login_for_token
from kerrigan.web.errors import ApiError
from kerrigan.web.state import DATABASE, SETTINGS


@dataclass(frozen=True, slots=True)
class _Caller:
    principal: Principal | None


_CALLER = web.RequestKey("caller", _Caller)


async def current_principal(request: web.Request) -> Principal | None:
    """The caller, or ``None`` when no valid token was sent (a malformed or unknown one is a 401)."""
    if _CALLER in request:
        return request[_CALLER].principal
    header = request.headers.get("Authorization")
    principal = None
    if header is not None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "unauthenticated", "send the token as 'Authorization: Bearer <token>'")
        async with request.config_dict[DATABASE].sessions() as session:
            login = await login_for_token(session, token.strip())
        if login is None:
            raise ApiError(401, "unauthenticated", "the token is not valid (unknown or revoked)")
        principal = Principal(login, admin=login.lower() in request.config_dict[SETTINGS].admins)
    request[_CALLER] = _Caller(principal)
    return principal


async def reader(request: web.Request) -> Principal | None:
    """Anyone signed in may read; anonymous callers only when public read is on."""
    principal = await current_principal(request)
    if principal is None and not request.config_dict[SETTINGS].public_read:
        raise ApiError(
            401, "unauthenticated", "sign in: send an API token as 'Authorization: Bearer <token>'"
        )
    return principal


async def signed_in(request: web.Request) -> Principal:
    """The caller, who must have sent a valid token."""
    principal = await current_principal(request)
    if principal is None:
        raise ApiError(
            401, "unauthenticated", "sign in: send an API token as 'Authorization: Bearer <token>'"
        )
    return principal


def forbidden(principal: Principal, what: str) -> ApiError:
    """A 403 saying who may do it instead."""
    return ApiError(403, "forbidden", f"{principal.login} may not {what}")
