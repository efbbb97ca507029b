"""The per-installation request budget, with the time passed in."""

from __future__ import annotations

import pytest

from kerrigan.github.budget import APP, CREATING_PER_MINUTE, Budget, creating, reserve

INSTALLATION = 7
OTHER = 8
NOW = 1_700_000_000.0
RESET = NOW + 1200.0  # the allowance renews in 20 minutes


def limits(remaining: int, *, limit: int = 5000, reset: float = RESET, **extra: str) -> dict[str, str]:
    return {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(int(reset)),
        **extra,
    }


def budget_with(remaining: int, *, limit: int = 5000, installation: int = INSTALLATION) -> Budget:
    budget = Budget()
    budget.observe(installation, 200, limits(remaining, limit=limit), "", NOW)
    return budget


def read(
    budget: Budget, *, essential: bool = False, now: float = NOW, installation: int = INSTALLATION
) -> float:
    return budget.wait_s(installation, creating=False, essential=essential, now=now)


def test_an_installation_never_heard_of_may_send_at_once() -> None:
    assert Budget().wait_s(INSTALLATION, creating=True, essential=False, now=NOW) == 0.0


@pytest.mark.parametrize(
    ("limit", "kept"),
    [(1000, 50), (5000, 250), (12_500, 625), (15_000, 750), (60, 50)],
)
def test_the_reserve_is_five_percent_of_the_limit_and_at_least_fifty(limit: int, kept: int) -> None:
    assert reserve(limit) == kept


@pytest.mark.parametrize(
    ("method", "expected"),
    [("POST", True), ("patch", True), ("PUT", True), ("DELETE", True), ("GET", False), ("HEAD", False)],
)
def test_content_creating_methods_are_those_that_write(method: str, expected: bool) -> None:
    assert creating(method) is expected


@pytest.mark.parametrize(
    ("method", "url", "expected"),
    [
        ("POST", "https://api.github.com/app/installations/42/access_tokens", False),
        ("POST", "/app/installations/42/access_tokens/", False),
        ("DELETE", "https://api.github.com/installation/token", False),
        ("DELETE", "http://127.0.0.1:8080/installation/token?x=1", False),
        ("POST", "https://api.github.com/repos/octo/fw/check-runs", True),
        ("POST", "https://api.github.com/app/installations/42/suspended", True),
        ("DELETE", "https://api.github.com/installation/tokens", True),
        ("GET", "https://api.github.com/installation/token", False),
    ],
)
def test_minting_and_revoking_installation_tokens_create_no_content(
    method: str, url: str, expected: bool
) -> None:
    # A job's token is minted and revoked per job: counted among the 80 a minute, a busy lab would wait
    # for GitHub's allowance between two jobs for requests that make nothing anyone sees.
    assert creating(method, url) is expected


def test_requests_go_while_more_than_the_reserve_remains() -> None:
    assert read(budget_with(251)) == 0.0


@pytest.mark.parametrize("remaining", [250, 1])
def test_at_the_reserve_other_requests_wait_for_the_reset(remaining: int) -> None:
    assert read(budget_with(remaining)) == pytest.approx(RESET - NOW + 1.0)


@pytest.mark.parametrize("remaining", [250, 1])
def test_at_the_reserve_essential_requests_still_go(remaining: int) -> None:
    assert read(budget_with(remaining), essential=True) == 0.0


def test_with_nothing_left_even_essential_requests_wait_for_the_reset() -> None:
    assert read(budget_with(0), essential=True) == pytest.approx(RESET - NOW + 1.0)


def test_after_the_reset_the_spent_allowance_no_longer_holds_anything_back() -> None:
    assert read(budget_with(0), now=RESET + 0.5) == 0.0


def test_spending_counts_down_until_the_reserve_is_reached() -> None:
    budget = budget_with(252)
    budget.spend(INSTALLATION, creating=False, now=NOW)
    assert read(budget) == 0.0
    budget.spend(INSTALLATION, creating=False, now=NOW)
    assert read(budget) > 0.0


def test_the_next_answer_tells_what_remains_even_after_local_counting() -> None:
    budget = budget_with(251)
    budget.spend(INSTALLATION, creating=False, now=NOW)
    budget.observe(INSTALLATION, 304, limits(4000), "", NOW + 1)  # a 304 does not count at GitHub
    assert read(budget, now=NOW + 1) == 0.0


def test_a_late_answer_from_the_previous_window_does_not_undo_the_new_one() -> None:
    budget = budget_with(4999, limit=5000)
    budget.observe(INSTALLATION, 200, limits(0, reset=NOW - 10), "", NOW)
    assert read(budget) == 0.0


def test_an_allowance_of_another_resource_is_not_the_core_one() -> None:
    budget = Budget()
    budget.observe(INSTALLATION, 200, limits(0, limit=30, **{"X-RateLimit-Resource": "search"}), "", NOW)
    assert read(budget) == 0.0


def test_each_installation_and_the_app_keep_their_own_allowance() -> None:
    budget = budget_with(0)
    assert read(budget, installation=OTHER) == 0.0
    assert read(budget, installation=APP) == 0.0
    assert read(budget) > 0.0


def test_the_eighty_first_creating_request_in_a_minute_waits_for_the_first_to_age_out() -> None:
    budget = Budget()
    for n in range(CREATING_PER_MINUTE):  # one every half second: 80 in 40 s
        assert budget.wait_s(INSTALLATION, creating=True, essential=True, now=NOW + n / 2) == 0.0
        budget.spend(INSTALLATION, creating=True, now=NOW + n / 2)
    later = NOW + CREATING_PER_MINUTE / 2
    assert budget.wait_s(INSTALLATION, creating=True, essential=True, now=later) == pytest.approx(
        NOW + 60 - later
    )


def test_a_full_minute_of_creating_requests_does_not_hold_back_reads() -> None:
    budget = Budget()
    for _ in range(CREATING_PER_MINUTE):
        budget.spend(INSTALLATION, creating=True, now=NOW)
    assert budget.wait_s(INSTALLATION, creating=True, essential=False, now=NOW) > 0.0
    assert read(budget) == 0.0


def test_creating_requests_go_again_a_minute_after_the_burst() -> None:
    budget = Budget()
    for _ in range(CREATING_PER_MINUTE):
        budget.spend(INSTALLATION, creating=True, now=NOW)
    assert budget.wait_s(INSTALLATION, creating=True, essential=False, now=NOW + 60.0) == 0.0


def test_asking_spends_nothing() -> None:
    budget = Budget(creating_per_minute=1)
    for _ in range(3):
        assert budget.wait_s(INSTALLATION, creating=True, essential=False, now=NOW) == 0.0


@pytest.mark.parametrize(
    ("status", "headers", "message", "pause"),
    [
        pytest.param(429, {"Retry-After": "30"}, "", 30.0, id="429-retry-after"),
        pytest.param(
            403, {"Retry-After": "45"}, "You have exceeded a secondary rate limit", 45.0, id="403-ra"
        ),
        pytest.param(
            403, {}, "You have exceeded a secondary rate limit.", 60.0, id="403-secondary-at-least-60"
        ),
        pytest.param(429, {}, "", 60.0, id="429-without-retry-after"),
        pytest.param(503, {"Retry-After": "20"}, "", 20.0, id="503-retry-after"),
    ],
)
def test_a_limit_or_retry_after_pauses_every_request_of_the_installation(
    status: int, headers: dict[str, str], message: str, pause: float
) -> None:
    budget = Budget()
    budget.observe(INSTALLATION, status, headers, message, NOW)
    assert read(budget, essential=True) == pytest.approx(pause)
    assert budget.wait_s(INSTALLATION, creating=True, essential=True, now=NOW) == pytest.approx(pause)
    assert read(budget, installation=OTHER) == 0.0


def test_the_pause_ends_when_its_time_is_up() -> None:
    budget = Budget()
    budget.observe(INSTALLATION, 429, {"Retry-After": "30"}, "", NOW)
    assert read(budget, now=NOW + 30.0) == 0.0


def test_a_primary_limit_answer_pauses_until_the_reset() -> None:
    budget = Budget()
    budget.observe(INSTALLATION, 403, limits(0), "API rate limit exceeded", NOW)
    assert read(budget, essential=True) == pytest.approx(RESET - NOW + 1.0)


@pytest.mark.parametrize(
    ("status", "message"),
    [(500, ""), (502, ""), (404, "Not Found"), (422, "Validation Failed"), (403, "Resource not accessible")],
)
def test_answers_that_are_not_limits_pause_nothing(status: int, message: str) -> None:
    budget = Budget()
    budget.observe(INSTALLATION, status, {}, message, NOW)
    assert read(budget) == 0.0


def test_no_answer_teaches_nothing() -> None:
    budget = budget_with(0)
    budget.observe(INSTALLATION, None, {}, "", NOW)
    assert read(budget) > 0.0


def test_showing_the_same_limit_twice_pauses_no_longer_than_once() -> None:
    budget = Budget()
    message = "You have exceeded a secondary rate limit"
    budget.observe(INSTALLATION, 403, {}, message, NOW)
    budget.observe(INSTALLATION, 403, {}, message, NOW)
    assert read(budget) == pytest.approx(60.0)


def test_secondary_limits_in_a_row_pause_longer_each_time() -> None:
    budget = Budget()
    message = "You have exceeded a secondary rate limit"
    budget.observe(INSTALLATION, 403, {}, message, NOW)
    budget.observe(INSTALLATION, 403, {}, message, NOW + 60.0)  # again, right after the first pause
    assert read(budget, now=NOW + 60.0) == pytest.approx(120.0)


def test_a_successful_answer_ends_the_escalation() -> None:
    budget = Budget()
    message = "You have exceeded a secondary rate limit"
    budget.observe(INSTALLATION, 403, {}, message, NOW)
    budget.observe(INSTALLATION, 201, {}, "", NOW + 60.0)
    budget.observe(INSTALLATION, 403, {}, message, NOW + 61.0)
    assert read(budget, now=NOW + 61.0) == pytest.approx(60.0)


def test_a_shorter_retry_after_does_not_cut_a_longer_pause() -> None:
    budget = Budget()
    budget.observe(INSTALLATION, 429, {"Retry-After": "100"}, "", NOW)
    budget.observe(INSTALLATION, 429, {"Retry-After": "5"}, "", NOW + 1.0)
    assert read(budget, now=NOW + 1.0) == pytest.approx(99.0)


def test_the_reason_names_what_holds_a_request_back() -> None:
    budget = budget_with(10)
    wait = budget.waiting(INSTALLATION, creating=False, essential=False, now=NOW)
    assert "10 requests left" in wait.reason
