"""GitHub's rate limits, enforced per installation when asked (``GitHubStandIn(enforce_limits=True)``).

The primary limit: so many requests an hour (5,000 for an installation), announced in ``x-ratelimit-*``
headers on every answer to an installation token; when spent, 403 ``API rate limit exceeded`` with
``x-ratelimit-remaining: 0`` until the window resets. A 304 (a conditional request that found nothing
changed) costs nothing. The secondary limits: more than 80 content-creating requests (POST, PATCH, PUT,
DELETE; minting or revoking an installation token makes no content) in a minute, or more than 100
requests at once, are refused with 403 and, when configured,
``Retry-After``. What was refused is kept in :attr:`RateLimits.limited`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from kerrigan.testing.github.auth import installation_of
from kerrigan.testing.github.errors import GitHubError

if TYPE_CHECKING:
    from kerrigan.testing.github.server import GitHubStandIn

CONTENT_CREATING: Final = frozenset({"POST", "PATCH", "PUT", "DELETE"})
LIMITS_DOCUMENTATION: Final = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
SECONDARY_MESSAGE: Final = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach "
    "out to GitHub Support for help, please include the request ID 0000:0000:0000:0000:0000."
)
PRIMARY: Final = "primary"
SECONDARY_CONTENT: Final = "secondary: content-creating requests a minute"
SECONDARY_CONCURRENCY: Final = "secondary: concurrent requests"


@dataclass(frozen=True)
class LimitedRequest:
    """A request refused for a rate limit: which limit, and what was asked."""

    kind: str
    installation: int
    method: str
    path: str


@dataclass
class _Window:
    reset: float  # when the hour ends (epoch seconds)
    used: int = 0


@dataclass
class RateLimits:
    """The limits and what each installation has used of them."""

    enabled: bool = False
    primary_limit: int = 5_000
    window_s: float = 3_600.0
    content_per_minute: int = 80
    content_window_s: float = 60.0  # the content limit's minute (shorter for a soak that compresses time)
    concurrent_limit: int = 100
    secondary_retry_after: int | None = 60  # None: GitHub says nothing, the client waits at least a minute
    clock: Callable[[], float] = time.time
    limited: list[LimitedRequest] = field(default_factory=list)
    _windows: dict[int, _Window] = field(default_factory=dict)
    _content: dict[int, deque[float]] = field(default_factory=dict)
    _in_flight: dict[int, int] = field(default_factory=dict)

    def window(self, installation: int) -> _Window:
        """The installation's current hour (a new one once the last has reset)."""
        now = self.clock()
        found = self._windows.get(installation)
        if found is None or found.reset <= now:
            found = self._windows[installation] = _Window(reset=float(int(now + self.window_s)))
        return found

    def headers(self, installation: int) -> dict[str, str]:
        """The ``x-ratelimit-*`` headers of an answer to the installation."""
        window = self.window(installation)
        return {
            "x-ratelimit-limit": str(self.primary_limit),
            "x-ratelimit-remaining": str(max(0, self.primary_limit - window.used)),
            "x-ratelimit-used": str(window.used),
            "x-ratelimit-reset": str(int(window.reset)),
            "x-ratelimit-resource": "core",
        }

    def admit(self, installation: int, method: str, path: str) -> None:
        """Let the request in or raise GitHub's 403; an admitted request is then :meth:`settle`-d."""
        now = self.clock()
        if self.window(installation).used >= self.primary_limit:
            self.limited.append(LimitedRequest(PRIMARY, installation, method, path))
            raise GitHubError(
                403,
                f"API rate limit exceeded for installation ID {installation}.",
                self.headers(installation),
            )
        if self._in_flight.get(installation, 0) >= self.concurrent_limit:
            self._refuse_secondary(SECONDARY_CONCURRENCY, installation, method, path)
        if method in CONTENT_CREATING and path != "/installation/token":
            recent = self._content.setdefault(installation, deque())
            while recent and recent[0] <= now - self.content_window_s:
                recent.popleft()
            if len(recent) >= self.content_per_minute:
                self._refuse_secondary(SECONDARY_CONTENT, installation, method, path)
            recent.append(now)
        self._in_flight[installation] = self._in_flight.get(installation, 0) + 1

    def _refuse_secondary(self, kind: str, installation: int, method: str, path: str) -> None:
        self.limited.append(LimitedRequest(kind, installation, method, path))
        headers = self.headers(installation)
        if self.secondary_retry_after is not None:
            headers["Retry-After"] = str(self.secondary_retry_after)
        raise GitHubError(403, SECONDARY_MESSAGE, headers)

    def in_flight(self, installation: int) -> int:
        """How many of the installation's requests are being handled now."""
        return self._in_flight.get(installation, 0)

    def settle(self, installation: int, status: int) -> None:
        """The admitted request was answered ``status``: count it (a 304 costs nothing)."""
        self._in_flight[installation] -= 1
        if status != 304:
            self.window(installation).used += 1

    def rate(self, installation: int | None) -> dict[str, int]:
        """A ``rate-limit`` object: the installation's use of the primary limit."""
        if installation is None or not self.enabled:
            reset = int(self.clock() + self.window_s)
            return {"limit": self.primary_limit, "remaining": self.primary_limit, "used": 0, "reset": reset}
        window = self.window(installation)
        remaining = max(0, self.primary_limit - window.used)
        return {
            "limit": self.primary_limit,
            "remaining": remaining,
            "used": window.used,
            "reset": int(window.reset),
        }


async def rate_limit(github: GitHubStandIn, request: web.Request) -> web.Response:
    """``GET /rate_limit``: what is left (asking costs nothing, as on GitHub)."""
    core = github.limits.rate(installation_of(github, request))
    unused = {"limit": 30, "remaining": 30, "used": 0, "reset": core["reset"]}
    body: dict[str, Any] = {"resources": {"core": core, "search": unused}, "rate": core}
    headers = {key: str(value) for key, value in (("x-ratelimit-" + name, core[name]) for name in core)}
    return web.json_response(body, headers=headers)


def add_routes(router: web.UrlDispatcher, github: GitHubStandIn) -> None:
    """``/rate_limit``."""
    router.add_get("/rate_limit", partial(rate_limit, github))
