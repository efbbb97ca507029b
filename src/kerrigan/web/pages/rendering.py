"""Rendering a page: the layout's context (who is signed in, the CSRF token, the navigation), the
template filters, and the answers to a page that needs sign-in or refuses a user."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

import aiohttp_jinja2
from aiohttp import web

from kerrigan.web.errors import ApiError
from kerrigan.web.signin import Forbidden, SignInRequired, csrf_token, page_principal

NAVIGATION = (
    ("/pools", "Pools"),
    ("/queue", "Queue"),
    ("/runners", "Runner hosts"),
    ("/explain", "Explain"),
    ("/audit", "Audit log"),
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def render(
    request: web.Request, template: str, context: Mapping[str, Any], status: int = 200
) -> web.Response:
    """A page in the layout."""
    principal = await page_principal(request)
    base = {
        "principal": principal,
        "csrf": await csrf_token(request),
        "navigation": NAVIGATION,
        "path": request.path,
    }
    response = aiohttp_jinja2.render_template(template, request, {**base, **context}, status=status)
    response.headers["Cache-Control"] = "no-store"
    response.headers["X-Frame-Options"] = "DENY"
    # Everything is served from here (no CDN); forms post only to this site.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "form-action 'self'; frame-ancestors 'none'"
    )
    return response


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S UTC") if value is not None else ""


def filters() -> dict[str, Callable[..., Any]]:
    """Template filters."""
    return {"when": _when}


_PAGE_PREFIXES = (
    "/pools",
    "/devices",
    "/sessions",
    "/explain",
    "/queue",
    "/runners",
    "/audit",
    "/logout",
    "/auth",
)


@web.middleware
async def page_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page that needs sign-in sends the browser to /login; a refusal is a page that says why."""
    try:
        return await handler(request)
    except SignInRequired:
        raise web.HTTPFound(f"/login?next={request.path_qs}") from None
    except Forbidden as refused:
        return await render(request, "error.html", {"title": "Not allowed", "message": str(refused)}, 403)
    except ApiError as error:
        if not request.path.startswith(_PAGE_PREFIXES):
            raise
        title = {404: "Not found", 403: "Not allowed"}.get(error.status, "Cannot do that")
        return await render(request, "error.html", {"title": title, "message": error.message}, error.status)
