"""GitHub's retry rules: Retry-After, the reset of the primary limit, secondary limits, server errors."""

from __future__ import annotations

import pytest

from kerrigan.core.github_retry import SECONDARY_LIMIT_MIN_S, backoff, outcome_unknown, retry_after

NOW = 1_800_000_000.0


@pytest.mark.parametrize("status", [403, 429, 500, 502, 503, 504])
def test_retry_after_header_is_obeyed(status: int) -> None:
    retry = retry_after(status, {"Retry-After": "17"}, "", 1, NOW)
    assert retry is not None
    assert retry.delay_s == 17
    assert retry.limited is (status in (403, 429))


def test_primary_limit_spent_waits_until_reset() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 120)}
    retry = retry_after(403, headers, "API rate limit exceeded", 1, NOW)
    assert retry is not None
    assert retry.delay_s == 121
    assert retry.limited


def test_a_reset_in_the_past_still_waits_a_second() -> None:
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) - 5)}
    retry = retry_after(429, headers, "", 1, NOW)
    assert retry is not None
    assert retry.delay_s == 1


@pytest.mark.parametrize("status", [403, 429])
def test_secondary_limit_without_headers_waits_a_minute_doubling_with_limits_in_a_row(status: int) -> None:
    message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    first = retry_after(status, {}, message, 1, NOW)
    after_a_few_errors = retry_after(status, {}, message, 4, NOW)
    still_limited = retry_after(status, {}, message, 4, NOW, limits_in_a_row=3)
    assert first is not None
    assert after_a_few_errors is not None
    assert still_limited is not None
    assert first.delay_s == after_a_few_errors.delay_s == SECONDARY_LIMIT_MIN_S
    assert still_limited.delay_s == 4 * SECONDARY_LIMIT_MIN_S
    assert first.limited


def test_a_403_that_is_not_a_limit_is_final() -> None:
    assert retry_after(403, {}, "Resource not accessible by integration", 1, NOW) is None


@pytest.mark.parametrize("status", [400, 401, 404, 409, 410, 422])
def test_client_errors_are_final(status: int) -> None:
    assert retry_after(status, {}, "Validation Failed", 1, NOW) is None


@pytest.mark.parametrize("status", [None, 500, 502, 503, 504])
def test_server_errors_and_no_answer_back_off_exponentially(status: int | None) -> None:
    delays = []
    for attempt in (1, 2, 3):
        retry = retry_after(status, {}, "", attempt, NOW, jitter=0.5)
        assert retry is not None
        assert not retry.limited
        delays.append(retry.delay_s)
    assert delays == [0.5, 1.0, 2.0]


def test_backoff_is_capped_and_jitter_spreads_it() -> None:
    assert backoff(100, cap_s=300, jitter=0.5) == 300
    assert backoff(1, jitter=0.0) == pytest.approx(0.375)
    assert backoff(1, jitter=0.999) < 0.625


@pytest.mark.parametrize(
    ("status", "unknown"), [(None, True), (500, True), (502, True), (422, False), (201, False)]
)
def test_outcome_is_unknown_without_an_answer_or_after_a_server_error(
    status: int | None, unknown: bool
) -> None:
    assert outcome_unknown(status) is unknown
