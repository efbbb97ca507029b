"""The local server of ``kerrigan setup``, on 127.0.0.1: the page whose form posts the manifest to GitHub,
and the manifest's ``redirect_url``, where GitHub sends the browser back with the one-time code.

Other processes on the machine reach 127.0.0.1 too, and so does a web page whose name an attacker points at
127.0.0.1 (DNS rebinding). So every request must name this server as its ``Host``; the page, which shows
the ``state`` GitHub's answer must carry, opens only with the token of the address the command printed,
once: the browser that opened it gets a cookie for reloads, anyone later is refused. GitHub's answer is
taken only with that state, and only once.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import jinja2
from aiohttp import web

CALLBACK_PATH: Final = "/setup/callback"
_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost")
# The page is not kept by caches, framed by other pages, or named in a Referer to GitHub.
_PRIVATE: Final = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
_TEMPLATES: Final = Path(__file__).resolve().parents[2] / "web" / "templates"


class SetupError(Exception):
    """The flow cannot finish (GitHub refused the code, say); the message is one line."""


@dataclass(frozen=True)
class Done:
    """What the done page shows."""

    app_name: str
    install_url: str
    out: str
    key: str


def listen(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1 (any free port for 0); OSError when the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(16)
    except OSError:
        sock.close()
        raise
    return sock


class SetupServer:
    """Serves the start page until GitHub's answer comes back with the right ``state``; then ``complete``
    turns the code into written settings, and :attr:`result` holds what happened. Requests naming another
    host, the page without its token (or with it a second time, from another browser) and answers without
    the state are refused (and ``refused`` told why), and the flow waits on."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        action: str,
        manifest: dict[str, Any],
        state: str,
        out: str,
        complete: Callable[[str], Awaitable[Done]],
        refused: Callable[[str], object],
    ) -> None:
        self._sock = sock
        self._action = action
        self._manifest = manifest
        self._state = state
        self._out = out
        self._complete = complete
        self._busy = False
        self._runner: web.AppRunner | None = None
        port = sock.getsockname()[1]
        self._hosts = frozenset(f"{name}:{port}" for name in _LOOPBACK_NAMES) | (
            frozenset(_LOOPBACK_NAMES) if port == 80 else frozenset()  # HTTP's own port: no port in Host
        )
        self._token = secrets.token_urlsafe(24)
        self._token_used = False
        # Cookies are not kept apart by port: the name carries it, so two setups do not meet.
        self._cookie_name = f"kerrigan_setup_{port}"
        self._cookie = secrets.token_urlsafe(24)
        self.result: asyncio.Future[Done] = asyncio.get_running_loop().create_future()
        self._refused = refused  # told what was turned away and why (the flow waits on for the right one)
        self._templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined
        )

    @property
    def url(self) -> str:
        """The start page, with its token."""
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/?token={self._token}"

    async def start(self) -> None:
        """Serve on the socket."""
        app = web.Application(middlewares=[self._this_host_only])
        app.router.add_get("/", self._page, allow_head=False)
        app.router.add_get(CALLBACK_PATH, self._callback, allow_head=False)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
        await self._runner.setup()
        await web.SockSite(self._runner, self._sock).start()

    async def close(self) -> None:
        """Stop serving (after the last answer has gone out)."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _render(self, status: int, title: str, mode: str, **context: object) -> web.Response:
        text = self._templates.get_template("setup.html").render(title=title, mode=mode, **context)
        return web.Response(status=status, text=text, content_type="text/html", headers=_PRIVATE)

    @web.middleware
    async def _this_host_only(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        # A browser names the host it thinks it talks to: a rebound name is not 127.0.0.1 or localhost.
        if request.host.lower() not in self._hosts:
            return self._refuse(
                403,
                f"A request for the host {request.host[:80]!r} reached this setup's port.",
                asked="a request",
            )
        return await handler(request)

    def _page_refusal(self, request: web.Request) -> web.Response | None:
        """Why this request may not see the page (which shows the state), or None when it may."""
        cookie = request.cookies.get(self._cookie_name, "")
        if cookie and hmac.compare_digest(cookie.encode(), self._cookie.encode()):
            return None  # the browser that opened the page, reloading it
        token = request.query.get("token", "")
        if not (token and hmac.compare_digest(token.encode(), self._token.encode())):
            return self._refuse(
                403, "This page opens only at the address kerrigan setup printed.", asked="the page"
            )
        if self._token_used:
            return self._refuse(
                403,
                "This setup's page was already opened by another browser or program. If that was not "
                "you, stop kerrigan setup (Ctrl-C) and run it again.",
                asked="the page",
            )
        self._token_used = True
        return None

    async def _page(self, request: web.Request) -> web.Response:
        refusal = self._page_refusal(request)
        if refusal is not None:
            return refusal
        page = self._render(
            200,
            "Register Kerrigan's GitHub App",
            "start",
            action=self._action,
            manifest=json.dumps(self._manifest, separators=(",", ":")),
            webhook_url=self._manifest["hook_attributes"]["url"],
            github_host=urlsplit(self._action).netloc,
            out=self._out,
        )
        page.set_cookie(self._cookie_name, self._cookie, path="/", httponly=True, samesite="Strict")
        return page

    def _refuse(self, status: int, message: str, *, asked: str = "an answer") -> web.Response:
        self._refused(f"{asked}: {message}")
        title = "Not this setup's answer" if asked == "an answer" else "Refused by kerrigan setup"
        return self._render(status, title, "refused", message=message)

    async def _callback(self, request: web.Request) -> web.Response:
        state, code = request.query.get("state", ""), request.query.get("code", "")
        # Only GitHub's answer to this page's form carries the state; anything else is someone else's.
        if not hmac.compare_digest(state.encode(), self._state.encode()):
            return self._refuse(403, "This answer does not carry this setup's state: it was refused.")
        if not code:
            return self._refuse(400, "GitHub's answer has no code.")
        if self._busy or self.result.done():
            return self._refuse(409, "This setup has already had GitHub's answer.")
        self._busy = True
        try:
            done = await self._complete(code)
        except SetupError as exc:
            self.result.set_exception(exc)
            return self._render(502, "The App's settings were not written", "failed", message=str(exc))
        except Exception as exc:  # the command must end, not wait for an answer that has come and gone
            failed = SetupError(f"converting GitHub's code failed unexpectedly: {exc!r}")
            self.result.set_exception(failed)
            return self._render(500, "The App's settings were not written", "failed", message=str(failed))
        self.result.set_result(done)
        return self._render(
            200,
            "Kerrigan's GitHub App is registered",
            "done",
            app_name=done.app_name,
            install_url=done.install_url,
            out=done.out,
            key=done.key,
        )
