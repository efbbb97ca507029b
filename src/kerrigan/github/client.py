"""Talking to GitHub: gidgethub over aiohttp, app JWTs, cached installation tokens, budgets and retries.

Every request carries the headers GitHub asks for (``Accept: application/vnd.github+json`` unless the call
asks another media type, ``X-GitHub-Api-Version`` and a ``User-Agent`` naming the App). Each request is
paced by the installation's :class:`~kerrigan.github.budget.Budget`: ``manage_rate_limit`` waits until the
budget lets it go, and every answer is shown to the budget. Which installation a request is for is set by
:func:`acting_for` (``Repository`` does it for each of its calls); token mints count for the App itself.

A failed request is sent again only when that cannot do anything twice: reads, ``PUT``, ``DELETE``, the
``PATCH`` of a check run and the mint of an installation token are retried after server errors, ``429``,
secondary limits, dropped connections and timeouts (GitHub's rules: :mod:`kerrigan.core.github_retry`). A
``POST`` that creates something (a check run, a comment, a reaction) is retried only when GitHub refused it
(a rate limit); when its outcome is unknown (no answer, or a 5xx) the failure is raised, so that the caller
can look before it creates again. :func:`answer_of` reads any failure the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import jwt
from cachetools import LRUCache, TLRUCache
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from gidgethub import GitHubException, HTTPException, sansio
from gidgethub.aiohttp import GitHubAPI

from kerrigan import __version__
from kerrigan.core.github_operations import operation
from kerrigan.core.github_retry import backoff, outcome_unknown, retry_after
from kerrigan.github.budget import APP, Budget, creating
from kerrigan.metrics import GITHUB_RATE_LIMIT, GITHUB_RATE_REMAINING, GITHUB_RATE_RESET, GITHUB_REQUESTS

log = logging.getLogger(__name__)

MEDIA_TYPE: Final = "application/vnd.github+json"
API_VERSION: Final = "2022-11-28"
GIDGETHUB_ACCEPT: Final = sansio.accept_format()  # what gidgethub sends unless a call names a media type
JWT_BACKDATE_S: Final = 60  # GitHub's clock and ours may differ: issue the JWT a minute in the past
JWT_LIFETIME_S: Final = 9 * 60  # GitHub refuses app JWTs that expire more than 10 minutes ahead
TOKEN_REFRESH_MARGIN_S: Final = 5 * 60
CONDITIONAL_ENTRIES: Final = 2048  # answers kept with their ETag, to ask again with If-None-Match
BLOB_CACHE_CHARS: Final = 32 * 1024 * 1024  # manifest texts kept by blob SHA
_CHECK_RUN: Final = re.compile(r"/repos/[^/]+/[^/]+/check-runs/\d+$")
_TOKEN_MINT: Final = re.compile(r"/app/installations/\d+/access_tokens$")
_REPEATABLE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


def user_agent(app_id: str | None) -> str:
    """The ``User-Agent`` of Kerrigan's requests: ``kerrigan/0.1.0 (GitHub App 4242)``."""
    name = f"kerrigan/{__version__}"
    return f"{name} (GitHub App {app_id})" if app_id else name


def load_private_key(pem: str) -> PrivateKeyTypes:
    """Parse the App's PEM key once: parsing checks the RSA key and takes a tenth of a second."""
    return serialization.load_pem_private_key(pem.encode(), password=None)


def app_jwt(app_id: str, private_key: str | PrivateKeyTypes, now: float) -> str:
    """The GitHub App's JWT (RS256), valid from a minute ago for nine minutes from now."""
    payload = {"iat": int(now) - JWT_BACKDATE_S, "exp": int(now) + JWT_LIFETIME_S, "iss": app_id}
    return jwt.encode(payload, private_key, algorithm="RS256")  # type: ignore[arg-type]


def repeatable(method: str, url: str) -> bool:
    """Whether sending the request twice does no more than sending it once (so it may be retried even
    when the first one's outcome is unknown)."""
    method = method.upper()
    path = urlsplit(url).path
    if method in _REPEATABLE_METHODS:
        return True
    if method == "PATCH":
        return _CHECK_RUN.search(path) is not None  # the same fields again leave the same check run
    if method == "POST":
        return _TOKEN_MINT.search(path) is not None  # a second token does no harm
    return False


# -- reading failures -------------------------------------------------------------------------------------


def _show_allowance(installation_id: int, headers: Mapping[str, str]) -> None:
    """Set the rate gauges from an answer's ``x-ratelimit-*`` headers (of the core allowance only)."""
    lowered = {key.lower(): value for key, value in headers.items()}
    if lowered.get("x-ratelimit-resource", "core").strip() != "core":
        return
    account = "app" if installation_id == APP else str(installation_id)
    for header, gauge in (
        ("x-ratelimit-remaining", GITHUB_RATE_REMAINING),
        ("x-ratelimit-limit", GITHUB_RATE_LIMIT),
        ("x-ratelimit-reset", GITHUB_RATE_RESET),
    ):
        value = lowered.get(header, "").strip()
        if value.isascii() and value.isdigit() and len(value) < 12:
            gauge.labels(account).set(int(value))


@dataclass(frozen=True, slots=True)
class GitHubAnswer:
    """What GitHub answered to a failed request: ``status`` is ``None`` when no answer came (the
    connection dropped or the request timed out); ``headers`` have lower-case names; ``message`` is the
    body's ``message`` (or what went wrong with the connection); ``body`` the decoded body, when known."""

    status: int | None
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = ""
    body: Any = None

    @property
    def outcome_unknown(self) -> bool:
        """Whether GitHub may have done what was asked although it did not say so (look before redoing)."""
        return outcome_unknown(self.status)


class GitHubUnreachable(GitHubException):
    """No answer from GitHub: the connection failed or dropped, or the request timed out."""

    def __init__(self, method: str, url: str, cause: BaseException) -> None:
        reason = str(cause) or type(cause).__name__
        super().__init__(f"{method} {url}: no answer from GitHub ({reason})")
        self.method = method
        self.url = url
        self.answer = GitHubAnswer(None, {}, reason)


_ANSWER_ATTRIBUTE: Final = "kerrigan_answer"
_LAST_ANSWER: ContextVar[GitHubAnswer | None] = ContextVar("kerrigan_github_last_answer", default=None)


def answer_of(exc: BaseException) -> GitHubAnswer | None:
    """What GitHub answered, for a failure of a request to GitHub; ``None`` for any other exception."""
    if isinstance(exc, GitHubUnreachable):
        return exc.answer
    if isinstance(exc, HTTPException):
        recorded = getattr(exc, _ANSWER_ATTRIBUTE, None)
        if isinstance(recorded, GitHubAnswer):
            return recorded
        headers = {key.lower(): value for key, value in (exc.headers or {}).items()}
        message = str(exc.args[0]) if exc.args else ""
        return GitHubAnswer(int(exc.status_code), headers, message)
    if isinstance(exc, aiohttp.ClientError | TimeoutError):
        return GitHubAnswer(None, {}, str(exc) or type(exc).__name__)
    return None


def _decoded(headers: Mapping[str, str], data: bytes) -> tuple[Any, str]:
    """A failed answer's body and its ``message``."""
    text = data.decode("utf-8", errors="replace")
    if "json" not in headers.get("content-type", ""):
        return text, text[:200]
    try:
        body: Any = json.loads(text)
    except ValueError:
        return text, text[:200]
    message = body.get("message") if isinstance(body, dict) else None
    return body, str(message or "")


# -- which installation a request is for ----------------------------------------------------------------


@dataclass(slots=True)
class _Ticket:
    used: bool = False


@dataclass(frozen=True, slots=True)
class _Call:
    installation_id: int | None = None  # None: not budgeted (no installation known)
    essential: bool = False
    paid: _Ticket | None = None


_NOBODY: Final = _Call()  # frozen: safe to share as the default
_CALL: ContextVar[_Call] = ContextVar("kerrigan_github_call", default=_NOBODY)


@contextlib.contextmanager
def acting_for(installation_id: int, *, essential: bool = False) -> Iterator[None]:
    """Requests in this block are the installation's (:data:`~kerrigan.github.budget.APP`: the App's):
    they are counted against its budget, and wait for it unless ``essential`` lets them use the reserve."""
    outer = _CALL.get()
    token = _CALL.set(replace(outer, installation_id=installation_id, essential=essential or outer.essential))
    try:
        yield
    finally:
        _CALL.reset(token)


@contextlib.contextmanager
def paid_for() -> Iterator[None]:
    """The caller asked :meth:`Budget.wait_s` and called :meth:`Budget.spend` for the next request: the
    client sends the first request of this block without waiting or counting it again, and retries none of
    the block's requests (the caller owns their pacing); answers are still shown to the budget."""
    token = _CALL.set(replace(_CALL.get(), paid=_Ticket()))
    try:
        yield
    finally:
        _CALL.reset(token)


# -- caches ---------------------------------------------------------------------------------------------

CacheEntry = tuple[str | None, str | None, Any, str | None]  # gidgethub's: etag, last-modified, data, next


class ConditionalCache(MutableMapping[str, CacheEntry]):
    """gidgethub's cache of answers by URL, bounded, so reads are asked again with ``If-None-Match`` (a
    ``304`` costs nothing of the hourly allowance).

    A file's contents are not kept here: they are kept by blob SHA instead, and the raw media type asks for
    them at the same URL, where a cached JSON answer would be taken for the raw one.
    """

    def __init__(self, maxsize: int = CONDITIONAL_ENTRIES) -> None:
        self._entries: LRUCache[str, CacheEntry] = LRUCache(maxsize=maxsize)

    def __getitem__(self, url: str) -> CacheEntry:
        return self._entries[url]

    def __setitem__(self, url: str, entry: CacheEntry) -> None:
        data = entry[2]
        if isinstance(data, str | bytes) or (isinstance(data, dict) and data.get("type") == "file"):
            return
        self._entries[url] = entry

    def __delitem__(self, url: str) -> None:
        del self._entries[url]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


# -- the client -----------------------------------------------------------------------------------------


class GitHubClient(GitHubAPI):
    """gidgethub's aiohttp client with GitHub's headers, per-installation budgets and safe retries."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        *,
        base_url: str,
        app_id: str | None = None,
        budget: Budget | None = None,
        max_attempts: int = 5,
        max_wait_s: float = 60.0,
        sleeper: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(session, user_agent(app_id), base_url=base_url, cache=ConditionalCache())
        self.budget = budget if budget is not None else Budget()
        # Manifest texts by blob SHA, shared by every Repository of this client (one client a process).
        self.blobs: LRUCache[str, str] = LRUCache(maxsize=BLOB_CACHE_CHARS, getsizeof=len)
        self.max_attempts = max_attempts
        self.max_wait_s = max_wait_s
        self._sleeper = sleeper
        self._clock = clock

    def name_app(self, app_id: str) -> None:
        """Name the App in the ``User-Agent`` (when the client was made without its id)."""
        self.requester = user_agent(app_id)

    async def sleep(self, seconds: float) -> None:
        """Wait (a fake clock's sleeper in tests)."""
        await self._sleeper(seconds)

    async def manage_rate_limit(self, *, method: str, url: str) -> None:
        """Wait until the installation's budget lets the request go, then count it."""
        call = _CALL.get()
        if call.installation_id is None:
            return
        if call.paid is not None and not call.paid.used:
            call.paid.used = True  # the caller asked and spent for this one
            return
        kind = creating(method, url)
        while True:
            now = self._clock()
            wait = self.budget.waiting(call.installation_id, creating=kind, essential=call.essential, now=now)
            if wait.delay_s <= 0:
                break
            log.info("github %s %s waits %.1f s: %s", method, url, wait.delay_s, wait.reason)
            await self.sleep(wait.delay_s)
        self.budget.spend(call.installation_id, creating=kind, now=now)

    async def _request(
        self, method: str, url: str, headers: Mapping[str, str], body: bytes = b""
    ) -> tuple[int, Mapping[str, str], bytes]:
        """Send with GitHub's headers; retry a lost answer when that is safe; show the answer to the
        budget."""
        sent = dict(headers)
        if sent.get("accept") == GIDGETHUB_ACCEPT:
            sent["accept"] = MEDIA_TYPE
        sent["x-github-api-version"] = API_VERSION
        call = _CALL.get()
        attempt = 0
        while True:
            attempt += 1
            try:
                status, answer_headers, data = await super()._request(method, url, sent, body)
            except (aiohttp.ClientError, TimeoutError) as exc:
                GITHUB_REQUESTS.labels(operation(method, url), "0").inc()
                if call.paid is not None or attempt >= self.max_attempts or not repeatable(method, url):
                    raise GitHubUnreachable(method, url, exc) from exc
                delay = backoff(attempt)
                log.warning(
                    "github %s %s: no answer (%r); retry %d in %.1f s", method, url, exc, attempt, delay
                )
                await self.sleep(delay)
                await self.manage_rate_limit(method=method, url=url)
                continue
            answer = None
            if status >= 400:
                decoded, message = _decoded(answer_headers, data)
                lowered = {key.lower(): value for key, value in answer_headers.items()}
                answer = GitHubAnswer(status, lowered, message, decoded)
            _LAST_ANSWER.set(answer)
            GITHUB_REQUESTS.labels(operation(method, url), str(status)).inc()
            if call.installation_id is not None:
                message = answer.message if answer is not None else ""
                self.budget.observe(call.installation_id, status, answer_headers, message, self._clock())
                _show_allowance(call.installation_id, answer_headers)
            return status, answer_headers, data

    async def handle_rate_limit_error(
        self, *, method: str, url: str, exception: HTTPException, attempt: int
    ) -> bool:
        """Retry what GitHub says to retry, when sending it again cannot do anything twice."""
        answer = _LAST_ANSWER.get()
        status = int(exception.status_code)
        if answer is None or answer.status != status:
            answer = answer_of(exception)
        assert answer is not None
        setattr(exception, _ANSWER_ATTRIBUTE, answer)  # gidgethub's exceptions drop the body
        if _CALL.get().paid is not None or attempt >= self.max_attempts:
            return False
        retry = retry_after(status, answer.headers, answer.message, attempt, self._clock())
        if retry is None:
            return False
        if answer.outcome_unknown and not repeatable(method, url):
            log.warning(
                "github %s %s answered %s: not sent again (it may have been done)", method, url, status
            )
            return False
        if retry.delay_s > self.max_wait_s:
            return False
        log.warning("github %s %s: %s; retry %d in %.1f s", method, url, retry.reason, attempt, retry.delay_s)
        await self.sleep(retry.delay_s)
        return True


class InstallationTokens:
    """Installation access tokens, cached until five minutes before GitHub says they expire.

    Minting one is a request of the App itself (its JWT), counted against the App's budget, and essential:
    nothing else goes without a token.
    """

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
        client.name_app(app_id)

    def app_jwt(self) -> str:
        """A fresh app JWT."""
        return app_jwt(self._app_id, self._private_key, self._clock())

    async def _mint(self, installation_id: int, data: dict[str, Any]) -> dict[str, Any]:
        # The App's own request, whatever the caller acts for, and never one a caller paid for.
        token = _CALL.set(_Call(APP, essential=True))
        try:
            answer: dict[str, Any] = await self._client.post(
                "/app/installations/{installation_id}/access_tokens",
                {"installation_id": installation_id},
                data=data,
                jwt=self.app_jwt(),
            )
        finally:
            _CALL.reset(token)
        return answer

    async def token(self, installation_id: int) -> str:
        """A token for the installation, from the cache while it has five minutes left."""
        cached = self._cache.get(installation_id)
        if cached is not None:
            return cached[0]
        data = await self._mint(installation_id, {})
        expires = datetime.fromisoformat(str(data["expires_at"]).replace("Z", "+00:00")).timestamp()
        self._cache[installation_id] = (str(data["token"]), expires)
        return str(data["token"])

    async def scoped_token(
        self, installation_id: int, repository: str, permissions: Mapping[str, str]
    ) -> dict[str, Any]:
        """A short-lived token limited to one repository and the given permissions (never cached)."""
        return await self._mint(
            installation_id,
            {"repositories": [repository.split("/", 1)[1]], "permissions": dict(permissions)},
        )

    def forget(self, installation_id: int) -> None:
        """Drop a cached token (after GitHub refused it)."""
        self._cache.pop(installation_id, None)
