"""``/kerrigan approve [SHA] [secrets]``: an approval covers the commit the writer saw, never a later one.

GitHub's ``issue_comment`` payload names no commit, so a fork that pushes between a writer's comment and
Kerrigan's reading of it would otherwise run code nobody reviewed. These tests push that commit, through the
stand-in (which moves the pull request's ``updated_at`` and the fork's ``pushed_at`` as GitHub does) and
through real webhooks, and replay comments the way a redelivery does.
"""

from __future__ import annotations

from typing import Any

import pytest

from kerrigan.core.sessions import Session
from tests.integration.github.conftest import (
    FORK_SHA,
    REPO,
    Harness,
    manifest_files,
    webhook,
)

WRITER = "octocat"
FORK = "mona/firmware"
NUMBER = 8
COMMENTED = "2026-11-29T12:20:05Z"  # when the writer wrote the comment (the fixture's created_at)
PUSHED_AFTER = "2026-11-29T12:20:30Z"  # the fork pushed after the comment
LATER = "2026-11-29T12:25:00Z"  # a later comment
PUSHED_LATER = "2026-11-29T12:30:00Z"
B = "b0b0b0b0c1c1c1c1d2d2d2d2e3e3e3e3f4f4f4f4"  # the fork's second commit
C = "c0c0c0c0c1c1c1c1d2d2d2d2e3e3e3e3f4f4f4f4"  # and its third
TWIN = FORK_SHA[:7] + "f" * 33  # a commit made to share FORK_SHA's first 7 characters


def approve_comment(
    body: str = "/kerrigan approve", *, comment_id: int = 1843000551, created_at: str = COMMENTED
) -> dict[str, Any]:
    """``fixtures/webhooks/issue_comment-retry.json`` as the writer's comment on the fork's pull request."""
    payload = webhook("issue_comment-retry")
    payload["comment"].update(body=body, id=comment_id, created_at=created_at, updated_at=created_at)
    payload["issue"]["number"] = NUMBER
    for user in (payload["sender"], payload["comment"]["user"]):
        user["login"] = WRITER
    return payload


async def deliver(
    harness: Harness, event: str, payload: dict[str, Any], delivery_id: str | None = None
) -> None:
    assert await harness.deliver(event, payload, delivery_id) == 202
    await harness.settle()
    [*_, delivery] = await harness.deliveries()
    assert delivery.error is None


async def push(harness: Harness, sha: str, at: str, *, delivered: bool = True) -> None:
    """The fork pushes ``sha`` ``at``; GitHub sends ``synchronize`` unless ``delivered`` is False (it is
    on its way, and Kerrigan has not seen it yet)."""
    harness.github.add_commit(REPO, sha, manifest_files())
    harness.github.push_to_pull(REPO, NUMBER, sha, at=at)
    if delivered:
        payload = webhook("pull_request-fork") | {"action": "synchronize"}
        payload["pull_request"]["head"]["sha"] = sha
        payload["pull_request"]["updated_at"] = at
        await deliver(harness, "pull_request", payload)


async def waiting(harness: Harness, sha: str) -> list[bool]:
    return [s.awaiting_approval for s in await harness.sessions(head_sha=sha)]


def approved(sessions: list[Session]) -> bool:
    return bool(sessions) and all(not s.awaiting_approval and s.resolution.recorded for s in sessions)


@pytest.fixture
async def fork_pull(harness: Harness) -> Harness:
    """Pull request #8 from mona's fork at FORK_SHA, opened long before the comments: both check runs wait
    for approval; octocat may write."""
    harness.github.add_pull(REPO, NUMBER, head_sha=FORK_SHA, head_ref="fix-uart-timeout", fork=FORK)
    harness.github.set_permission(REPO, WRITER, "write")
    await deliver(harness, "pull_request", webhook("pull_request-fork"))
    assert await waiting(harness, FORK_SHA) == [True, True]
    return harness


async def test_a_plain_approve_runs_the_head_it_was_written_on_and_the_reply_names_it(
    fork_pull: Harness,
) -> None:
    payload = approve_comment()
    await deliver(fork_pull, "issue_comment", payload)
    assert approved(await fork_pull.sessions(head_sha=FORK_SHA))
    [reply] = fork_pull.github.comments
    assert reply["body"].startswith(f"@{WRITER} approved `{FORK_SHA}` to run on lab hardware")
    assert [r["comment"] for r in fork_pull.github.reactions] == [payload["comment"]["id"]]


@pytest.mark.parametrize("delivered", [True, False], ids=["synchronize-seen", "synchronize-on-its-way"])
async def test_a_push_between_the_comment_and_its_processing_runs_nothing_and_the_reply_says_so(
    fork_pull: Harness, delivered: bool
) -> None:
    # The writer reviewed FORK_SHA and commented; the fork pushed B before Kerrigan read the comment.
    await push(fork_pull, B, PUSHED_AFTER, delivered=delivered)
    await deliver(fork_pull, "issue_comment", approve_comment())
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    assert all(await waiting(fork_pull, B))
    [reply] = fork_pull.github.comments
    assert reply["body"].startswith(f"@{WRITER} this pull request changed after your comment")
    assert f"Its head is now `{B}`: review it and comment `/kerrigan approve {B}`" in reply["body"]
    assert fork_pull.github.reactions == []


async def test_a_plain_approve_in_the_second_of_a_push_is_not_taken_for_certain(fork_pull: Harness) -> None:
    # GitHub's times are whole seconds: a push in the comment's own second may have come after it.
    await push(fork_pull, B, COMMENTED)
    await deliver(fork_pull, "issue_comment", approve_comment())
    assert all(await waiting(fork_pull, B))
    [reply] = fork_pull.github.comments
    assert "changed after your comment" in reply["body"]


async def test_a_plain_approve_after_another_change_to_the_pull_request_asks_for_the_commit(
    fork_pull: Harness,
) -> None:
    # Not a push, only another comment: Kerrigan cannot tell the two apart, so it asks rather than guess.
    await deliver(fork_pull, "issue_comment", approve_comment("/kerrigan approve nonsense"))
    assert len(fork_pull.github.comments) == 1  # its reply moved the pull request's updated_at
    await deliver(fork_pull, "issue_comment", approve_comment(comment_id=1843000552))
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    assert f"comment `/kerrigan approve {FORK_SHA}`" in fork_pull.github.comments[-1]["body"]


@pytest.mark.parametrize("named", [B, B[:7], B[:12].upper()], ids=["full", "7", "12-upper"])
async def test_approve_naming_the_current_head_runs_it(fork_pull: Harness, named: str) -> None:
    await push(fork_pull, B, PUSHED_AFTER)
    await deliver(fork_pull, "issue_comment", approve_comment(f"/kerrigan approve {named}", created_at=LATER))
    assert approved(await fork_pull.sessions(head_sha=B))
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    [reply] = fork_pull.github.comments
    assert reply["body"].startswith(f"@{WRITER} approved `{B}` to run on lab hardware")
    assert "without the repository's secrets" in reply["body"]


async def test_approve_naming_a_commit_the_head_moved_from_runs_nothing_and_names_both(
    fork_pull: Harness,
) -> None:
    await push(fork_pull, B, PUSHED_AFTER)
    await deliver(fork_pull, "issue_comment", approve_comment(f"/kerrigan approve {FORK_SHA[:10]}"))
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    assert all(await waiting(fork_pull, B))
    [reply] = fork_pull.github.comments
    assert reply["body"] == (
        f"@{WRITER} the head of this pull request moved from `{FORK_SHA}` to `{B}`: review `{B}` and "
        f"comment `/kerrigan approve {B}` to run it."
    )


async def test_approve_naming_no_commit_of_the_pull_request_runs_nothing(fork_pull: Harness) -> None:
    await deliver(fork_pull, "issue_comment", approve_comment("/kerrigan approve 1234567"))
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    [reply] = fork_pull.github.comments
    assert reply["body"].startswith(f"@{WRITER} `1234567` is not the head of this pull request; its head is")


async def test_an_abbreviated_sha_that_two_commits_share_is_refused(fork_pull: Harness) -> None:
    # The fork made a commit whose sha begins as the reviewed one does, and pushed it after the comment.
    await push(fork_pull, TWIN, PUSHED_AFTER)
    await deliver(
        fork_pull, "issue_comment", approve_comment(f"/kerrigan approve {FORK_SHA[:7]}", created_at=LATER)
    )
    assert all(await waiting(fork_pull, TWIN))
    [reply] = fork_pull.github.comments
    assert f"`{FORK_SHA[:7]}` could name more than one commit" in reply["body"]
    assert f"`/kerrigan approve {TWIN}`" in reply["body"]


async def test_a_replayed_approval_approves_nothing_new(fork_pull: Harness) -> None:
    # Approved at B; the fork pushes C; the same comment arrives again under a new delivery id.
    await push(fork_pull, B, PUSHED_AFTER)
    payload = approve_comment(f"/kerrigan approve {B}", created_at=LATER)
    await deliver(fork_pull, "issue_comment", payload, delivery_id="first")
    assert approved(await fork_pull.sessions(head_sha=B))
    await push(fork_pull, C, PUSHED_LATER)
    replies = len(fork_pull.github.comments)
    await deliver(fork_pull, "issue_comment", payload, delivery_id="replayed")
    assert all(await waiting(fork_pull, C))
    assert len(fork_pull.github.comments) == replies


async def test_a_replayed_approval_does_not_approve_new_sessions_at_the_same_commit(
    fork_pull: Harness,
) -> None:
    # Reopening the pull request starts new sessions at the approved commit: they wait for a new approval,
    # and the old comment, sent again, is not one.
    payload = approve_comment(f"/kerrigan approve {FORK_SHA}")
    await deliver(fork_pull, "issue_comment", payload, delivery_id="first")
    reopened = webhook("pull_request-fork") | {"action": "reopened"}
    await deliver(fork_pull, "pull_request", reopened, delivery_id="reopened")
    assert await waiting(fork_pull, FORK_SHA) == [False, False, True, True]
    await deliver(fork_pull, "issue_comment", payload, delivery_id="replayed")
    assert await waiting(fork_pull, FORK_SHA) == [False, False, True, True]


async def test_a_replayed_plain_approval_after_a_push_approves_nothing(fork_pull: Harness) -> None:
    payload = approve_comment()
    await deliver(fork_pull, "issue_comment", payload, delivery_id="first")
    await push(fork_pull, C, PUSHED_LATER)
    await deliver(fork_pull, "issue_comment", payload, delivery_id="replayed")
    assert all(await waiting(fork_pull, C))


@pytest.mark.parametrize("body", ["/kerrigan approve {sha} secrets", "/kerrigan approve secrets"])
async def test_secrets_come_last_with_or_without_a_sha(fork_pull: Harness, body: str) -> None:
    await deliver(fork_pull, "issue_comment", approve_comment(body.format(sha=FORK_SHA)))
    sessions = await fork_pull.sessions(head_sha=FORK_SHA)
    assert [(s.awaiting_approval, s.secrets_allowed) for s in sessions] == [(False, True), (False, True)]
    [reply] = fork_pull.github.comments
    assert "with the repository secrets their tasks name" in reply["body"]


@pytest.mark.parametrize(
    "argument",
    ["secrets {sha}", "{sha} {sha}", "everything", "e41d7c", "{sha}0", "{sha} secret", "secrets secrets"],
)
async def test_any_other_argument_is_answered_with_the_grammar_and_approves_nothing(
    fork_pull: Harness, argument: str
) -> None:
    await deliver(
        fork_pull, "issue_comment", approve_comment(f"/kerrigan approve {argument.format(sha=FORK_SHA)}")
    )
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
    [reply] = fork_pull.github.comments
    assert "`/kerrigan approve` takes the commit to run (its sha, at least 7 characters)" in reply["body"]


async def test_an_edited_approve_comment_is_ignored(fork_pull: Harness) -> None:
    payload = approve_comment() | {"action": "edited", "changes": {"body": {"from": "LGTM"}}}
    before = len(fork_pull.github.requests)
    await deliver(fork_pull, "issue_comment", payload)
    assert fork_pull.github.requests[before:] == []
    assert await waiting(fork_pull, FORK_SHA) == [True, True]
