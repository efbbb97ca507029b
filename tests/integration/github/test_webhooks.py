"""``POST /webhooks/github``: verified, stored, answered at once, then processed from the store."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta
from typing import Any

import pytest

from kerrigan.app import WORKER
from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn, signed_headers
from tests.integration.github.conftest import (
    SECRET,
    SMOKE_SHA,
    Harness,
    StartApp,
    check_run_name,
    push_payload,
    settings_for,
    stored_deliveries,
    webhook,
)

SMOKE = check_run_name("hil-smoke")
BODY = json.dumps(push_payload(SMOKE_SHA)).encode()


def _sha256(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _sha1(secret: str, body: bytes) -> str:
    return "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()


def _unsigned() -> dict[str, str]:
    headers = signed_headers(SECRET, "push", BODY, "delivery-1")
    del headers["X-Hub-Signature-256"]
    return headers


@pytest.mark.parametrize(
    "signature_headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"X-Hub-Signature-256": _sha256("another-secret", BODY)}, id="wrong-secret"),
        pytest.param({"X-Hub-Signature-256": _sha256(SECRET, BODY + b" ")}, id="other-body"),
        pytest.param({"X-Hub-Signature-256": _sha1(SECRET, BODY)}, id="sha1-in-sha256-header"),
        pytest.param({"X-Hub-Signature": _sha1(SECRET, BODY)}, id="sha1-only"),
    ],
)
async def test_delivery_without_a_valid_sha256_signature_is_refused_and_not_stored(
    bare_harness: Harness, signature_headers: dict[str, str]
) -> None:
    response = await bare_harness.client.post(
        "/webhooks/github", data=BODY, headers=_unsigned() | signature_headers
    )
    assert response.status == 401
    assert await bare_harness.deliveries() == []
    assert bare_harness.github.requests == []


async def test_signed_delivery_is_answered_202_and_stored(bare_harness: Harness) -> None:
    status = await bare_harness.deliver("pull_request", webhook("pull_request-opened"), "delivery-1")
    assert status == 202
    assert [(d.delivery_id, d.event, d.action) for d in await bare_harness.deliveries()] == [
        ("delivery-1", "pull_request", "opened")
    ]
    await bare_harness.settle()  # let the worker finish before the application stops


async def test_signed_delivery_is_processed_after_the_answer(bare_harness: Harness) -> None:
    await bare_harness.deliver("push", push_payload(SMOKE_SHA), "delivery-1")
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.check_run_names() == [SMOKE]


async def test_repeated_delivery_id_is_answered_200_and_not_redone(bare_harness: Harness) -> None:
    assert await bare_harness.deliver("push", push_payload(SMOKE_SHA), "delivery-1") == 202
    await bare_harness.settle()
    assert await bare_harness.deliver("push", push_payload(SMOKE_SHA), "delivery-1") == 200
    await bare_harness.settle()
    assert len(await bare_harness.deliveries()) == 1
    assert bare_harness.check_run_names() == [SMOKE]


async def test_ping_is_answered_200(bare_harness: Harness) -> None:
    ping = {"zen": "Design for failure.", "hook_id": 30, "hook": {"type": "App", "id": 30, "app_id": 4242}}
    assert await bare_harness.deliver("ping", ping) == 200


async def test_delivery_that_failed_on_github_errors_is_retried_from_the_store(
    bare_harness: Harness, clock: FakeClock
) -> None:
    # Five 502s in a row: the client gives up, so the delivery's first attempt fails.
    bare_harness.github.fail_next("POST", r"/access_tokens$", 502, headers={"Retry-After": "0"}, times=5)
    await bare_harness.deliver("push", push_payload(SMOKE_SHA), "delivery-1")

    async def failed_once() -> bool:
        [delivery] = await bare_harness.deliveries()
        return delivery.error is not None

    await bare_harness.wait_until(failed_once)
    assert bare_harness.github.check_runs == {}
    clock.advance(2)  # the first retry is due two seconds after the failure
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.attempts, delivery.error) == (True, 2, None)
    assert bare_harness.check_run_names() == [SMOKE]


async def test_delivery_stored_while_no_worker_runs_is_processed_after_restart_and_only_once(
    db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    # Without the App's credentials Kerrigan stores deliveries but runs no worker.
    stopped = await start_app(settings_for(db, github, github_app_id=None, github_private_key=None))
    response = await stopped.post(
        "/webhooks/github", data=BODY, headers=signed_headers(SECRET, "push", BODY, "delivery-1")
    )
    assert response.status == 202
    await stopped.close()
    assert github.requests == []

    restarted = Harness(await start_app(settings_for(db, github)), github, db)
    await restarted.settle()
    assert restarted.check_run_names() == [SMOKE]
    await restarted.client.close()

    again = Harness(await start_app(settings_for(db, github)), github, db)
    # A later delivery is processed after any still due, so once it is done the first was not redone.
    await again.deliver("push", push_payload(ref="refs/tags/v2.2.1"), "delivery-2")
    await again.settle()
    assert again.check_run_names() == [SMOKE]
    assert [d.processed for d in await stored_deliveries(db)] == [True, True]


async def test_the_worker_claims_deliveries_for_the_configured_lease(
    db: Database, github: GitHubStandIn, start_app: StartApp
) -> None:
    client = await start_app(settings_for(db, github, delivery_lease_s=7.5))
    assert client.app[WORKER].lease == timedelta(seconds=7.5)


def _unknown(event: str, action: str | None, **extra: Any) -> dict[str, Any]:
    payload = webhook("push")
    base = {
        "repository": payload["repository"],
        "sender": payload["sender"],
        "installation": payload["installation"],
    }
    return base | ({"action": action} if action else {}) | extra


@pytest.mark.parametrize(
    ("event", "payload"),
    [
        pytest.param("star", _unknown("star", "created", starred_at="2026-11-29T12:00:00Z"), id="star"),
        pytest.param("workflow_job", _unknown("workflow_job", "queued"), id="workflow_job"),
        pytest.param("pull_request", webhook("pull_request-opened") | {"action": "closed"}, id="pr-closed"),
        pytest.param(
            "check_suite", webhook("check_suite-rerequested") | {"action": "completed"}, id="suite-completed"
        ),
        pytest.param(
            "issue_comment", webhook("issue_comment-retry") | {"action": "deleted"}, id="comment-deleted"
        ),
    ],
)
async def test_unknown_event_or_action_is_processed_without_error_and_ignored(
    bare_harness: Harness, event: str, payload: dict[str, Any]
) -> None:
    assert await bare_harness.deliver(event, payload) == 202
    await bare_harness.settle()
    [delivery] = await bare_harness.deliveries()
    assert (delivery.processed, delivery.error) == (True, None)
    assert bare_harness.github.requests == []
