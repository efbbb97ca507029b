"""The runner's requests to GitHub: the headers each one carries, and sending again as GitHub's rules say.

Every request names the API version and the agent (``User-Agent: kerrigan-runner/<version>``). A request
GitHub did not answer (a dropped connection, a timeout), or answered with a server error or a rate limit,
is sent again after the wait :func:`kerrigan.core.github_retry.retry_after` gives, within a total budget;
any other answer is GitHub's final word and is raised at once.

A job's token is revoked when the job ends (:func:`revoke_token`). Redirects are followed by aiohttp,
which drops ``Authorization`` (and cookies) when the redirect leads to another origin
(``codeload.github.com`` for a tarball), so a job's token only ever goes to the API.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

import aiohttp

import kerrigan
from kerrigan.core.github_retry import BACKOFF_BASE_S, retry_after

log = logging.getLogger(__name__)

API_VERSION: Final = "2022-11-28"
USER_AGENT: Final = f"kerrigan-runner/{kerrigan.__version__}"
NO_ANSWER: Final = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, TimeoutError)
TOKEN_GONE: Final = frozenset({204, 401})  # revoked now; already revoked or expired
REVOKE_TIMEOUT: Final = aiohttp.ClientTimeout(total=30)

T = TypeVar("T")


def github_headers(token: str | None = None) -> dict[str, str]:
    """What every request to GitHub carries; with ``token``, the job's installation token too."""
    headers = {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "User-Agent": USER_AGENT,
    }
    if token:
        headers["Authorization"] = f"token {token}"
    return headers


@dataclass(frozen=True, slots=True)
class RetryBudget:
    """How long a failed request keeps being sent again (``total_s`` from its first try), and the first
    step of the backoff after a server error or a lost answer (doubling each time)."""

    total_s: float
    base_s: float = BACKOFF_BASE_S

    def __post_init__(self) -> None:
        if self.total_s < 0 or self.base_s <= 0:
            raise ValueError("a retry budget is at least 0 s, with a backoff step above 0 s")


class GitHubRequestError(Exception):
    """GitHub did not give the answer hoped for: ``status`` (``None`` when no answer came), the answer's
    headers and its ``message``."""

    def __init__(self, status: int | None, headers: Mapping[str, str], message: str) -> None:
        answer = "no answer" if status is None else str(status)
        super().__init__(f"{answer}: {message}" if message else answer)
        self.status, self.headers, self.message = status, dict(headers), message


def describe(err: BaseException) -> str:
    """An aiohttp error in words, without the URL it carries (a redirect's URL may hold a signed key)."""
    if isinstance(err, aiohttp.ClientResponseError):
        return f"{type(err).__name__}: {err.status} {err.message}"
    return str(err) or type(err).__name__


async def failure(response: aiohttp.ClientResponse) -> GitHubRequestError:
    """The failure an unwanted answer stands for, naming the host that gave it when a redirect led
    elsewhere (its origin only: a codeload URL carries a key)."""
    text = await response.text(errors="replace")
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    message = str(body.get("message", "")) if isinstance(body, dict) else text.strip()[:200]
    if response.history and response.url.origin() != response.history[0].url.origin():
        message = f"{message} (from {response.url.origin()}, after a redirect)".lstrip()
    return GitHubRequestError(response.status, response.headers, message)


@contextlib.asynccontextmanager
async def github_request(
    http: aiohttp.ClientSession, method: str, url: str, token: str | None, timeout: aiohttp.ClientTimeout
) -> AsyncIterator[aiohttp.ClientResponse]:
    """One request, redirects followed; a lost answer (also while its body is read inside the block)
    raises :class:`GitHubRequestError` with no status."""
    try:
        async with http.request(method, url, headers=github_headers(token), timeout=timeout) as response:
            yield response
    except NO_ANSWER as err:
        raise GitHubRequestError(None, {}, describe(err)) from err


async def with_retries(
    send: Callable[[], Awaitable[T]],
    budget: RetryBudget,
    what: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """``send()`` until it returns, waiting between tries as GitHub's rules say; a :class:`GitHubRequestError`
    GitHub will not change, or one whose wait would overrun the budget, is raised."""
    started, failures = clock(), 0
    while True:
        try:
            return await send()
        except GitHubRequestError as err:
            failures += 1
            retry = retry_after(
                err.status,
                err.headers,
                err.message,
                failures,
                time.time(),
                base_s=budget.base_s,
                jitter=random.random(),  # noqa: S311 -- spreading retries, not a secret
            )
            if retry is None:
                raise
            spent = clock() - started
            if spent + retry.delay_s > budget.total_s:
                if failures == 1:
                    raise
                raise GitHubRequestError(
                    err.status,
                    err.headers,
                    f"{err.message} (gave up after {failures} tries in {spent:.0f} s)",
                ) from err
            log.warning("%s: %s (%s); sending again in %.1f s", what, err, retry.reason, retry.delay_s)
            await sleep(retry.delay_s)


async def revoke_token(http: aiohttp.ClientSession, api_url: str, token: str, budget: RetryBudget) -> bool:
    """``DELETE /installation/token`` with the token itself: whether it is gone (204: revoked now; 401:
    revoked or expired already). Passing failures are sent again within ``budget``; what is logged never
    holds the token."""
    url = f"{api_url.rstrip('/')}/installation/token"

    async def once() -> None:
        async with github_request(http, "DELETE", url, token, REVOKE_TIMEOUT) as response:
            if response.status not in TOKEN_GONE:
                raise await failure(response)

    try:
        await with_retries(once, budget, f"DELETE {url}")
    except GitHubRequestError as err:
        log.warning("DELETE %s: the token is not revoked (it expires on its own): %s", url, err)
        return False
    except aiohttp.ClientError as err:
        log.warning("DELETE %s: the token is not revoked (it expires on its own): %s", url, describe(err))
        return False
    return True
