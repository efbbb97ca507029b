"""The manifest's ``concurrency`` and ``retry``: defaults, expansion, and every wrong shape reported on its
line."""

from __future__ import annotations

import pytest

from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.core.manifest import CancelInProgress, Concurrency, parse_manifest

HEAD = "name: hil\non: push\n"
TASKS = "tasks: [{id: a, run: ./a.sh}]\n"


def _errors(block: str) -> list[tuple[int, str, str]]:
    result = parse_manifest(HEAD + block + TASKS, "w.yml")
    assert result.workflow is None
    return [(p.line, p.field, p.message) for p in result.errors]


def test_defaults_are_the_workflow_and_branch_group_cancelling_queued_and_two_infrastructure_retries() -> (
    None
):
    workflow = parse_manifest(HEAD + TASKS, "w.yml").workflow
    assert workflow is not None
    assert workflow.concurrency == Concurrency("{workflow}/{branch}", CancelInProgress.QUEUED)
    assert workflow.retry == RetryPolicy(2, frozenset(), 0, suspect=1)
    assert workflow.retry.max_attempts == 3


@pytest.mark.parametrize(
    ("written", "suspect"), [("{suspect: 0}", 0), ("{suspect: 2}", 2), ("{limit: 0}", 1)]
)
def test_retry_suspect_is_read_one_by_default_and_zero_turns_it_off(written: str, suspect: int) -> None:
    workflow = parse_manifest(HEAD + f"retry: {written}\n" + TASKS, "w.yml").workflow
    assert workflow is not None
    assert workflow.retry.suspect == suspect


def test_written_concurrency_and_retry_are_read() -> None:
    block = (
        'concurrency: {group: "{workflow}-{sha}", cancel: in_progress}\n'
        "retry: {infrastructure: 0, exit_status: [3, 42, 3], limit: 1}\n"
    )
    workflow = parse_manifest(HEAD + block + TASKS, "w.yml").workflow
    assert workflow is not None
    assert workflow.concurrency == Concurrency("{workflow}-{sha}", CancelInProgress.IN_PROGRESS)
    assert workflow.retry == RetryPolicy(0, frozenset({3, 42}), 1)


@pytest.mark.parametrize(
    ("branch", "pull_request", "expected"),
    [("main", None, "hil/main"), ("main", 7, "hil/pull/7"), (None, None, "hil/")],
)
def test_group_expands_a_pull_requests_branch_as_its_own_line(
    branch: str | None, pull_request: int | None, expected: str
) -> None:
    assert (
        Concurrency().expand(workflow="hil", branch=branch, pull_request=pull_request, sha="f" * 40)
        == expected
    )


def test_every_placeholder_expands_and_text_around_them_stays() -> None:
    group = Concurrency("x {workflow} {branch} {pull_request} {sha} {")
    assert group.expand(workflow="w", branch="b", pull_request=None, sha="abc") == "x w b  abc {"


def test_an_expanded_group_is_cut_to_what_is_stored() -> None:
    assert (
        len(Concurrency("{branch}").expand(workflow="w", branch="b" * 400, pull_request=None, sha="s")) == 300
    )


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            'concurrency: {group: "{workflow}/{ref}"}\n',
            (3, "concurrency.group", "unknown placeholder '{ref}'"),
        ),
        ("concurrency: {group: [a]}\n", (3, "concurrency.group", "must be a string, not a list")),
        ("concurrency: {group: 12}\n", None),  # a number written is its text: a valid group
        (f"concurrency: {{group: {'g' * 301}}}\n", (3, "concurrency.group", "must be 1-300 printable")),
        (
            "concurrency: {cancel: always}\n",
            (3, "concurrency.cancel", "must be one of queued, in_progress, none"),
        ),
        ("concurrency: {groups: a}\n", (3, "concurrency.groups", "unknown key 'groups'")),
        ("concurrency: queued\n", (3, "concurrency", "must be a mapping")),
        ("retry: 2\n", (3, "retry", "must be a mapping")),
        ("retry: {infrastructure: 6}\n", (3, "retry.infrastructure", "must be 0 to 5, not 6")),
        ("retry: {infrastructure: -1}\n", (3, "retry.infrastructure", "must be 0 to 5")),
        ("retry: {infrastructure: 1.5}\n", (3, "retry.infrastructure", "must be a whole number")),
        ("retry: {limit: yes}\n", (3, "retry.limit", "must be a whole number")),
        ("retry: {exit_status: 3, limit: 1}\n", (3, "retry.exit_status", "must be a list")),
        ("retry: {exit_status: [0], limit: 1}\n", (3, "retry.exit_status[0]", "must be 1 to 255, not 0")),
        ("retry: {exit_status: [256], limit: 1}\n", (3, "retry.exit_status[0]", "must be 1 to 255")),
        ("retry: {exit_status: [3]}\n", (3, "retry.exit_status", "retry.limit is 0")),
        ("retry: {attempts: 3}\n", (3, "retry.attempts", "unknown key 'attempts'")),
        ("retry: {suspect: 6}\n", (3, "retry.suspect", "must be 0 to 5, not 6")),
        ("retry: {suspect: -1}\n", (3, "retry.suspect", "must be 0 to 5")),
        ("retry: {suspect: yes}\n", (3, "retry.suspect", "must be a whole number")),
    ],
)
def test_a_wrong_shape_is_an_error_on_its_line(block: str, expected: tuple[int, str, str] | None) -> None:
    result = parse_manifest(HEAD + block + TASKS, "w.yml")
    if expected is None:
        assert result.ok, result.errors
        return
    line, field, message = expected
    found = [(p.line, p.field, p.message) for p in result.errors]
    assert any(
        (p_line, p_field) == (line, field) and message in p_message for p_line, p_field, p_message in found
    ), found


def test_errors_of_a_block_spread_over_lines_name_each_line() -> None:
    block = "retry:\n  infrastructure: 9\n  exit_status:\n    - 1\n    - 300\n  limit: 1\n  suspect: 1.5\n"
    assert [(line, field) for line, field, _ in _errors(block)] == [
        (4, "retry.infrastructure"),
        (7, "retry.exit_status[1]"),
        (9, "retry.suspect"),
    ]


def test_a_task_cannot_set_its_own_retry() -> None:
    text = HEAD + "tasks: [{id: a, run: ./a.sh, retry: {infrastructure: 0}}]\n"
    assert [(p.field, "unknown key 'retry'" in p.message) for p in parse_manifest(text, "w.yml").errors] == [
        ("tasks[0].retry", True)
    ]
