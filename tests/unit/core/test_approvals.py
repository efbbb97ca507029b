"""Which commit a ``/kerrigan approve`` comment approves: the grammar, and the head it covers for certain."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kerrigan.core.approvals import (
    ApproveCommand,
    Approved,
    PullHead,
    Refusal,
    Refused,
    decide,
    read_approve,
    unchanged_since,
)

A = "a" * 40
B = "b" * 40
TWIN = "a" * 7 + "f" * 33


def at(clock: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-29T{clock}+00:00").astimezone(UTC)


COMMENTED = at("12:20:05")
QUIET = PullHead(A, updated_at=COMMENTED, pushed_at=at("12:00:00"))  # nothing happened after the comment


@pytest.mark.parametrize(
    ("argument", "command"),
    [
        ("", ApproveCommand()),
        ("secrets", ApproveCommand(None, secrets=True)),
        (A, ApproveCommand(A)),
        (A.upper(), ApproveCommand(A)),
        ("AbCdEf1", ApproveCommand("abcdef1")),
        (f"{A} secrets", ApproveCommand(A, secrets=True)),
        (f"  {A}\tsecrets ", ApproveCommand(A, secrets=True)),
    ],
)
def test_the_grammar_is_an_optional_sha_then_an_optional_secrets(
    argument: str, command: ApproveCommand
) -> None:
    assert read_approve(argument) == command


@pytest.mark.parametrize(
    "argument",
    [
        f"secrets {A}",  # one order only
        "abcdef",  # 6 digits: too short to name a commit
        A + "0",  # 41
        "abcdefg",  # not hex
        f"{A} {B}",
        "secrets secrets",
        "Secrets",
        f"{A} secret",
        "everything",
        "a\u0661b2c3d4",  # a digit of another script
    ],
)
def test_anything_else_is_not_an_approval(argument: str) -> None:
    assert read_approve(argument) is None


def test_a_full_sha_approves_the_head_it_names_whatever_happened_since() -> None:
    busy = PullHead(A, updated_at=at("13:00:00"), pushed_at=at("12:59:00"))
    assert decide(ApproveCommand(A), busy, COMMENTED) == Approved(A)


def test_a_sha_that_is_not_the_head_approves_nothing_and_names_the_head() -> None:
    head = PullHead(B, updated_at=COMMENTED, pushed_at=at("12:00:00"))
    assert decide(ApproveCommand(A), head, COMMENTED, seen={A}) == Refused(Refusal.MOVED, B, A)
    assert decide(ApproveCommand(A[:9]), head, COMMENTED, seen={A}) == Refused(Refusal.MOVED, B, A)
    assert decide(ApproveCommand(A[:9]), head, COMMENTED) == Refused(Refusal.MOVED, B, None)


def test_a_bare_approval_covers_the_head_when_nothing_changed_after_the_comment() -> None:
    assert decide(ApproveCommand(), QUIET, COMMENTED) == Approved(A)


@pytest.mark.parametrize(
    "head",
    [
        pytest.param(PullHead(A, updated_at=at("12:20:06"), pushed_at=at("12:20:06")), id="pushed-after"),
        pytest.param(PullHead(A, updated_at=COMMENTED, pushed_at=COMMENTED), id="pushed-in-its-second"),
        pytest.param(PullHead(A, updated_at=at("12:21:00"), pushed_at=at("12:00:00")), id="changed-after"),
        pytest.param(PullHead(A, updated_at=None, pushed_at=at("12:00:00")), id="no-updated-at"),
        pytest.param(PullHead(A, updated_at=COMMENTED, pushed_at=None), id="fork-gone"),
    ],
)
def test_a_bare_approval_covers_nothing_unless_the_head_certainly_did_not_move(head: PullHead) -> None:
    assert decide(ApproveCommand(), head, COMMENTED) == Refused(Refusal.CHANGED, A)
    assert decide(ApproveCommand(A[:7]), head, COMMENTED) == Refused(Refusal.CHANGED, A)


def test_a_comment_of_unknown_time_is_never_certain() -> None:
    assert not unchanged_since(QUIET, None)
    assert decide(ApproveCommand(A), QUIET, None) == Approved(A)  # a whole sha needs no time


def test_fractions_of_a_second_do_not_make_a_push_in_the_comments_second_earlier() -> None:
    head = PullHead(A, updated_at=COMMENTED, pushed_at=COMMENTED.replace(microsecond=1))
    assert not unchanged_since(head, COMMENTED.replace(microsecond=900_000))


def test_an_abbreviated_sha_that_begins_another_seen_commit_is_ambiguous() -> None:
    head = PullHead(TWIN, updated_at=COMMENTED, pushed_at=at("12:00:00"))
    assert decide(ApproveCommand(A[:7]), head, COMMENTED, seen={A, TWIN}) == Refused(Refusal.AMBIGUOUS, TWIN)
    assert decide(ApproveCommand(A[:7]), head, COMMENTED, seen={A}) == Refused(Refusal.AMBIGUOUS, TWIN)
    assert decide(ApproveCommand(A[:7]), head, COMMENTED, seen={TWIN}) == Approved(TWIN)
