"""Talking to GitHub: gidgethub over aiohttp, app JWTs, cached installation tokens, and retries.

GitHub asks clients to retry server errors, ``429`` and secondary rate limits after the time it names
(``Retry-After`` or ``x-ratelimit-reset``), and to back off otherwise; :func:`retry_delay` decides, and
:class:`GitHubClient` waits and retries through gidgethub's own hook.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, Final

import aiohttp
import jwt
from cachetools import TLRUCache
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from gidgethub import HTTPException
from gidgethub.aiohttp import GitHubAPI

log = logging.getLogger(__name__)

USER_AGENT: Final = "kerrigan"
JWT_BACKDATE_S: Final = 60  # GitHub's clock and ours may differ: issue the JWT a minute in the past
JWT_LIFETIME_S: Final = 9 * 60  # GitHub refuses app JWTs that expire more than 10 minutes ahead
TOKEN_REFRESH_MARGIN_S: Final = 5 * 60
RETRYABLE_SERVER_ERRORS: Final = frozenset({500, 502, 503, 504})


def load_private_key(pem: str) -> PrivateKeyTypes:
    """Parse the App's PEM key once: parsing checks the RSA key and takes a tenth of a second."""
    return serialization.load_pem_private_key(pem.encode(), password=None)


def app_jwt(app_id: str, private_key: str | PrivateKeyTypes, now: float) -> str:
    """The GitHub App's JWT (RS256), valid from a minute ago for nine minutes from now."""
    payload = {"iat": int(now) - JWT_BACKDATE_S, "exp": int(now) + JWT_LIFETIME_S, "iss": app_id}
    return jwt.encode(payload, private_key, algorithm="RS256")  # type: ignore[arg-type]


def retry_delay(
    status: int, headers: Mapping[str, str], attempt: int, now: float, *, base_s: float = 0.5
) -> float | None:
    """Seconds to wait before retrying a failed request, or ``None`` when it must not be retried."""
    retry_after = headers.get("retry-after")
    retryable = status in RETRYABLE_SERVER_ERRORS or status in (403, 429)
    if retry_after is not None and retry_after.strip().isdigit() and retryable:
        return float(retry_after)
    reset = headers.get("x-ratelimit-reset")
    limited = headers.get("x-ratelimit-remaining") == "0"
    if status in (403, 429) and limited and reset is not None and reset.strip().isdigit():
        return max(0.0, float(reset) - now) + 1.0
    backoff: float = base_s * 2 ** (attempt - 1)
    if status in RETRYABLE_SERVER_ERRORS or status == 429:
        return backoff
    return None


class GitHubClient(GitHubAPI):
    """gidgethub's aiohttp client that retries what GitHub says to retry, a bounded number of times."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        max_attempts: int = 5,
        max_wait_s: float = 60.0,
        sleeper: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(session, USER_AGENT, base_url=base_url)
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s
        self._sleeper = sleeper
        self._clock = clock

    async def sleep(self, seconds: float) -> None:
        """Wait (a fake clock's sleeper in tests)."""
        await self._sleeper(seconds)

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: HTTPException, attempt: int
    ) -> bool:
        """Retry server errors, 429 and rate limits after the time GitHub names, with backoff."""
        if attempt >= self.max_attempts:
            return False
        headers = {key.lower(): value for key, value in (exception.headers or {}).items()}
        delay = retry_delay(int(exception.status_code), headers, attempt, self._clock())
        if delay is None or delay > self.max_wait_s:
            return False
        log.warning(
            "github %s %s answered %s; retry %d in %.1f s",
            method,
            url,
            int(exception.status_code),
            attempt,
            delay,
        )
        await self.sleep(delay)
        return True


class InstallationTokens:
    """Installation access tokens, cached until five minutes before GitHub says they expire."""

    def __init__(
        self,
        client: GitHubClient,
        app_id: str,
        private_key: str,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._app_id = app_id
        self._private_key = load_private_key(private_key)
        self._clock = clock
        self._cache: TLRUCache[int, tuple[str, float]] = TLRUCache(
            maxsize=4096, ttu=lambda _key, value, _now: value[1] - TOKEN_REFRESH_MARGIN_S, timer=clock
        )

    def app_jwt(self) -> str:
        """A fresh app JWT."""
        return app_jwt(self._app_id, self._private_key, self._clock())

    async def token(self, installation_id: int) -> str:
        """A token for the installation, from the cache while it has five minutes left."""
        cached = self._cache.get(installation_id)
        if cached is not None:
            return cached[0]
        data = await self._client.post(
            "/app/installations/{installation_id}/access_tokens",
            {"installation_id": installation_id},
            data={},
            jwt=self.app_jwt(),
        )
        expires = datetime.fromisoformat(str(data["expires_at"]).replace("Z", "+00:00")).timestamp()
        self._cache[installation_id] = (str(data["token"]), expires)
        return str(data["token"])

    async def scoped_token(
        self, installation_id: int, repository: str, permissions: Mapping[str, str]
    ) -> dict[str, Any]:
        """A short-lived token limited to one repository and the given permissions (never cached)."""
        data: dict[str, Any] = await self._client.post(
            "/app/installations/{installation_id}/access_tokens",
            {"installation_id": installation_id},
            data={"repositories": [repository.split("/", 1)[1]], "permissions": dict(permissions)},
            jwt=self.app_jwt(),
        )
        return data

    def forget(self, installation_id: int) -> None:
        """Drop a cached token (after GitHub refused it)."""
        self._cache.pop(installation_id, None)
