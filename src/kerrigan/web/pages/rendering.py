"""Rendering a page: the layout's context (who is signed in, the CSRF token, the navigation), the
template filters, and the answers to a page that needs sign-in or refuses a user."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import aiohttp_jinja2
from aiohttp import web

from kerrigan.core.matrix import shown_name
from kerrigan.store.inventory import ConflictError, NotFoundError, StaleError
from kerrigan.web.errors import ApiError
from kerrigan.web.signin import (
    Forbidden,
    SignInRefused,
    SignInRequired,
    csrf_token,
    page_principal,
    redirect,
)

NAVIGATION = (
    ("/pools", "Pools"),
    ("/devices", "Devices"),
    ("/sessions", "Sessions"),
    ("/queue", "Queue"),
    ("/runners", "Runner hosts"),
    ("/health", "Lab health"),
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
    """Template filters: ``when`` (a time as pages show it), ``job_name`` (a job key as people read it, the
    spelling check runs use: ``smoke (board=modalix)``)."""
    return {"when": _when, "job_name": shown_name}


_PAGE_PREFIXES = (
    "/pools",
    "/devices",
    "/sessions",
    "/explain",
    "/queue",
    "/runners",
    "/health",
    "/audit",
    "/logout",
    "/auth",
)


def _back_to(request: web.Request) -> str:
    """Where to come back to after signing in: the page itself for a GET; for a form posted while
    signed out, the page the form sat on (a form's own path answers only POST)."""
    if request.method == "GET":
        return request.path_qs
    referer = urlsplit(request.headers.get("Referer", ""))
    if referer.netloc == request.host and referer.path.startswith("/") and not referer.path.startswith("//"):
        return referer.path + (f"?{referer.query}" if referer.query else "")
    return "/pools"


@web.middleware
async def page_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A page that needs sign-in sends the browser to /login; a refusal, a missing thing or a conflict is
    a page that says why."""
    try:
        return await handler(request)
    except SignInRequired:
        # Answered, not raised: the session cookie is written (a sign-in that just ended says why).
        return redirect(f"/login?next={quote(_back_to(request), safe='/?=&')}")
    except SignInRefused as refused:
        context = {"login": refused.login, "reason": refused.reason, "who_may": refused.who_may}
        return await render(request, "signin_refused.html", context, 403)
    except Forbidden as refused:
        return await render(request, "error.html", {"title": "Not allowed", "message": str(refused)}, 403)
    except NotFoundError as missing:
        return await render(request, "error.html", {"title": "Not found", "message": str(missing)}, 404)
    except (StaleError, ConflictError) as conflict:
        message = f"{conflict} Reload the page to see the current state and try again."
        return await render(request, "error.html", {"title": "Changed meanwhile", "message": message}, 409)
    except ApiError as error:
        if not request.path.startswith(_PAGE_PREFIXES):
            raise
        title = {404: "Not found", 403: "Not allowed"}.get(error.status, "Cannot do that")
        return await render(request, "error.html", {"title": title, "message": error.message}, error.status)
