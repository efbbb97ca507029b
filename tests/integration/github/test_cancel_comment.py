"""``/kerrigan cancel [workflow]`` on a pull request: its sessions at the head commit that have not ended
are cancelled for writers; others get a reply and nothing changes."""

from __future__ import annotations

import pytest

from kerrigan.core.sessions import SessionState
from tests.integration.github.conftest import CONTRIBUTOR, MAINTAINER, SHA, Harness, check_run_name, comment


async def said(harness: Harness, body: str, login: str = MAINTAINER) -> dict[str, object]:
    """Comment ``body`` on pull request #7 and wait for it to be carried out; the comment's payload."""
    payload = comment(body, login=login)
    assert await harness.deliver("issue_comment", payload) == 202
    await harness.settle()
    [*_, delivery] = await harness.deliveries()
    assert delivery.error is None
    return payload


def conclusion(harness: Harness, workflow: str) -> tuple[str, str | None]:
    [run] = harness.github.runs_named(check_run_name(workflow))
    return run["status"], run.get("conclusion")


@pytest.mark.parametrize("body", ["/kerrigan cancel", "/kerrigan cancel hil-smoke"])
async def test_cancel_ends_the_queued_session_and_the_check_run_completes_cancelled(
    pull: Harness, body: str
) -> None:
    pull.github.set_permission("octo/firmware", MAINTAINER, "write")
    failed_before = conclusion(pull, "org-class")

    payload = await said(pull, body)

    [smoke] = await pull.sessions(head_sha=SHA, workflow="hil-smoke")
    assert (smoke.state, smoke.conclusion) == (SessionState.COMPLETED, "cancelled")
    assert conclusion(pull, "hil-smoke") == ("completed", "cancelled")
    assert conclusion(pull, "org-class") == failed_before  # an ended session is left alone
    assert [(r["comment"], r["content"]) for r in pull.github.reactions] == [
        (payload["comment"]["id"], "rocket")  # type: ignore[index]
    ]


async def test_cancel_naming_a_workflow_that_has_ended_replies_and_changes_nothing(pull: Harness) -> None:
    pull.github.set_permission("octo/firmware", MAINTAINER, "write")

    await said(pull, "/kerrigan cancel org-class")

    [reply] = pull.github.comments
    assert "there is no running or queued workflow `org-class`" in reply["body"]
    [smoke] = await pull.sessions(head_sha=SHA, workflow="hil-smoke")
    assert smoke.state is not SessionState.COMPLETED
    assert not pull.github.reactions


async def test_cancel_by_a_reader_gets_a_reply_and_nothing_is_cancelled(pull: Harness) -> None:
    pull.github.set_permission("octo/firmware", CONTRIBUTOR, "read")

    await said(pull, "/kerrigan cancel", login=CONTRIBUTOR)

    [reply] = pull.github.comments
    assert f"@{CONTRIBUTOR} `/kerrigan cancel` needs write, maintain or admin permission" in reply["body"]
    [smoke] = await pull.sessions(head_sha=SHA, workflow="hil-smoke")
    assert smoke.state is not SessionState.COMPLETED
    assert conclusion(pull, "hil-smoke")[0] != "completed"


async def test_a_long_workflow_name_is_cut_short_in_the_reply(pull: Harness) -> None:
    pull.github.set_permission("octo/firmware", MAINTAINER, "write")

    await said(pull, "/kerrigan cancel " + "x" * 5000)

    [reply] = pull.github.comments
    assert len(reply["body"]) < 300
