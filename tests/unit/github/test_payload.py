"""The typed accessor of webhook payloads: a missing or mistyped field is a PayloadError naming it."""

from __future__ import annotations

from typing import Any

import pytest

from kerrigan.github.payload import MAX_ID, Payload, PayloadError
from kerrigan.github.webhooks import MAX_DEPTH, nesting_exceeds, read_payload

SHA = "c7e2a9d1f04b3e6a8d5c2b1f9e07a4d3c6b8e512"
DATA: dict[str, Any] = {
    "pull_request": {"head": {"sha": SHA, "ref": None}, "number": 7, "labels": [{"id": 1}, "x"]},
    "repository": "octo/firmware",
    "deleted": False,
    "id": 2**70,
    "flag": True,
    "text": "a\x00b",
}


def test_nested_fields_are_read_with_their_types() -> None:
    pull = Payload(DATA).object("pull_request")
    assert (pull.object("head").sha("sha"), pull.integer("number")) == (SHA, 7)
    assert pull.object("head").optional_string("ref") is None
    assert Payload(DATA).optional_boolean("deleted") is False
    assert Payload(DATA).optional_object("installation") is None


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (lambda p: p.object("pull_request").object("base"), "payload field pull_request.base missing"),
        (
            lambda p: p.object("pull_request").object("head").string("ref"),
            "payload field pull_request.head.ref not a string (null)",
        ),
        (lambda p: p.object("repository"), "payload field repository not an object (a string)"),
        (lambda p: p.optional_object("repository"), "payload field repository not an object (a string)"),
        (
            lambda p: p.object("pull_request").string("number"),
            "payload field pull_request.number not a string (a number)",
        ),
        (lambda p: p.integer("flag"), "payload field flag not an integer (a boolean)"),
        (lambda p: p.integer("id"), f"payload field id out of range (71 bits long; 0 to {MAX_ID})"),
        (
            lambda p: p.object("pull_request").integer("number", maximum=5),
            "payload field pull_request.number out of range (7; 0 to 5)",
        ),
        (lambda p: p.optional_boolean("repository"), "payload field repository not a boolean (a string)"),
        (lambda p: p.string("text"), "payload field text not valid text (NUL or a lone surrogate)"),
        (
            lambda p: p.string("repository", max_length=5),
            "payload field repository too long (13 characters; at most 5)",
        ),
        (lambda p: p.sha("repository"), "payload field repository not a commit SHA ('octo/firmware')"),
        (
            lambda p: p.object("pull_request").objects("labels"),
            "payload field pull_request.labels[1] not an object (a string)",
        ),
        (lambda p: p.objects("repository"), "payload field repository not a list (a string)"),
    ],
)
def test_a_missing_or_mistyped_field_is_an_error_naming_it(read: Any, message: str) -> None:
    with pytest.raises(PayloadError) as raised:
        read(Payload(DATA))
    assert str(raised.value) == message


def test_a_lone_surrogate_is_not_text() -> None:
    with pytest.raises(PayloadError, match="login not valid text"):
        Payload({"login": "a\ud800"}).string("login")


def test_a_payload_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(PayloadError, match=r"^payload not an object \(a list\)$"):
        Payload([1])


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        ("[" * MAX_DEPTH + "]" * MAX_DEPTH, False),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), True),
        ('{"a": "' + "[" * 1000 + '"}', False),  # brackets inside a string do not count
        ('{"a": "\\"' + "[" * 1000 + '"}', False),  # nor after an escaped quote
        ("[" * 100 + "]" * 100 + "[" * 10, True),
        ("[]" * 10_000, False),
    ],
)
def test_nesting_is_measured_without_parsing_strings_or_recursing(text: str, deep: bool) -> None:
    assert nesting_exceeds(text, MAX_DEPTH) is deep


def test_a_payload_is_read_with_its_action() -> None:
    assert read_payload(b'{"action": "opened", "number": 1}') == ({"action": "opened", "number": 1}, "opened")
