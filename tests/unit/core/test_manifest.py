"""Workflow manifests: values as written, every error with its field and line, legacy forms, triggers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.manifest import (
    BranchFilter,
    ManifestResult,
    Priority,
    Scheduling,
    Strategy,
    TaskType,
    Workflow,
    WorkflowRunTrigger,
    parse_manifest,
)
from kerrigan.core.requirements import Origin
from kerrigan.core.yamlsource import Problem

MANIFESTS = Path(__file__).parents[3] / "fixtures" / "manifests"
FILE = ".kerrigan/workflows/w.yml"
ONE_TASK = "tasks:\n  - {id: t, run: ./t.sh}\n"


def parse(text: str) -> ManifestResult:
    return parse_manifest(textwrap.dedent(text), FILE)


def workflow(text: str) -> Workflow:
    result = parse(text)
    assert result.errors == (), [str(error) for error in result.errors]
    assert result.workflow is not None
    return result.workflow


def only_error(text: str) -> Problem:
    result = parse(text)
    assert result.workflow is None
    assert len(result.errors) == 1, [str(error) for error in result.errors]
    return result.errors[0]


def with_scheduling(block: str) -> str:
    """A valid manifest around a ``scheduling`` block; the block's first line is line 4."""
    return "name: w\non: push\nscheduling:\n" + textwrap.indent(textwrap.dedent(block), "  ") + ONE_TASK


def with_on(block: str) -> str:
    """A valid manifest around an ``on`` block; the block's first line is line 3."""
    return "name: w\non:\n" + textwrap.indent(textwrap.dedent(block), "  ") + ONE_TASK


def session_values(wf: Workflow, key: str) -> tuple[str, ...]:
    return wf.scheduling.requirements.labels[key].values


def task_values(wf: Workflow, task_id: str, key: str) -> tuple[str, ...]:
    task = next(task for task in wf.tasks if task.id == task_id)
    return task.requirements.labels[key].values


# -- values as written -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("1.10", "1.10"),
        ("2.2", "2.2"),
        ("2.2.0", "2.2.0"),
        ('"2.2.0"', "2.2.0"),
        ("'1.10'", "1.10"),
        ("on", "on"),
        ("off", "off"),
        ("yes", "yes"),
        ("true", "true"),
        ("010", "010"),
        ("0x1F", "0x1F"),
        ("1e3", "1e3"),
        ("1_000", "1_000"),
        ("SoM", "SoM"),
    ],
)
def test_label_value_is_kept_as_written(written: str, value: str) -> None:
    wf = workflow(with_scheduling(f"labels:\n  sdk: {written}\n"))
    assert session_values(wf, "sdk") == (value,)


def test_task_label_value_is_kept_as_written() -> None:
    wf = workflow(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    requirements:\n      labels: {uart: on}\n"
    )
    assert task_values(wf, "t", "uart") == ("on",)


def test_tag_is_kept_as_written() -> None:
    wf = workflow(with_scheduling("tags: [1.10, on]\n"))
    assert [req.tag for req in wf.scheduling.requirements.tags] == ["1.10", "on"]


def test_on_as_a_top_level_key_is_read_as_the_triggers() -> None:
    wf = workflow("name: w\non:\n  push: {branches: [main]}\n" + ONE_TASK)
    assert wf.triggers.push == BranchFilter(("main",))


@settings(max_examples=100, deadline=None)
@given(st.from_regex(r"\A[0-9][0-9.]{0,10}\Z"))
def test_number_like_value_is_read_as_the_text_written(written: str) -> None:
    wf = workflow(with_scheduling(f"labels:\n  sdk: {written}\n"))
    assert session_values(wf, "sdk") == (written,)


def test_label_keys_are_read_lowercase() -> None:
    wf = workflow(with_scheduling("labels: {Form_Factor: som}\n"))
    assert list(wf.scheduling.requirements.labels) == ["form_factor"]


def test_tags_are_read_lowercase() -> None:
    wf = workflow(with_scheduling("tags: [UART-Debug]\n"))
    assert [req.tag for req in wf.scheduling.requirements.tags] == ["uart-debug"]


def test_reserved_implicit_key_may_be_requested() -> None:
    wf = workflow(with_scheduling("labels: {kerrigan.pool_id: sdk-2-2-som}\n"))
    assert session_values(wf, "kerrigan.pool_id") == ("sdk-2-2-som",)


# -- any of ----------------------------------------------------------------------------------------


def test_list_value_means_any_of_in_the_order_written() -> None:
    wf = workflow(with_scheduling('labels: {sdk: ["2.2.0", "2.1.1"]}\n'))
    assert session_values(wf, "sdk") == ("2.2.0", "2.1.1")


def test_block_list_value_means_any_of() -> None:
    wf = workflow(with_scheduling("labels:\n  sdk:\n    - 2.1.1\n    - 1.10\n"))
    assert session_values(wf, "sdk") == ("2.1.1", "1.10")


def test_single_value_is_a_list_of_one() -> None:
    wf = workflow(with_scheduling("labels: {form_factor: som}\n"))
    assert session_values(wf, "form_factor") == ("som",)


def test_duplicate_values_in_a_list_count_once() -> None:
    wf = workflow(with_scheduling("labels: {sdk: [2.2.0, 2.1.1, 2.2.0]}\n"))
    assert session_values(wf, "sdk") == ("2.2.0", "2.1.1")


def test_duplicate_tags_count_once() -> None:
    wf = workflow(with_scheduling("tags: [uart-debug, UART-Debug, ga]\n"))
    assert [req.tag for req in wf.scheduling.requirements.tags] == ["uart-debug", "ga"]


def test_single_tag_string_is_a_list_of_one() -> None:
    wf = workflow(with_scheduling("tags: uart-debug\n"))
    assert [req.tag for req in wf.scheduling.requirements.tags] == ["uart-debug"]


def test_requirement_remembers_the_line_it_was_written_on() -> None:
    wf = workflow(with_scheduling("labels:\n  sdk: 2.2.0\n  form_factor: som\n"))
    assert wf.scheduling.requirements.labels["form_factor"].origins == (
        Origin("scheduling.labels.form_factor", 6),
    )


# -- every error kind, with its field and line -----------------------------------------------------


ERRORS = [
    pytest.param(
        "name: w\non: push\nschedulng: {}\n" + ONE_TASK,
        3,
        "schedulng",
        "unknown key 'schedulng'; did you mean 'scheduling'?",
        id="unknown-top-key",
    ),
    pytest.param(
        with_scheduling("label: {sdk: 2.2.0}\n"),
        4,
        "scheduling.label",
        "unknown key 'label'; did you mean 'labels'?",
        id="unknown-scheduling-key",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    requirement: {}\n",
        6,
        "tasks[0].requirement",
        "unknown key 'requirement'; did you mean 'requirements'?",
        id="unknown-task-key",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    colour: red\n",
        6,
        "tasks[0].colour",
        "unknown key 'colour'; expected one of: artifacts, board, devices, env, id, matrix, needs, "
        "power, requirements, results, run, secrets, timeout_s, type, vcpus",
        id="unknown-key-without-suggestion",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    requirements: {label: {sdk: x}}\n",
        6,
        "tasks[0].requirements.label",
        "did you mean 'labels'?",
        id="unknown-requirements-key",
    ),
    pytest.param(
        with_on("push: {}\ndeploy: {}\n"),
        4,
        "on.deploy",
        "unknown key 'deploy'",
        id="unknown-event-in-mapping",
    ),
    pytest.param(
        "name: w\non: [push, deploy]\n" + ONE_TASK,
        2,
        "on[1]",
        "unknown event 'deploy'; expected one of push, pull_request, workflow_run, merge_group",
        id="unknown-event-in-list",
    ),
    pytest.param(
        "name: w\non: [push, pull-request]\n" + ONE_TASK,
        2,
        "on[1]",
        "unknown event 'pull-request'; did you mean 'pull_request'?",
        id="misspelt-event-in-list",
    ),
    pytest.param(
        "name: w\non: merge-group\n" + ONE_TASK,
        2,
        "on",
        "unknown event 'merge-group'; did you mean 'merge_group'?",
        id="misspelt-event-alone",
    ),
    pytest.param(
        with_on("pull-request: {branches: [main]}\n"),
        3,
        "on.pull-request",
        "unknown key 'pull-request'; did you mean 'pull_request'?",
        id="misspelt-event-in-mapping",
    ),
    pytest.param(
        with_on("push: {branch: main}\n"),
        3,
        "on.push.branch",
        "did you mean 'branches'?",
        id="unknown-push-option",
    ),
    pytest.param(
        "name: {a: b}\non: push\n" + ONE_TASK, 1, "name", "must be a string, not a mapping", id="name-type"
    ),
    pytest.param(
        "name: " + "n" * 101 + "\non: push\n" + ONE_TASK,
        1,
        "name",
        "must be 1-100 printable characters on one line",
        id="name-too-long",
    ),
    pytest.param(
        with_scheduling("max_devkits: four\n"),
        4,
        "scheduling.max_devkits",
        "must be a whole number, not 'four'",
        id="max-devkits-word",
    ),
    pytest.param(
        with_scheduling("max_devkits: [4]\n"),
        4,
        "scheduling.max_devkits",
        "must be a whole number, not a list",
        id="max-devkits-list",
    ),
    pytest.param(
        with_scheduling("max_devkits: 65\n"),
        4,
        "scheduling.max_devkits",
        "must be 1 to 64, not 65",
        id="max-devkits-too-many",
    ),
    pytest.param(
        with_scheduling("queue_wait_limit_s: 0\n"),
        4,
        "scheduling.queue_wait_limit_s",
        "must be 1 to 604800, not 0",
        id="queue-wait-zero",
    ),
    pytest.param(
        with_scheduling("strategy: scatter\n"),
        4,
        "scheduling.strategy",
        "must be one of spread, pack, not 'scatter'",
        id="strategy",
    ),
    pytest.param(
        with_scheduling("priority: urgent\n"),
        4,
        "scheduling.priority",
        "must be one of gate, normal, background, not 'urgent'",
        id="priority",
    ),
    pytest.param(
        "name: w\non: push\nscheduling: [spread]\n" + ONE_TASK,
        3,
        "scheduling",
        "must be a mapping, not a list",
        id="scheduling-type",
    ),
    pytest.param(
        with_scheduling("labels: [sdk]\n"),
        4,
        "scheduling.labels",
        "must be a mapping, not a list",
        id="labels-type",
    ),
    pytest.param(
        with_scheduling("tags: {uart: debug}\n"),
        4,
        "scheduling.tags",
        "must be a list, not a mapping",
        id="tags-type",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    vcpus: 0\n",
        6,
        "tasks[0].vcpus",
        "must be 1 to 256, not 0",
        id="vcpus-zero",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    timeout_s: 1.5\n",
        6,
        "tasks[0].timeout_s",
        "must be a whole number, not '1.5'",
        id="timeout-float",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    type: docker\n",
        6,
        "tasks[0].type",
        "must be one of command, not 'docker'",
        id="task-type",
    ),
    pytest.param(
        "name: w\non: push\ntasks: {id: t}\n", 3, "tasks", "must be a list, not a mapping", id="tasks-type"
    ),
    pytest.param("name: w\non: push\ntasks: []\n", 3, "tasks", "must list at least one task", id="no-tasks"),
    pytest.param(
        "name: w\non: push\ntasks: [run]\n",
        3,
        "tasks[0]",
        "must be a mapping, not 'run'",
        id="task-type-shape",
    ),
    pytest.param(
        with_scheduling('labels:\n  "Bad Key": x\n'),
        5,
        "scheduling.labels.Bad Key",
        "label key 'Bad Key' contains ' '",
        id="bad-label-key",
    ),
    pytest.param(
        with_scheduling("labels:\n  " + "k" * 64 + ": x\n"),
        5,
        "scheduling.labels." + "k" * 64,
        "is 64 characters long; the limit is 63",
        id="label-key-too-long",
    ),
    pytest.param(
        with_scheduling("labels:\n  kerrigan.colour: blue\n"),
        5,
        "scheduling.labels.kerrigan.colour",
        "label key 'kerrigan.colour' is not a label Kerrigan generates",
        id="reserved-prefix",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    requirements:\n"
        "      labels: {kerrigan.x: y}\n",
        7,
        "tasks[0].requirements.labels.kerrigan.x",
        "is not a label Kerrigan generates",
        id="reserved-prefix-in-task",
    ),
    pytest.param(
        with_scheduling("tags: [ok, UART Debug]\n"),
        4,
        "scheduling.tags[1]",
        "tag 'UART Debug' contains ' '",
        id="bad-tag",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - id: t\n    run: x\n    requirements:\n      tags: [a/b]\n",
        7,
        "tasks[0].requirements.tags[0]",
        "tag 'a/b' contains '/'",
        id="bad-tag-in-task",
    ),
    pytest.param(
        with_scheduling('labels:\n  sdk: ""\n'),
        5,
        "scheduling.labels.sdk",
        "value of label 'sdk' must not be empty",
        id="empty-value",
    ),
    pytest.param(
        with_scheduling("labels:\n  sdk:\n"),
        5,
        "scheduling.labels.sdk",
        "label 'sdk' needs a value",
        id="null-value",
    ),
    pytest.param(
        with_scheduling("labels:\n  sdk: []\n"),
        5,
        "scheduling.labels.sdk",
        "an empty list allows no value",
        id="empty-list-value",
    ),
    pytest.param(
        with_scheduling('labels:\n  sdk: "2.2\\t0"\n'),
        5,
        "scheduling.labels.sdk",
        "value of label 'sdk' '2.2\\t0' contains a non-printable character",
        id="non-printable-value",
    ),
    pytest.param(
        with_scheduling("labels:\n  sdk: " + "v" * 64 + "\n"),
        5,
        "scheduling.labels.sdk",
        "value of label 'sdk' is 64 characters long",
        id="value-too-long",
    ),
    pytest.param(
        with_scheduling("labels:\n  sdk: [2.2.0, {a: b}]\n"),
        5,
        "scheduling.labels.sdk[1]",
        "must be a string, not a mapping",
        id="value-list-item-type",
    ),
    pytest.param(
        with_scheduling("labels:\n  sdk: 2.2.0\n  SDK: 2.1.1\n"),
        6,
        "scheduling.labels.SDK",
        "label 'sdk' is set twice (first on line 5); keys are case-insensitive",
        id="label-set-twice-in-any-case",
    ),
    pytest.param(
        with_scheduling("max_devkits: 2\nmax_devkits: 3\n"),
        5,
        "scheduling.max_devkits",
        "duplicate key 'max_devkits' (first set on line 4)",
        id="duplicate-yaml-key",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - {id: t, run: a}\n  - {id: u, run: b}\n  - {id: t, run: c}\n",
        6,
        "tasks[2].id",
        "duplicate task id 't' (first on line 4)",
        id="duplicate-task-id",
    ),
    pytest.param(
        "name: w\non: push\ntasks:\n  - {id: Smoke, run: a}\n",
        4,
        "tasks[0].id",
        "'Smoke' is not a valid id",
        id="invalid-task-id",
    ),
    pytest.param("name: w\non: push\ntasks:\n  - {run: a}\n", 4, "tasks[0].id", "is required", id="task-id"),
    pytest.param(
        "name: w\non: push\ntasks:\n  - {id: t}\n",
        4,
        "tasks[0].run",
        "is required for a command task",
        id="task-run",
    ),
    pytest.param(
        "on: push\n" + ONE_TASK, 1, "name", "is required: the check run is named after it", id="missing-name"
    ),
    pytest.param(
        "name: w\n" + ONE_TASK, 1, "on", "is required: say which events run this workflow", id="missing-on"
    ),
    pytest.param(
        "name: w\non: push\n", 1, "tasks", "is required: list at least one task", id="missing-tasks"
    ),
    pytest.param(
        with_on("workflow_run: {types: [completed]}\n"),
        3,
        "on.workflow_run.workflows",
        "is required: name the GitHub Actions workflows",
        id="workflow-run-without-workflows",
    ),
    pytest.param(
        "name: w\non: [workflow_run]\n" + ONE_TASK,
        2,
        "on.workflow_run.workflows",
        "is required",
        id="workflow-run-short-form",
    ),
    pytest.param(
        with_on("workflow_run: {workflows: [build], types: [finished]}\n"),
        3,
        "on.workflow_run.types[0]",
        "must be one of requested, in_progress, completed, not 'finished'",
        id="workflow-run-types",
    ),
    pytest.param(
        with_on("merge_group: {types: [destroyed]}\n"),
        3,
        "on.merge_group.types[0]",
        "must be checks_requested, not 'destroyed'",
        id="merge-group-types",
    ),
    pytest.param(
        with_scheduling("pools: []\n"),
        4,
        "scheduling.pools",
        "at least one",
        id="legacy-pools-empty",
    ),
    pytest.param(
        with_scheduling('pools: [a, ""]\n'),
        4,
        "scheduling.pools[1]",
        "must not be empty",
        id="legacy-pools-empty-id",
    ),
    pytest.param(
        with_scheduling("capabilities: [uart, JTAG Port]\n"),
        4,
        "scheduling.capabilities[1]",
        "label key 'JTAG Port' contains ' '",
        id="legacy-capability-name",
    ),
    pytest.param("", 1, "", "the manifest is empty", id="empty-file"),
    pytest.param("# only a comment\n", 1, "", "the manifest is empty", id="comment-only-file"),
    pytest.param("name: w\non: [push\n", 3, "", "not valid YAML", id="yaml-syntax"),
    pytest.param(
        "name: w\non: push\n" + ONE_TASK + "---\nname: again\n",
        6,
        "",
        "a manifest holds one YAML document; this file has 2",
        id="two-documents",
    ),
    pytest.param("- name: w\n", 1, "", "must be a mapping, not a list", id="root-type"),
]


@pytest.mark.parametrize(("text", "line", "field", "message"), ERRORS)
def test_invalid_manifest_reports_the_error_with_its_field_and_line(
    text: str, line: int, field: str, message: str
) -> None:
    error = only_error(text)
    assert (error.file, error.line, error.field) == (FILE, line, field)
    assert message in error.message


def test_too_many_tasks_is_an_error() -> None:
    tasks = "".join(f"  - {{id: t{n}, run: x}}\n" for n in range(257))
    error = only_error("name: w\non: push\ntasks:\n" + tasks)
    assert (error.line, error.field) == (4, "tasks")
    assert "lists 257 tasks; the limit is 256" in error.message


def test_conflicting_session_and_task_values_are_an_error_naming_both_lines() -> None:
    error = only_error(
        """\
        name: w
        on: push
        scheduling:
          labels:
            sdk: "2.2.0"
        tasks:
          - id: t
            run: x
            requirements:
              labels: {sdk: ["2.1.1", "2.0.0"]}
        """
    )
    assert (error.line, error.column, error.field) == (10, 1, "tasks[0].requirements.labels.sdk")
    assert error.message == (
        "label 'sdk' cannot be satisfied: scheduling.labels.sdk (line 5) allows 2.2.0 but "
        "tasks[0].requirements.labels.sdk (line 10) allows [2.1.1, 2.0.0]; no value is in both"
    )


def test_legacy_pools_conflicting_with_labels_is_an_error_naming_both_lines() -> None:
    error = only_error(with_scheduling("labels:\n  kerrigan.pool_id: a\npools: [a, b]\n"))
    assert (error.line, error.field) == (6, "scheduling.pools")
    assert "scheduling.pools (line 6)" in error.message
    assert "scheduling.labels.kerrigan.pool_id (line 5)" in error.message


def test_legacy_capability_conflicting_with_labels_is_an_error_naming_both_lines() -> None:
    error = only_error(with_scheduling("labels: {uart: enabled}\ncapabilities: [uart]\n"))
    assert (error.line, error.field) == (5, "scheduling.capabilities[0]")
    assert "scheduling.capabilities[0] (line 5)" in error.message
    assert "scheduling.labels.uart (line 4)" in error.message


# -- all errors at once ----------------------------------------------------------------------------


def test_several_mistakes_give_several_errors_in_file_order() -> None:
    result = parse(
        """\
        name: w
        on: [push, deploy]
        scheduling:
          strategy: scatter
          labels: {kerrigan.colour: blue}
        tasks:
          - id: t
            vcpus: 0
        """
    )
    assert [(e.line, e.field) for e in result.errors] == [
        (2, "on[1]"),
        (4, "scheduling.strategy"),
        (5, "scheduling.labels.kerrigan.colour"),
        (7, "tasks[0].run"),
        (8, "tasks[0].vcpus"),
    ]


def test_manifest_with_errors_has_no_workflow_but_keeps_its_name() -> None:
    result = parse(with_scheduling("strategy: scatter\n"))
    assert result.workflow is None
    assert not result.ok
    assert result.name == "w"


def test_every_problem_names_the_file() -> None:
    result = parse_manifest((MANIFESTS / "invalid.yml").read_text(encoding="utf-8"), "repo/invalid.yml")
    assert {problem.file for problem in result.errors + result.warnings} == {"repo/invalid.yml"}


def test_invalid_fixture_reports_each_mistake_on_its_line() -> None:
    result = parse_manifest((MANIFESTS / "invalid.yml").read_text(encoding="utf-8"), "invalid.yml")
    assert result.workflow is None
    assert [(e.line, e.field) for e in result.errors] == [
        (3, "on.deploy"),
        (5, "scheduling.strategy"),
        (6, "scheduling.max_devkits"),
        (9, "scheduling.labels.kerrigan.colour"),
        (10, "scheduling.labels.Bad Key"),
        (12, "scheduling.tags[0]"),
        (13, "scheduling.pools"),
        (18, "tasks[0].requirements.labels.sdk"),
        (19, "tasks[1].id"),
        (21, "tasks[2].run"),
        (22, "tasks[2].colour"),
    ]


def test_invalid_fixture_still_warns_about_its_legacy_pools() -> None:
    result = parse_manifest((MANIFESTS / "invalid.yml").read_text(encoding="utf-8"), "invalid.yml")
    assert [(w.line, w.field) for w in result.warnings] == [(13, "scheduling.pools")]


# -- never an exception ----------------------------------------------------------------------------


def assert_well_formed(result: ManifestResult, text: str) -> None:
    assert isinstance(result, ManifestResult)
    assert result.ok == (result.errors == ())
    assert (result.workflow is None) == bool(result.errors)
    last_line = len(text.splitlines()) + 1  # YAML also breaks lines at \r, \x85, \u2028, \u2029
    for problem in result.errors + result.warnings:
        assert problem.file == FILE
        assert 1 <= problem.line <= last_line


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_gives_a_result_not_an_exception(text: str) -> None:
    assert_well_formed(parse_manifest(text, FILE), text)


VOCABULARY = [
    "name",
    "on",
    "scheduling",
    "tasks",
    "push",
    "pull_request",
    "workflow_run",
    "merge_group",
    "branches",
    "workflows",
    "types",
    "strategy",
    "max_devkits",
    "priority",
    "queue_wait_limit_s",
    "labels",
    "tags",
    "pools",
    "capabilities",
    "id",
    "type",
    "run",
    "vcpus",
    "timeout_s",
    "requirements",
    "kerrigan.pool_id",
    "kerrigan.colour",
    "sdk",
    "SDK",
]
scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from([*VOCABULARY, "spread", "pack", "gate", "command", "2.2.0", "1.10", "", "main"])
)
keys = st.sampled_from(VOCABULARY) | st.text(max_size=12) | st.integers() | st.none()
yamlish = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
manifest_like = st.fixed_dictionaries(
    {},
    optional={
        "name": yamlish,
        "on": yamlish,
        "scheduling": st.dictionaries(keys, yamlish, max_size=6) | yamlish,
        "tasks": st.lists(st.dictionaries(keys, yamlish, max_size=6) | yamlish, max_size=3) | yamlish,
    },
)


@settings(max_examples=150, deadline=None)
@given(manifest_like | yamlish, st.booleans())
def test_arbitrary_yaml_structure_gives_a_result_not_an_exception(document: object, flow: bool) -> None:
    text = yaml.safe_dump(document, default_flow_style=flow)
    assert_well_formed(parse_manifest(text, FILE), text)


# -- legacy scheduling.pools and scheduling.capabilities -------------------------------------------


def test_legacy_pools_become_any_of_pool_id() -> None:
    wf = workflow(with_scheduling("pools: [sdk-2-2-som, sdk-2-1-som]\n"))
    assert session_values(wf, "kerrigan.pool_id") == ("sdk-2-2-som", "sdk-2-1-som")


def test_legacy_single_pool_string_is_a_list_of_one() -> None:
    wf = workflow(with_scheduling("pools: sdk-2-2-som\n"))
    assert session_values(wf, "kerrigan.pool_id") == ("sdk-2-2-som",)


def test_legacy_pool_listed_twice_counts_once() -> None:
    wf = workflow(with_scheduling("pools: [a, b, a]\n"))
    assert session_values(wf, "kerrigan.pool_id") == ("a", "b")


def test_legacy_pools_give_a_deprecation_warning_at_their_line() -> None:
    result = parse(with_scheduling("strategy: pack\npools: [a, b]\n"))
    assert result.ok
    assert len(result.warnings) == 1
    warning = result.warnings[0]
    assert (warning.file, warning.line, warning.field) == (FILE, 5, "scheduling.pools")
    assert warning.message == (
        "scheduling.pools is deprecated; write scheduling.labels: {kerrigan.pool_id: [a, b]} instead"
    )


def test_legacy_pools_apply_to_every_task() -> None:
    wf = workflow(
        "name: w\non: push\nscheduling:\n  pools: [a]\ntasks:\n  - {id: t, run: x}\n  - {id: u, run: y}\n"
    )
    assert [task.requirements.labels["kerrigan.pool_id"].values for task in wf.tasks] == [("a",), ("a",)]


def test_legacy_capability_names_become_enabled_labels() -> None:
    wf = workflow(with_scheduling("capabilities: [uart, jtag]\n"))
    assert wf.scheduling.requirements.as_dict()["labels"] == {"uart": ["enabled"], "jtag": ["enabled"]}


def test_legacy_capability_names_are_lowercased() -> None:
    wf = workflow(with_scheduling("capabilities: [UART]\n"))
    assert session_values(wf, "uart") == ("enabled",)


def test_legacy_capability_mapping_passes_through_as_labels() -> None:
    wf = workflow(with_scheduling("capabilities: {uart: on, sdk: [1.10, 2.2]}\n"))
    assert wf.scheduling.requirements.as_dict()["labels"] == {"uart": ["on"], "sdk": ["1.10", "2.2"]}


def test_legacy_capabilities_give_a_deprecation_warning_at_their_line() -> None:
    result = parse(with_scheduling("labels: {sdk: 2.2.0}\ncapabilities: [uart]\n"))
    assert result.ok
    assert [(w.line, w.field) for w in result.warnings] == [(5, "scheduling.capabilities")]
    assert result.warnings[0].message == (
        "scheduling.capabilities is deprecated; write scheduling.labels: {uart: enabled} instead"
    )


def test_legacy_form_adds_to_the_labels_written_beside_it() -> None:
    wf = workflow(with_scheduling("labels: {sdk: 2.2.0}\npools: [a]\ncapabilities: [uart]\n"))
    assert set(wf.scheduling.requirements.labels) == {"sdk", "kerrigan.pool_id", "uart"}


def test_legacy_fixture_is_valid_with_two_warnings() -> None:
    result = parse_manifest((MANIFESTS / "legacy.yml").read_text(encoding="utf-8"), "legacy.yml")
    assert result.ok
    assert [(w.line, w.field) for w in result.warnings] == [
        (5, "scheduling.pools"),
        (6, "scheduling.capabilities"),
    ]
    assert result.workflow is not None
    assert result.workflow.scheduling.requirements.as_dict()["labels"] == {
        "kerrigan.pool_id": ["sdk-2-2-som", "sdk-2-1-som"],
        "uart": ["enabled"],
    }


def test_manifest_without_legacy_forms_has_no_warnings() -> None:
    assert parse(with_scheduling("labels: {sdk: 2.2.0}\n")).warnings == ()


# -- task requirements refine the session's --------------------------------------------------------

REFINED = """\
name: w
on: push
scheduling:
  labels:
    sdk: ["2.1.1", "2.2.0", "2.3.0"]
  tags: [ga-firmware]
tasks:
  - id: narrow
    run: x
    requirements:
      labels: {sdk: ["2.3.0", "2.2.0", "9.9.9"]}
  - id: extra
    run: x
    requirements:
      labels: {form_factor: som}
      tags: [uart-debug, ga-firmware]
  - id: plain
    run: x
"""


def test_task_tags_add_to_session_tags() -> None:
    task = workflow(REFINED).tasks[1]
    assert [req.tag for req in task.requirements.tags] == ["ga-firmware", "uart-debug"]


def test_task_label_on_a_key_the_session_sets_intersects_the_values_in_session_order() -> None:
    assert task_values(workflow(REFINED), "narrow", "sdk") == ("2.2.0", "2.3.0")


def test_intersected_label_remembers_both_origins() -> None:
    task = workflow(REFINED).tasks[0]
    assert [origin.line for origin in task.requirements.labels["sdk"].origins] == [5, 11]


def test_task_label_on_a_new_key_is_added_to_the_session_labels() -> None:
    wf = workflow(REFINED)
    assert task_values(wf, "extra", "form_factor") == ("som",)
    assert task_values(wf, "extra", "sdk") == ("2.1.1", "2.2.0", "2.3.0")


def test_task_without_requirements_has_the_session_requirements() -> None:
    wf = workflow(REFINED)
    assert wf.tasks[2].requirements == wf.scheduling.requirements


def test_task_requirements_leave_the_session_requirements_unchanged() -> None:
    wf = workflow(REFINED)
    assert wf.scheduling.requirements.as_dict() == {
        "labels": {"sdk": ["2.1.1", "2.2.0", "2.3.0"]},
        "tags": ["ga-firmware"],
    }


def test_task_refinement_fixture_narrows_each_task() -> None:
    text = (MANIFESTS / "task-refinement.yml").read_text(encoding="utf-8")
    result = parse_manifest(text, "task-refinement.yml")
    assert result.workflow is not None
    by_task = {task.id: task.requirements.as_dict() for task in result.workflow.tasks}
    assert by_task == {
        "smoke-som": {"labels": {"sdk": ["2.1.1", "2.2.0"], "form_factor": ["som"]}, "tags": []},
        "smoke-pcie": {"labels": {"sdk": ["2.2.0"], "form_factor": ["pcie"]}, "tags": []},
        "old-sdk": {"labels": {"sdk": ["2.1.1"]}, "tags": ["uart-debug"]},
    }


# -- triggers --------------------------------------------------------------------------------------


def test_on_as_one_event_name_runs_on_that_event_for_every_branch() -> None:
    triggers = workflow("name: w\non: push\n" + ONE_TASK).triggers
    assert triggers.push == BranchFilter()
    assert (triggers.pull_request, triggers.workflow_run, triggers.merge_group) == (None, None, False)


def test_on_as_a_list_runs_on_each_event_listed() -> None:
    triggers = workflow("name: w\non: [push, pull_request, merge_group]\n" + ONE_TASK).triggers
    assert triggers.push == BranchFilter()
    assert triggers.pull_request == BranchFilter()
    assert triggers.merge_group is True
    assert triggers.workflow_run is None


def test_on_as_a_mapping_reads_each_event_options() -> None:
    triggers = workflow(
        with_on(
            """\
            push: {branches: [main, "release/*"]}
            pull_request: {branches: main}
            workflow_run: {workflows: [build-firmware], types: [completed, requested], branches: [main]}
            merge_group: {}
            """
        )
    ).triggers
    assert triggers.push == BranchFilter(("main", "release/*"))
    assert triggers.pull_request == BranchFilter(("main",))
    assert triggers.workflow_run == WorkflowRunTrigger(
        ("build-firmware",), ("completed", "requested"), BranchFilter(("main",))
    )
    assert triggers.merge_group is True


def test_event_with_no_options_applies_the_defaults() -> None:
    triggers = workflow(with_on("push:\npull_request: {}\n")).triggers
    assert triggers.push == BranchFilter()
    assert triggers.pull_request == BranchFilter()


def test_workflow_run_types_default_to_completed() -> None:
    trigger = workflow(with_on("workflow_run: {workflows: build}\n")).triggers.workflow_run
    assert trigger == WorkflowRunTrigger(("build",), ("completed",), BranchFilter())


@pytest.mark.parametrize(
    ("patterns", "branch", "matches"),
    [
        (None, "anything/at/all", True),
        ((), "main", False),
        (("main",), "main", True),
        (("main",), "main2", False),
        (("main",), "feature/main", False),
        (("release/*",), "release/1.0", True),
        (("release/*",), "release/1.0/hotfix", False),
        (("release/*",), "release", False),
        (("release/**",), "release/1.0/hotfix", True),
        (("feature/**",), "feature/a/b/c", True),
        (("**",), "any/branch/name", True),
        (("*",), "main", True),
        (("*",), "feature/x", False),
        (("v?",), "v1", True),
        (("v?",), "v10", False),
        (("release/v1.0",), "release/v1x0", False),
        (("*-stable",), "2.2-stable", True),
        (("main", "release/*"), "release/2.2", True),
    ],
)
def test_branch_filter_glob(patterns: tuple[str, ...] | None, branch: str, matches: bool) -> None:
    assert BranchFilter(patterns).matches(branch) is matches


def test_parsed_branch_filter_keeps_star_within_a_segment() -> None:
    push = workflow(with_on('push: {branches: ["release/*"]}\n')).triggers.push
    assert push is not None
    assert push.matches("release/2.2")
    assert not push.matches("release/2.2/hotfix")


# -- defaults --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attribute", "default"),
    [
        ("strategy", Strategy.SPREAD),
        ("max_devkits", 1),
        ("priority", Priority.NORMAL),
        ("queue_wait_limit_s", 300),
    ],
)
@pytest.mark.parametrize(
    "text",
    ["name: w\non: push\n" + ONE_TASK, "name: w\non: push\nscheduling:\n" + ONE_TASK],
    ids=["no-scheduling", "empty-scheduling"],
)
def test_scheduling_default(text: str, attribute: str, default: object) -> None:
    assert getattr(workflow(text).scheduling, attribute) == default


def test_scheduling_without_requirements_asks_for_nothing() -> None:
    assert workflow("name: w\non: push\n" + ONE_TASK).scheduling.requirements.as_dict() == {
        "labels": {},
        "tags": [],
    }


@pytest.mark.parametrize(
    ("attribute", "default"), [("type", TaskType.COMMAND), ("vcpus", 2), ("timeout_s", 3600)]
)
def test_task_default(attribute: str, default: object) -> None:
    assert getattr(workflow("name: w\non: push\n" + ONE_TASK).tasks[0], attribute) == default


def test_scheduling_values_written_replace_the_defaults() -> None:
    wf = workflow(with_scheduling("strategy: pack\nmax_devkits: 4\npriority: gate\nqueue_wait_limit_s: 60\n"))
    assert wf.scheduling == Scheduling(Strategy.PACK, 4, Priority.GATE, 60, wf.scheduling.requirements, 3)


def test_task_remembers_its_line_and_run_text() -> None:
    wf = workflow(
        "name: w\non: push\ntasks:\n  - id: a\n    run: ./a.sh\n  - id: b\n    run: |\n      one\n      two\n"
    )
    assert [(task.id, task.line, task.run) for task in wf.tasks] == [
        ("a", 4, "./a.sh"),
        ("b", 6, "one\ntwo\n"),
    ]


# -- the fixtures ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    sorted(path for path in MANIFESTS.glob("*.yml") if path.name != "invalid.yml"),
    ids=lambda path: path.name,
)
def test_fixture_manifest_parses_without_errors(path: Path) -> None:
    result = parse_manifest(path.read_text(encoding="utf-8"), str(path))
    assert result.errors == (), [str(error) for error in result.errors]
    assert result.workflow is not None
    assert result.workflow.name == path.stem


def test_main_example_fixture_reads_every_field() -> None:
    result = parse_manifest((MANIFESTS / "hil-smoke.yml").read_text(encoding="utf-8"), "hil-smoke.yml")
    assert result.workflow is not None
    wf = result.workflow
    assert (wf.scheduling.strategy, wf.scheduling.max_devkits) == (Strategy.SPREAD, 4)
    assert wf.scheduling.requirements.as_dict() == {
        "labels": {"sdk": ["2.2.0"], "form_factor": ["som"]},
        "tags": ["2.2.0-som-devkits"],
    }
    assert [(task.id, task.timeout_s) for task in wf.tasks] == [("smoke-som", 1800), ("boot-som", 3600)]
    assert wf.triggers.workflow_run == WorkflowRunTrigger(("build-firmware",), ("completed",))
