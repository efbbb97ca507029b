"""Property: no generated webhook gets a 5xx or makes the worker fail unexpectedly, and none is retried for
a payload error.

Payloads are the project's own fixtures (``fixtures/webhooks``, about ``octo/firmware``, so the routes go
all the way) with fields dropped or replaced by values of another type: every delivery is answered below
500 and ends processed, either without error or failed once with ``payload ...`` naming the field.
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerrigan.testing.github import signed_headers
from tests.integration.github.conftest import SECRET, WEBHOOKS, Harness, webhook

FIXTURES = sorted(path.stem for path in WEBHOOKS.glob("*.json"))
# The fields the routes read; a generated change picks one of these half the time, any field otherwise.
READ = (
    "action",
    "installation",
    "installation.id",
    "installation.account",
    "repository",
    "repository.full_name",
    "repositories",
    "ref",
    "after",
    "deleted",
    "sender",
    "sender.login",
    "sender.type",
    "pull_request",
    "pull_request.number",
    "pull_request.head",
    "pull_request.head.sha",
    "pull_request.head.ref",
    "pull_request.head.repo",
    "pull_request.base",
    "pull_request.base.ref",
    "pull_request.base.repo",
    "workflow_run",
    "workflow_run.id",
    "workflow_run.name",
    "workflow_run.head_sha",
    "workflow_run.head_branch",
    "workflow_run.head_repository",
    "merge_group",
    "merge_group.head_sha",
    "merge_group.base_ref",
    "merge_group.head_ref",
    "check_run",
    "check_run.id",
    "check_run.name",
    "check_run.head_sha",
    "check_run.external_id",
    "check_suite",
    "check_suite.head_sha",
    "requested_action",
    "issue",
    "issue.number",
    "issue.pull_request",
    "comment",
    "comment.id",
    "comment.body",
)
_deep: Any = "leaf"
for _ in range(70):
    _deep = [_deep]
# Values of the wrong type (or out of range, or not text) for whatever field they replace.
HOSTILE = (None, "", "x", "\x00", "\ud800", "x" * 300, 0.5, -1, 2**70, True, [], [1], {}, {"id": 1}, _deep)
_ids = itertools.count()


def _paths(value: Any, prefix: str = "") -> list[str]:
    if not isinstance(value, dict):
        return []
    found = []
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        found.append(path)
        if path.count(".") < 2:
            found += _paths(item, path)
    return found


def _apply(payload: dict[str, Any], path: str, value: Any, drop: bool) -> None:
    *parents, last = path.split(".")
    target: Any = payload
    for key in parents:
        if not isinstance(target, dict) or not isinstance(target.get(key), dict):
            return  # an earlier change replaced this branch
        target = target[key]
    if drop:
        target.pop(last, None)
    else:
        target[last] = value


@st.composite
def deliveries(draw: st.DrawFn) -> tuple[str, bytes]:
    """A fixture's event and its payload, one to three fields dropped or replaced, as the body GitHub
    would send."""
    name = draw(st.sampled_from(FIXTURES))
    payload = copy.deepcopy(webhook(name))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.one_of(st.sampled_from(READ), st.sampled_from(_paths(payload) or ["action"])))
        _apply(payload, path, draw(st.sampled_from(HOSTILE)), drop=draw(st.booleans()))
    return name.split("-", 1)[0], json.dumps(payload).encode()


@settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    # One application for every example (a fresh one each would take minutes); examples use fresh ids.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(delivery=deliveries())
async def test_no_generated_webhook_gets_a_5xx_a_traceback_or_a_retry(
    bare_harness: Harness, caplog: pytest.LogCaptureFixture, delivery: tuple[str, bytes]
) -> None:
    event, body = delivery
    delivery_id = f"generated-{next(_ids)}"
    response = await bare_harness.client.post(
        "/webhooks/github", data=body, headers=signed_headers(SECRET, event, body, delivery_id)
    )
    assert response.status < 500
    assert response.status in (200, 202)

    async def done() -> bool:
        rows = [d for d in await bare_harness.deliveries() if d.delivery_id == delivery_id]
        return not rows or rows[0].processed or rows[0].error is not None

    await bare_harness.wait_until(done)
    [row] = [d for d in await bare_harness.deliveries() if d.delivery_id == delivery_id] or [None]
    if row is not None:
        assert row.processed, row.error  # not left waiting for a retry
        assert row.attempts <= 1
        assert row.error is None or row.error.startswith(("payload", "the body")), row.error
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
