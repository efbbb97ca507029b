"""Who opens a WebSocket of the API: a client with an API token (``kerrigan console``), or a browser signed
in to this site's pages (the device page's console).

The browser's session cookie counts only when the WebSocket was opened by a page of this site, as its
``Origin`` header says: a WebSocket is not bound by the same-origin policy, and a page of another site could
otherwise open one with the person's cookie (cross-site WebSocket hijacking). A browser always sends
``Origin`` on a WebSocket; a request without one that carries only a cookie is refused.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from aiohttp import web

from kerrigan.core.roles import Principal
from kerrigan.web.auth import signed_in
from kerrigan.web.errors import ApiError
from kerrigan.web.signin import COOKIE_KEY, COOKIE_NAME, page_principal
from kerrigan.web.state import SETTINGS


def own_origins(request: web.Request) -> frozenset[str]:
    """The origins of this site's pages: its public URL's, and the one the request was sent to."""
    public = urlsplit(request.config_dict[SETTINGS].public_url)
    origins = {f"{request.scheme}://{request.host}".lower()}
    if public.scheme and public.netloc:
        origins.add(f"{public.scheme}://{public.netloc}".lower())
    return frozenset(origins)


async def socket_principal(request: web.Request) -> Principal:
    """The person opening the WebSocket: by API token when one is sent (or no session cookie is), else by
    the browser's sign-in, from a page of this site only (401 signed out, 403 from another site)."""
    if (
        "Authorization" in request.headers
        or COOKIE_NAME not in request.cookies
        or COOKIE_KEY not in request.config_dict  # no pages on this server: no browser sign-ins either
    ):
        return await signed_in(request)
    origin = request.headers.get("Origin", "")
    if origin.lower() not in own_origins(request):
        shown = repr(origin[:100]) if origin else "none"
        raise ApiError(
            403,
            "forbidden",
            f"a signed-in browser opens this WebSocket from this site's pages only (Origin: {shown}); "
            "other clients send an API token as 'Authorization: Bearer <token>'",
        )
    principal = await page_principal(request)
    if principal is None:
        raise ApiError(
            401,
            "unauthenticated",
            "sign in (the browser's sign-in has ended), "
            "or send an API token as 'Authorization: Bearer <token>'",
        )
    return principal
