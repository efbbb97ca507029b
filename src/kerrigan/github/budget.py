"""How many requests Kerrigan may still send GitHub, per installation and for the App itself.

GitHub gives each installation (and the App's own JWT requests) an hourly allowance, reported on every
answer as ``x-ratelimit-limit``, ``x-ratelimit-remaining`` and ``x-ratelimit-reset``; it also limits
content-creating requests to 80 a minute, and after a secondary rate limit asks for a pause. A
:class:`Budget` keeps that account from the answers it is shown and says how long a request must wait:

- the allowance keeps a reserve (``max(50, 5 %)`` of the limit): once ``remaining`` falls to it, only
  *essential* requests go (creating a check run, completing one), the rest wait for the reset; at 0 nothing
  goes until the reset;
- at most 80 content-creating requests (POST, PATCH, PUT, DELETE) go in any rolling minute; minting an
  installation token and revoking one create no content (no issue, comment or check run anyone sees), so
  they count in the hourly allowance only: a job's token would otherwise cost two of the 80, and a lab
  finishing more than 40 jobs a minute would wait for the next minute's allowance between jobs;
- after a secondary limit, or any answer with ``Retry-After``, the whole installation pauses for that long.

Nothing here reads the clock or sleeps: every call is given ``now`` (Unix seconds, the clock
``x-ratelimit-reset`` counts in). ``GitHubClient`` asks, waits and reports for the requests it sends;
the check-run reconciler asks :meth:`Budget.wait_s` without waiting, so it can coalesce updates meanwhile.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

from kerrigan.core.github_retry import retry_after

APP: Final = 0  # the account of the App's own (JWT) requests; installation ids start at 1
CREATING_METHODS: Final = frozenset({"POST", "PATCH", "PUT", "DELETE"})
# Minting an installation token, and revoking one: no content is made (see the module's docstring).
TOKEN_REQUESTS: Final = re.compile(r"/app/installations/\d+/access_tokens|/installation/token")
CREATING_PER_MINUTE: Final = 80
CREATING_WINDOW_S: Final = 60.0
RESERVE_MIN: Final = 50
RESERVE_SHARE: Final = 0.05
RESET_MARGIN_S: Final = 1.0  # GitHub's clock and ours may differ by a little: wait a second past the reset


def creating(method: str, path: str = "") -> bool:
    """Whether a request creates or changes content (GitHub's "content-generating"): one with a method
    that writes, unless it mints or revokes an installation token. ``path`` may be a whole URL."""
    if method.upper() not in CREATING_METHODS:
        return False
    return TOKEN_REQUESTS.fullmatch(urlsplit(path).path.rstrip("/")) is None


def reserve(limit: int) -> int:
    """The requests of an hourly allowance kept for essential ones."""
    return max(RESERVE_MIN, math.ceil(limit * RESERVE_SHARE))


@dataclass(frozen=True, slots=True)
class Wait:
    """How long a request must wait (0.0: it may go now) and why."""

    delay_s: float
    reason: str = ""


@dataclass
class _Account:
    limit: int | None = None
    remaining: int | None = None
    reset: float | None = None
    created: deque[float] = field(default_factory=deque)  # when each recent creating request went
    paused_until: float = 0.0
    pause_reason: str = ""
    strikes: int = 0  # secondary limits in a row (each one after the previous pause ended)

    def window_open(self, now: float) -> bool:
        """Whether the last reported allowance still holds (its reset has not passed)."""
        return self.remaining is not None and self.reset is not None and now < self.reset

    def forget_old(self, now: float) -> None:
        while self.created and self.created[0] <= now - CREATING_WINDOW_S:
            self.created.popleft()


class Budget:
    """The request budget of every installation this process talks to (see the module's docstring)."""

    def __init__(self, *, creating_per_minute: int = CREATING_PER_MINUTE) -> None:
        self.creating_per_minute = creating_per_minute
        self._accounts: dict[int, _Account] = {}

    def _account(self, installation_id: int) -> _Account:
        return self._accounts.setdefault(installation_id, _Account())

    def waiting(self, installation_id: int, *, creating: bool, essential: bool, now: float) -> Wait:
        """How long a request of the installation (:data:`APP` for the App) must wait, and why."""
        account = self._accounts.get(installation_id)
        if account is None:
            return Wait(0.0)
        waits = [Wait(0.0)]
        if account.paused_until > now:
            waits.append(Wait(account.paused_until - now, account.pause_reason))
        if account.window_open(now):
            assert account.remaining is not None
            assert account.reset is not None
            until_reset = account.reset - now + RESET_MARGIN_S
            if account.remaining <= 0:
                waits.append(Wait(until_reset, "the hourly allowance is spent until its reset"))
            elif not essential and account.limit is not None and account.remaining <= reserve(account.limit):
                waits.append(Wait(until_reset, f"{account.remaining} requests left, kept for essential ones"))
        if creating:
            account.forget_old(now)
            if len(account.created) >= self.creating_per_minute:
                oldest = account.created[-self.creating_per_minute]
                waits.append(
                    Wait(
                        oldest + CREATING_WINDOW_S - now,
                        f"{self.creating_per_minute} content-creating requests in the last minute",
                    )
                )
        return max(waits, key=lambda wait: wait.delay_s)

    def wait_s(self, installation_id: int, *, creating: bool, essential: bool, now: float) -> float:
        """Seconds until a request of the installation may go; 0.0: now. Asking spends nothing."""
        return self.waiting(installation_id, creating=creating, essential=essential, now=now).delay_s

    def spend(self, installation_id: int, *, creating: bool, now: float) -> None:
        """Count a request that is going now (before its answer tells the new ``remaining``)."""
        account = self._account(installation_id)
        if account.window_open(now):
            assert account.remaining is not None
            account.remaining -= 1
        if creating:
            account.forget_old(now)
            account.created.append(now)

    def observe(
        self, installation_id: int, status: int | None, headers: Mapping[str, str], message: str, now: float
    ) -> None:
        """Learn from an answer: its rate-limit headers, and a pause after a limit or a ``Retry-After``.

        ``status`` is ``None`` when no answer came (nothing to learn); ``message`` is the body's
        ``message`` (a 403 says "secondary rate limit" there). Showing the same answer twice changes
        nothing more than showing it once.
        """
        if status is None:
            return
        lowered = {key.lower(): value for key, value in headers.items()}
        account = self._account(installation_id)
        self._learn_allowance(account, lowered)
        if status < 400:
            account.strikes = 0
            return
        fresh = now >= account.paused_until  # not the echo of a limit already being waited out
        attempt = account.strikes + 1 if fresh else max(account.strikes, 1)
        retry = retry_after(status, lowered, message, attempt, now, limits_in_a_row=attempt)
        if retry is None or not (retry.limited or "retry-after" in lowered):
            return
        if fresh and retry.limited:
            account.strikes += 1
        if now + retry.delay_s > account.paused_until:
            account.paused_until = now + retry.delay_s
            account.pause_reason = f"GitHub asked for a pause ({retry.reason})"

    @staticmethod
    def _learn_allowance(account: _Account, headers: Mapping[str, str]) -> None:
        if headers.get("x-ratelimit-resource", "core").strip() != "core":
            return  # search and GraphQL have allowances of their own; Kerrigan budgets the REST core
        try:
            limit = int(headers["x-ratelimit-limit"])
            remaining = int(headers["x-ratelimit-remaining"])
            reset = float(headers["x-ratelimit-reset"])
        except (KeyError, ValueError):
            return
        if account.reset is not None and reset < account.reset:
            return  # a late answer from the window before the current one
        account.limit, account.remaining, account.reset = limit, remaining, reset
