"""Headers every answer carries, whoever made it: pages, the API, static files, errors, 404s, the runner
protocol and webhooks.

``X-Content-Type-Options: nosniff`` keeps a browser from reading a JSON answer or a job's output as HTML or
script; ``Referrer-Policy: same-origin`` keeps this site's URLs (session ids, pool names, filters) out of
the ``Referer`` sent to other sites, while this site's own forms still see where they were posted from.
"""

from __future__ import annotations

from typing import Final

from aiohttp import web

SECURITY_HEADERS: Final = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


async def add_security_headers(request: web.Request, response: web.StreamResponse) -> None:
    """Put :data:`SECURITY_HEADERS` on ``response`` just before it is sent."""
    for name, value in SECURITY_HEADERS.items():
        response.headers[name] = value


def install_security_headers(app: web.Application) -> None:
    """Add the headers to every answer of ``app`` and of its sub-applications (a signal, not a middleware,
    so that answers no handler made, such as a 404 or a static file, carry them too)."""
    app.on_response_prepare.append(add_security_headers)
