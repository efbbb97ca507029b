"""The runner's requests to GitHub: the headers, and which failures are sent again for how long."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

import kerrigan
from kerrigan.runner.github_requests import (
    GitHubRequestError,
    RetryBudget,
    github_headers,
    with_retries,
)
from kerrigan.testing.clock import FakeTime


class Answers:
    """A request that fails with the given answers, in order, then succeeds."""

    def __init__(self, *failures: GitHubRequestError) -> None:
        self.failures = list(failures)
        self.sent = 0

    async def send(self) -> str:
        self.sent += 1
        if self.failures:
            raise self.failures.pop(0)
        return "done"


def answer(
    status: int | None, headers: Mapping[str, str] | None = None, message: str = ""
) -> GitHubRequestError:
    return GitHubRequestError(status, headers or {}, message)


SECONDARY = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."


def test_every_request_names_the_api_version_and_the_runner_and_carries_the_token_when_given() -> None:
    assert github_headers("ghs_abc") == {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": f"kerrigan-runner/{kerrigan.__version__}",
        "Authorization": "token ghs_abc",
    }
    assert "Authorization" not in github_headers()


@pytest.mark.parametrize(
    ("failure", "waited"),
    [
        pytest.param(answer(None, message="Server disconnected"), 0.1, id="no-answer"),
        pytest.param(answer(502), 0.1, id="server-error"),
        pytest.param(answer(503, {"Retry-After": "7"}), 7.0, id="server-error-retry-after"),
        pytest.param(answer(429, {"retry-after": "3"}), 3.0, id="too-many-requests"),
        pytest.param(answer(403, {"Retry-After": "1"}, SECONDARY), 1.0, id="secondary-limit-retry-after"),
        pytest.param(answer(403, {}, SECONDARY), 60.0, id="secondary-limit-a-minute-at-least"),
    ],
)
async def test_a_passing_failure_is_sent_again_after_the_wait_githubs_rules_give(
    failure: GitHubRequestError, waited: float
) -> None:
    time = FakeTime(0.0)
    request = Answers(failure)
    result = await with_retries(
        request.send, RetryBudget(300, base_s=0.1), "GET x", clock=time, sleep=time.sleep
    )
    assert result == "done"
    assert request.sent == 2
    [slept] = time.slept
    # Backoff is spread by jitter between 0.75 and 1.25 times its step; GitHub's own waits are exact.
    assert waited * 0.75 <= slept <= waited * 1.25


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(answer(404, message="Not Found"), id="not-found"),
        pytest.param(answer(401, message="Bad credentials"), id="bad-credentials"),
        pytest.param(answer(422, message="Validation Failed"), id="unprocessable"),
        pytest.param(answer(403, message="Resource not accessible by integration"), id="forbidden"),
    ],
)
async def test_a_final_answer_is_raised_at_once(failure: GitHubRequestError) -> None:
    time = FakeTime(0.0)
    request = Answers(failure)
    with pytest.raises(GitHubRequestError) as raised:
        await with_retries(request.send, RetryBudget(300), "GET x", clock=time, sleep=time.sleep)
    assert raised.value is failure
    assert request.sent == 1
    assert time.slept == []


async def test_failures_in_a_row_are_each_waited_out_until_the_request_succeeds() -> None:
    time = FakeTime(0.0)
    request = Answers(answer(502), answer(None), answer(403, {"Retry-After": "1"}, SECONDARY))
    result = await with_retries(
        request.send, RetryBudget(300, base_s=0.1), "GET x", clock=time, sleep=time.sleep
    )
    assert result == "done"
    assert request.sent == 4
    assert len(time.slept) == 3
    assert time.slept[1] > time.slept[0]  # the backoff grows while the failures go on
    assert time.slept[2] == 1.0


async def test_the_request_gives_up_when_the_next_wait_would_overrun_the_budget() -> None:
    time = FakeTime(0.0)
    request = Answers(*(answer(502, message="Bad Gateway") for _ in range(100)))
    with pytest.raises(GitHubRequestError, match=r"^502: Bad Gateway \(gave up after \d+ tries in \d+ s\)$"):
        await with_retries(request.send, RetryBudget(10, base_s=1.0), "GET x", clock=time, sleep=time.sleep)
    assert sum(time.slept) <= 10
    assert 2 <= request.sent < 100


async def test_a_budget_of_zero_sends_once() -> None:
    time = FakeTime(0.0)
    request = Answers(answer(502))
    with pytest.raises(GitHubRequestError, match=r"^502$"):
        await with_retries(request.send, RetryBudget(0), "GET x", clock=time, sleep=time.sleep)
    assert request.sent == 1


@pytest.mark.parametrize(("total_s", "base_s"), [(-1.0, 0.5), (10.0, 0.0)])
def test_a_budget_below_zero_or_without_a_backoff_step_is_refused(total_s: float, base_s: float) -> None:
    with pytest.raises(ValueError, match="retry budget"):
        RetryBudget(total_s, base_s)
