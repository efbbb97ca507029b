"""When to send a request to GitHub again: GitHub's rules for retries and rate limits, as pure functions.

GitHub's REST documentation asks clients to wait for ``Retry-After`` when it is sent; when the primary
limit is spent (``x-ratelimit-remaining: 0``) to wait until ``x-ratelimit-reset``; after a secondary rate
limit without either header to wait at least a minute, longer each time it happens again; and to back off
after server errors. A dropped connection or a timeout is treated like a server error. Anything else (a
422, a 404, a 403 that is not a limit) is GitHub's final word: retrying would get the same answer.

The server's check-run reconciler and the runner's tarball download both follow :func:`retry_after`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

SERVER_ERRORS: Final = frozenset({500, 502, 503, 504})
SECONDARY_LIMIT_MIN_S: Final = 60.0
BACKOFF_BASE_S: Final = 0.5
BACKOFF_CAP_S: Final = 300.0
SECONDARY_LIMIT_WORDS: Final = "secondary rate limit"


@dataclass(frozen=True, slots=True)
class Retry:
    """Send again after ``delay_s``; ``limited`` says GitHub limited the client (pause every request of
    the installation, not this one alone)."""

    delay_s: float
    reason: str
    limited: bool = False


def _seconds(value: str | None) -> float | None:
    if value is None:
        return None
    text = value.strip()
    return float(text) if text.isascii() and text.isdigit() else None


def backoff(
    attempt: int, *, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S, jitter: float = 0.5
) -> float:
    """Exponential backoff for the ``attempt``-th failure (1, 2, ...), capped; ``jitter`` in [0, 1) spreads
    retries of many clients between 0.75 and 1.25 times the step."""
    step = min(cap_s, base_s * 2.0 ** min(max(attempt, 1) - 1, 30))
    return step * (0.75 + 0.5 * jitter)


def retry_after(
    status: int | None,
    headers: Mapping[str, str],
    message: str,
    attempt: int,
    now: float,
    *,
    base_s: float = BACKOFF_BASE_S,
    cap_s: float = BACKOFF_CAP_S,
    jitter: float = 0.5,
    limits_in_a_row: int = 1,
) -> Retry | None:
    """How long to wait before sending a failed request again, or ``None`` when GitHub will not change its
    answer.

    ``status`` is ``None`` when no answer came (the connection dropped, or the request timed out);
    ``headers`` are the answer's (any case); ``message`` is its body's ``message``; ``attempt`` counts the
    failures so far (1 for the first); ``now`` is the Unix time, against which ``x-ratelimit-reset`` counts;
    ``limits_in_a_row`` counts the secondary limits met one after another (60 s for the first, doubling).
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    step = backoff(attempt, base_s=base_s, cap_s=cap_s, jitter=jitter)
    if status is None:
        return Retry(step, "no answer (connection dropped or timed out)")
    limit_status = status in (403, 429)
    wait = _seconds(lowered.get("retry-after"))
    if wait is not None and (limit_status or status in SERVER_ERRORS):
        return Retry(wait, f"{status} with Retry-After: {wait:.0f} s", limited=limit_status)
    reset = _seconds(lowered.get("x-ratelimit-reset"))
    if limit_status and lowered.get("x-ratelimit-remaining", "").strip() == "0" and reset is not None:
        return Retry(max(0.0, reset - now) + 1.0, f"{status}: rate limit spent until reset", limited=True)
    if status == 429 or (status == 403 and SECONDARY_LIMIT_WORDS in message.lower()):
        # GitHub: "wait for at least one minute", and exponentially longer while it keeps happening. What
        # counts is limits in a row (the budget keeps that count per installation), not every failure: a few
        # server errors before one limit do not make it a four-minute wait.
        delay = SECONDARY_LIMIT_MIN_S * 2.0 ** min(max(limits_in_a_row, 1) - 1, 6)
        return Retry(
            min(delay, max(cap_s, SECONDARY_LIMIT_MIN_S)), f"{status}: secondary rate limit", limited=True
        )
    if status in SERVER_ERRORS:
        return Retry(step, f"server error {status}")
    return None


def outcome_unknown(status: int | None) -> bool:
    """Whether GitHub may have acted on a request it did not confirm: no answer, or a server error (a 502
    can come after the work was done)."""
    return status is None or status >= 500
