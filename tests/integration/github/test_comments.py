"""``/kerrigan retry [workflow]`` and ``/kerrigan approve`` in pull request comments (what an approval
covers, against a fork that pushes meanwhile: ``test_approve.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.integration.github.conftest import (
    CONTRIBUTOR,
    FORK_SHA,
    MAINTAINER,
    REPO,
    SHA,
    Harness,
    check_run_name,
    comment,
    lab,
    runs_per_workflow,
    store_inventory,
    webhook,
)


def _plain_issue() -> dict[str, Any]:
    """The fixture's issue as an issue, not a pull request (no ``pull_request`` key)."""
    issue: dict[str, Any] = webhook("issue_comment-retry")["issue"]
    del issue["pull_request"]
    return issue


@pytest.fixture
async def fork_pull(harness: Harness) -> Harness:
    """Pull request #8 from mona's fork: both check runs wait for approval."""
    harness.github.add_pull(REPO, 8, head_sha=FORK_SHA, head_ref="fix-uart-timeout", fork="mona/firmware")
    await harness.deliver("pull_request", webhook("pull_request-fork"))
    await harness.settle()
    return harness


async def _comment(harness: Harness, payload: dict[str, Any]) -> None:
    assert await harness.deliver("issue_comment", payload) == 202
    await harness.settle()
    [*_, delivery] = await harness.deliveries()
    assert delivery.error is None


async def test_retry_reruns_only_the_failed_sessions_that_may_pass_and_says_why_not_the_rest(
    pull: Harness,
) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(pull, comment("/kerrigan cancel hil-smoke"))  # cancelled: failed, and may pass again
    await _comment(pull, comment("/kerrigan retry"))
    # org-class failed as unschedulable: a re-run would fail the same way, so it is left, saying why.
    assert runs_per_workflow(pull) == {"hil-smoke": 2, "org-class": 1}
    [reply] = pull.github.comments
    assert reply["body"].startswith(
        f"@{MAINTAINER} retried 1 failed session(s) at `{SHA[:12]}`; not these, which would fail the same way"
    )
    assert "- `org-class`: task regression can never be scheduled on the lab's devices" in reply["body"]
    assert "`/kerrigan retry WORKFLOW` re-runs that workflow" in reply["body"]
    assert len(pull.github.reactions) == 2  # the cancel's and the retry's


async def test_retry_with_nothing_that_may_pass_retries_nothing_and_says_why(pull: Harness) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(pull, comment("/kerrigan retry"))
    assert runs_per_workflow(pull) == {"hil-smoke": 1, "org-class": 1}
    [reply] = pull.github.comments
    assert reply["body"].startswith(f"@{MAINTAINER} retried 0 failed session(s)")
    assert "- `org-class`: task regression can never be scheduled" in reply["body"]
    assert pull.github.reactions == []


async def test_retry_decides_against_todays_inventory_not_the_one_the_session_saw(pull: Harness) -> None:
    # The admin adds a board with purpose=ci to the SDK 2.2.0 SoM pool: org-class's task has a device now.
    before = lab()
    pool = next(p for p in before.pools if p.id == "sdk-2-2-som")
    ci_pool = dataclasses.replace(pool, labels={**pool.labels, "purpose": "ci"})
    after = dataclasses.replace(before, pools=tuple(ci_pool if p.id == pool.id else p for p in before.pools))
    await store_inventory(pull.database, before, after)
    pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(pull, comment("/kerrigan retry"))
    assert runs_per_workflow(pull) == {"hil-smoke": 1, "org-class": 2}
    assert pull.github.comments == []
    assert len(pull.github.reactions) == 1


async def test_retry_naming_a_workflow_reruns_that_workflow(pull: Harness) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(pull, comment("/kerrigan retry hil-smoke"))
    assert runs_per_workflow(pull) == {"hil-smoke": 2, "org-class": 1}


async def test_retry_starts_fresh_sessions_for_the_same_commit(pull: Harness) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(pull, comment("/kerrigan retry org-class"))
    sessions = await pull.sessions(workflow="org-class")
    assert len({s.id for s in sessions}) == 2
    assert {(s.head_sha, s.pull_request) for s in sessions} == {(SHA, 7)}
    assert {s.check_run_id for s in sessions} == {
        r["id"] for r in pull.github.runs_named("kerrigan / org-class")
    }


@pytest.mark.parametrize("permission", ["write", "maintain", "admin"])
async def test_commands_are_carried_out_for_commenters_with_write_access_or_more(
    pull: Harness, permission: str
) -> None:
    pull.github.set_permission(REPO, MAINTAINER, permission)
    await _comment(pull, comment("/kerrigan retry org-class"))
    assert runs_per_workflow(pull)["org-class"] == 2
    assert pull.github.comments == []


@pytest.mark.parametrize("permission", ["read", "triage", None], ids=["read", "triage", "none"])
async def test_commenter_without_write_access_gets_a_reply_saying_why_and_nothing_reruns(
    pull: Harness, permission: str | None
) -> None:
    if permission is not None:
        pull.github.set_permission(REPO, CONTRIBUTOR, permission)
    await _comment(pull, comment("/kerrigan retry", login=CONTRIBUTOR))
    [reply] = pull.github.comments
    assert reply["issue"] == 7
    assert reply["body"].startswith(
        f"@{CONTRIBUTOR} `/kerrigan retry` needs write, maintain or admin permission"
    )
    assert "; you have " in reply["body"]
    assert runs_per_workflow(pull) == {"hil-smoke": 1, "org-class": 1}
    assert pull.github.reactions == []


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            comment("/kerrigan retry", login="kerrigan-ci[bot]")
            | {"sender": {**webhook("push")["sender"], "login": "kerrigan-ci[bot]", "type": "Bot"}},
            id="bot",
        ),
        pytest.param(
            comment("/kerrigan retry", action="edited", changes={"body": {"from": "/kerrigan retyr"}}),
            id="edited",
        ),
        pytest.param(
            comment("/kerrigan retry", issue=_plain_issue()),
            id="issue-not-pull-request",
        ),
        pytest.param(comment("Thanks! /kerrigan retry later maybe"), id="not-a-command"),
    ],
)
async def test_comment_that_is_not_a_command_to_carry_out_is_ignored(
    pull: Harness, payload: dict[str, Any]
) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "admin")
    pull.github.set_permission(REPO, "kerrigan-ci[bot]", "write")
    requests_before = len(pull.github.requests)
    await _comment(pull, payload)
    assert pull.github.requests[requests_before:] == []
    assert runs_per_workflow(pull) == {"hil-smoke": 1, "org-class": 1}


async def test_successful_retry_gets_a_reaction(pull: Harness) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    payload = comment("/kerrigan retry org-class")
    await _comment(pull, payload)
    assert [(r["comment"], r["content"]) for r in pull.github.reactions] == [
        (payload["comment"]["id"], "rocket")
    ]


async def test_successful_approve_gets_a_reaction(fork_pull: Harness) -> None:
    fork_pull.github.set_permission(REPO, MAINTAINER, "maintain")
    payload = comment("/kerrigan approve", number=8)
    await _comment(fork_pull, payload)
    assert [(r["comment"], r["content"]) for r in fork_pull.github.reactions] == [
        (payload["comment"]["id"], "rocket")
    ]


async def test_approve_by_a_writer_resolves_the_waiting_check_runs(fork_pull: Harness) -> None:
    fork_pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(fork_pull, comment("/kerrigan approve", number=8))
    [smoke] = fork_pull.github.runs_named(check_run_name("hil-smoke"))
    [org_class] = fork_pull.github.runs_named(check_run_name("org-class"))
    assert (smoke["status"], smoke["output"]["title"]) == (
        "queued",
        "Queued: 2 tasks ready to start on free devices, queue position 1",
    )
    assert (org_class["status"], org_class["conclusion"]) == ("completed", "failure")
    assert smoke["updates"] >= 1
    assert org_class["updates"] >= 1


async def test_approve_by_a_writer_lets_the_sessions_run(fork_pull: Harness) -> None:
    fork_pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(fork_pull, comment("/kerrigan approve", number=8))
    sessions = await fork_pull.sessions(head_sha=FORK_SHA)
    assert [(s.workflow, s.awaiting_approval) for s in sessions] == [
        ("hil-smoke", False),
        ("org-class", False),
    ]
    assert all(s.resolution.recorded for s in sessions)


async def test_approve_by_a_reader_leaves_the_check_runs_waiting(fork_pull: Harness) -> None:
    fork_pull.github.set_permission(REPO, CONTRIBUTOR, "read")
    await _comment(fork_pull, comment("/kerrigan approve", number=8, login=CONTRIBUTOR))
    [reply] = fork_pull.github.comments
    assert "`/kerrigan approve` needs write, maintain or admin permission" in reply["body"]
    runs = fork_pull.github.check_runs.values()
    assert {(r["status"], r["output"]["title"], r["updates"]) for r in runs} == {
        ("queued", "Waiting for approval to run on lab hardware", 0)
    }


async def test_a_forks_sessions_get_secrets_only_when_the_approval_says_so(harness: Harness) -> None:
    # Before approval and after a plain one, none; after /kerrigan approve secrets, theirs; a branch's
    # own pull request has them from the start.
    await _pull_fixture_sessions(harness)
    own = await harness.sessions(head_sha=SHA)
    assert own
    assert all(session.secrets_allowed for session in own)
    harness.github.add_pull(REPO, 8, head_sha=FORK_SHA, head_ref="fix-uart-timeout", fork="mona/firmware")
    await harness.deliver("pull_request", webhook("pull_request-fork"))
    await harness.settle()
    harness.github.set_permission(REPO, MAINTAINER, "write")
    assert [s.secrets_allowed for s in await harness.sessions(head_sha=FORK_SHA)] == [False, False]
    await _comment(harness, comment("/kerrigan approve secrets", number=8))
    approved = await harness.sessions(head_sha=FORK_SHA)
    assert [(s.awaiting_approval, s.secrets_allowed) for s in approved] == [(False, True), (False, True)]


async def test_a_plain_approve_runs_a_fork_without_secrets_and_a_wrong_word_is_answered(
    fork_pull: Harness,
) -> None:
    fork_pull.github.set_permission(REPO, MAINTAINER, "write")
    await _comment(fork_pull, comment("/kerrigan approve everything", number=8))
    [reply] = fork_pull.github.comments
    assert "`/kerrigan approve` takes the commit to run (its sha, at least 7 characters)" in reply["body"]
    assert all(s.awaiting_approval for s in await fork_pull.sessions(head_sha=FORK_SHA))
    again = comment("/kerrigan approve", number=8)  # written after the reply, which changed the pull request
    again["comment"].update(id=again["comment"]["id"] + 1, created_at=reply["created_at"])
    await _comment(fork_pull, again)
    sessions = await fork_pull.sessions(head_sha=FORK_SHA)
    assert [(s.awaiting_approval, s.secrets_allowed) for s in sessions] == [(False, False), (False, False)]


async def _pull_fixture_sessions(harness: Harness) -> None:
    harness.github.add_pull(REPO, 7, head_sha=SHA, head_ref="uart-loopback")
    await harness.deliver("pull_request", webhook("pull_request-opened"))
    await harness.settle()


async def test_a_retry_of_a_long_unknown_argument_is_answered_with_it_cut(pull: Harness) -> None:
    pull.github.set_permission(REPO, MAINTAINER, "write")
    argument = "`x" * 32_000  # the comment as long as GitHub allows; quoted whole, the reply would not be
    await _comment(pull, comment(f"/kerrigan retry {argument}"))
    [reply] = pull.github.comments
    assert reply["body"] == (
        f"@{MAINTAINER} there is no workflow `{argument[:100].replace('`', chr(39))}`… (cut) to retry "
        f"at `{SHA[:12]}`."
    )
    assert runs_per_workflow(pull) == {"hil-smoke": 1, "org-class": 1}
