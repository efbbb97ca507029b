"""Hostile webhooks, signed as GitHub signs them: none gets a 5xx, a traceback or a retry loop.

A body that is not a GitHub payload (not UTF-8, not JSON, nested too deep, not an object) is answered 202
and recorded as failed with the reason; a payload missing a field a route needs, or holding it with the
wrong type, is recorded as failed by the worker with the field named. Neither is ever tried again.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import signed_headers
from tests.integration.github.conftest import (
    OTHER_SHA,
    REPO,
    SECRET,
    Harness,
    StoredDelivery,
    push_payload,
    webhook,
)

HUGE = "9" * 5000


async def post(harness: Harness, event: str, body: bytes, delivery_id: str) -> tuple[int, Any]:
    response = await harness.client.post(
        "/webhooks/github", data=body, headers=signed_headers(SECRET, event, body, delivery_id)
    )
    return response.status, await response.json()


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []


def warned(caplog: pytest.LogCaptureFixture, delivery_id: str, reason: str) -> bool:
    return any(
        r.levelno == logging.WARNING and delivery_id in r.getMessage() and reason in r.getMessage()
        for r in caplog.records
    )


async def the_delivery(harness: Harness) -> StoredDelivery:
    [delivery] = await harness.deliveries()
    return delivery


# -- manifests a push brings -----------------------------------------------------------------------------


async def test_a_pushed_manifest_with_a_5000_digit_vcpus_fails_its_check_run_with_an_annotation(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    path = ".kerrigan/workflows/huge.yml"
    text = f"name: huge\non: push\ntasks:\n  - id: smoke\n    run: ./smoke.sh\n    vcpus: {HUGE}\n"
    [run] = await harness.push_commit({path: text})
    assert (run["name"], run["status"], run["conclusion"]) == ("kerrigan / huge", "completed", "failure")
    [annotation] = [a for a in run["output"]["annotations"] if a["annotation_level"] == "failure"]
    assert (annotation["path"], annotation["start_line"]) == (path, 6)
    assert annotation["message"] == "tasks[0].vcpus: 999…9 (5000 digits) is too large: at most 256"
    delivery = await the_delivery(harness)
    assert (delivery.processed, delivery.attempts, delivery.error) == (True, 1, None)
    no_tracebacks(caplog)


# -- bodies that are not payloads ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(
            b"[" * 100_000 + b"]" * 100_000,
            "the body is nested deeper than 64 levels",
            id="200-kb-of-brackets",
        ),
        pytest.param(
            b'{"a": ' * 65 + b"1" + b"}" * 65, "the body is nested deeper than 64 levels", id="65-objects"
        ),
        pytest.param(b"[" * 100_000, "the body is nested deeper than 64 levels", id="unclosed-brackets"),
        pytest.param(b"\xff\xfe{}", "the body is not UTF-8 (byte 0)", id="not-utf8"),
        pytest.param("{}".encode("utf-16"), "the body is not UTF-8 (byte 0)", id="utf16"),
        pytest.param(b"{not json", "the body is not JSON: ", id="not-json"),
        pytest.param(b'{"a": "\x00"}', "the body is not JSON: ", id="nul-in-a-string"),
        pytest.param(
            b'{"installation": {"id": ' + HUGE.encode() + b"}}", "the body is not JSON: ", id="5000-digits"
        ),
        pytest.param(b"[1, 2]", "payload not an object (a list)", id="a-list"),
        pytest.param(b'"push"', "payload not an object (a string)", id="a-string"),
        pytest.param(b"null", "payload not an object (null)", id="null"),
        pytest.param(
            b'{"action": ["opened"]}', "payload field action not a string (a list)", id="action-a-list"
        ),
        pytest.param(
            json.dumps({"action": "x" * 65}).encode(),
            "payload field action too long (65 characters; at most 64)",
            id="action-too-long",
        ),
    ],
)
async def test_a_signed_body_that_is_not_a_payload_is_answered_202_and_recorded_as_failed(
    bare_harness: Harness, caplog: pytest.LogCaptureFixture, clock: FakeClock, body: bytes, reason: str
) -> None:
    status, answer = await post(bare_harness, "push", body, "hostile-1")
    assert status == 202
    assert answer["status"] == "failed"
    assert answer["reason"].startswith(reason)
    clock.advance(3600)  # long past any retry
    await bare_harness.settle()
    delivery = await the_delivery(bare_harness)
    assert (delivery.processed, delivery.attempts) == (True, 0)
    assert (delivery.error or "").startswith(reason), delivery.error
    assert bare_harness.github.requests == []
    assert warned(caplog, "hostile-1", reason)
    no_tracebacks(caplog)


async def test_a_redelivered_body_that_is_not_a_payload_is_recorded_once(bare_harness: Harness) -> None:
    body = b"[" * 1000
    assert (await post(bare_harness, "push", body, "hostile-1"))[0] == 202
    assert (await post(bare_harness, "push", body, "hostile-1"))[0] == 202
    assert len(await bare_harness.deliveries()) == 1


async def test_a_body_nested_64_levels_deep_is_still_a_payload(bare_harness: Harness) -> None:
    payload = push_payload(ref="refs/tags/v1")  # starts nothing
    nested: Any = "leaf"
    for _ in range(62):  # the payload itself is the 1st level, "deep" the 2nd
        nested = [nested]
    payload["deep"] = nested
    status, answer = await post(bare_harness, "push", json.dumps(payload).encode(), "deep-1")
    assert (status, answer["status"]) == (202, "accepted")
    await bare_harness.settle()
    delivery = await the_delivery(bare_harness)
    assert (delivery.processed, delivery.error) == (True, None)


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"X-GitHub-Event": "x" * 65}, id="event-too-long"),
        pytest.param({"X-GitHub-Event": "Push Event"}, id="event-not-a-name"),
        pytest.param({"X-GitHub-Delivery": "a b"}, id="delivery-with-a-space"),
        pytest.param({"X-GitHub-Delivery": "d" * 65}, id="delivery-too-long"),
    ],
)
async def test_a_delivery_with_malformed_headers_is_a_400_and_not_stored(
    bare_harness: Harness, headers: dict[str, str]
) -> None:
    body = json.dumps(push_payload()).encode()
    sent = signed_headers(SECRET, "push", body, "delivery-1") | headers
    response = await bare_harness.client.post("/webhooks/github", data=body, headers=sent)
    assert response.status == 400
    assert await bare_harness.deliveries() == []


# -- payloads missing or mistyping a field a route needs -------------------------------------------------


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(payload: dict[str, Any]) -> None:
        for key in parents:
            payload = payload[key]
        payload[last] = value

    return change


def _drop(path: str) -> Callable[[dict[str, Any]], None]:
    *parents, last = path.split(".")

    def change(payload: dict[str, Any]) -> None:
        for key in parents:
            payload = payload[key]
        del payload[last]

    return change


PAYLOAD_FAULTS = [
    ("push", "push", _set("repository", REPO), "payload field repository not an object (a string)"),
    ("push", "push", _set("after", "HEAD"), "payload field after not a commit SHA ('HEAD')"),
    ("push", "push", _drop("after"), "payload field after missing"),
    ("push", "push", _set("deleted", "no"), "payload field deleted not a boolean (a string)"),
    ("push", "push", _set("installation.id", 2**70), "payload field installation.id out of range"),
    ("push", "push", _set("installation.id", -1), "payload field installation.id out of range (-1;"),
    (
        "push",
        "push",
        _set("installation.id", True),
        "payload field installation.id not an integer (a boolean)",
    ),
    ("push", "push", _set("installation", [1]), "payload field installation not an object (a list)"),
    ("push", "push", _set("ref", 5), "payload field ref not a string (a number)"),
    (
        "push",
        "push",
        _set("repository.full_name", "octo/../../x"),
        "payload field repository.full_name not owner/name",
    ),
    (
        "push",
        "push",
        _set("repository.full_name", "octo/fw\x00"),
        "payload field repository.full_name not valid text",
    ),
    (
        "pull_request",
        "pull_request-opened",
        _drop("pull_request.head.sha"),
        "payload field pull_request.head.sha missing",
    ),
    (
        "pull_request",
        "pull_request-opened",
        _set("pull_request.number", "7"),
        "payload field pull_request.number not an integer (a string)",
    ),
    (
        "pull_request",
        "pull_request-opened",
        _set("pull_request.number", 2**31),
        "payload field pull_request.number out of range",
    ),
    (
        "pull_request",
        "pull_request-opened",
        _set("pull_request.base", None),
        "payload field pull_request.base not an object (null)",
    ),
    ("pull_request", "pull_request-opened", _drop("pull_request"), "payload field pull_request missing"),
    ("installation", "installation-created", _drop("installation"), "payload field installation missing"),
    (
        "installation",
        "installation-created",
        _set("repositories", [{"id": "1", "full_name": REPO}]),
        "payload field repositories[0].id not an integer (a string)",
    ),
    (
        "check_run",
        "check_run-rerequested",
        _set("check_run.id", "12"),
        "payload field check_run.id not an integer (a string)",
    ),
    (
        "check_run",
        "check_run-rerequested",
        _set("check_run", "x"),
        "payload field check_run not an object (a string)",
    ),
    (
        "issue_comment",
        "issue_comment-retry",
        _set("comment.body", 5),
        "payload field comment.body not a string (a number)",
    ),
    (
        "issue_comment",
        "issue_comment-retry",
        _set("sender.login", "a/b"),
        "payload field sender.login not a GitHub login ('a/b')",
    ),
    (
        "workflow_run",
        "workflow_run-completed",
        _set("workflow_run.head_sha", 12),
        "payload field workflow_run.head_sha not a string (a number)",
    ),
    (
        "merge_group",
        "merge_group-checks_requested",
        _set("merge_group.head_sha", {"sha": OTHER_SHA}),
        "payload field merge_group.head_sha not a string (an object)",
    ),
    (
        "check_suite",
        "check_suite-rerequested",
        _set("check_suite.head_sha", "x" * 40),
        "payload field check_suite.head_sha not a commit SHA",
    ),
]


@pytest.mark.parametrize(
    ("event", "fixture", "change", "reason"),
    [pytest.param(*case, id=f"{case[1]}:{case[3].split(' ')[2]}") for case in PAYLOAD_FAULTS],
)
async def test_a_payload_missing_or_mistyping_a_field_fails_once_with_the_field_named(
    bare_harness: Harness,
    caplog: pytest.LogCaptureFixture,
    clock: FakeClock,
    event: str,
    fixture: str,
    change: Callable[[dict[str, Any]], None],
    reason: str,
) -> None:
    payload = copy.deepcopy(webhook(fixture))
    change(payload)
    assert await bare_harness.deliver(event, payload, "hostile-1") == 202
    await bare_harness.settle()
    clock.advance(3600)  # long past any retry
    await bare_harness.settle()
    delivery = await the_delivery(bare_harness)
    assert (delivery.processed, delivery.attempts) == (True, 1)
    assert (delivery.error or "").startswith(reason), delivery.error
    assert warned(caplog, "hostile-1", reason)
    no_tracebacks(caplog)
