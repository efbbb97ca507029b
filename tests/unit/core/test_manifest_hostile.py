"""Hostile manifests: every one is a manifest error on its line, never an exception."""

from __future__ import annotations

import pytest

from kerrigan.core.manifest import MAX_MANIFEST_BYTES, MAX_NODES, parse_manifest
from kerrigan.core.yamlsource import MAX_MESSAGE, SourceReader, expanded_size, shorten_number

FILE = ".kerrigan/workflows/hostile.yml"
HEAD = "name: hostile\non: push\n"
TASK = "tasks:\n  - id: smoke\n    run: ./smoke.sh\n"
HUGE = "9" * 5000


def errors(text: str) -> list[tuple[int, str, str]]:
    """(line, field, message) of each error; the manifest must not be valid."""
    result = parse_manifest(text, FILE)
    assert result.workflow is None
    return [(p.line, p.field, p.message) for p in result.errors]


@pytest.mark.parametrize(
    ("field", "line", "bound"),
    [
        ("vcpus", 6, "at most 256"),
        ("timeout_s", 6, "at most 604800"),
    ],
)
def test_a_task_integer_of_5000_digits_is_too_large_on_its_line(field: str, line: int, bound: str) -> None:
    assert errors(HEAD + TASK + f"    {field}: {HUGE}\n") == [
        (line, f"tasks[0].{field}", f"999…9 (5000 digits) is too large: {bound}")
    ]


@pytest.mark.parametrize(
    ("field", "bound"), [("max_devkits", "at most 64"), ("queue_wait_limit_s", "at most 604800")]
)
def test_a_scheduling_integer_of_5000_digits_is_too_large_on_its_line(field: str, bound: str) -> None:
    assert errors(HEAD + f"scheduling:\n  {field}: {HUGE}\n" + TASK) == [
        (4, f"scheduling.{field}", f"999…9 (5000 digits) is too large: {bound}")
    ]


def test_a_negative_integer_of_5000_digits_is_too_small() -> None:
    assert errors(HEAD + TASK + f"    vcpus: -{HUGE}\n") == [
        (6, "tasks[0].vcpus", "-999…9 (5000 digits) is too small: at least 1")
    ]


def test_leading_zeros_do_not_make_a_number_large() -> None:
    result = parse_manifest(HEAD + TASK + "    vcpus: " + "0" * 5000 + "4\n", FILE)
    assert result.workflow is not None
    assert result.workflow.tasks[0].vcpus == 4


def test_a_number_just_past_its_bound_keeps_the_usual_message() -> None:
    assert errors(HEAD + TASK + "    vcpus: 257\n") == [(6, "tasks[0].vcpus", "must be 1 to 256, not 257")]


def test_a_number_of_19_digits_is_too_large_without_being_written_out() -> None:
    assert errors(HEAD + TASK + "    vcpus: " + "1" * 19 + "\n") == [
        (6, "tasks[0].vcpus", "111…1 (19 digits) is too large: at most 256")
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("true", "must be a whole number, not 'true'"),
        ("1.5", "must be a whole number, not '1.5'"),
        ("1e999", "must be a whole number, not '1e999'"),
        (".inf", "must be a whole number, not '.inf'"),
        ("", "must be a whole number, not nothing (null)"),
        ("[1, 2]", "must be a whole number, not a list"),
        ("{a: 1}", "must be a whole number, not a mapping"),
        ('"2"', "must be a whole number, not '2'"),
        ("0x10", "must be a whole number, not '0x10'"),
    ],
)
def test_vcpus_of_the_wrong_type_is_an_error_on_its_line(value: str, message: str) -> None:
    assert errors(HEAD + TASK + f"    vcpus: {value}\n") == [(6, "tasks[0].vcpus", message)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            HEAD + "tasks:\n  - id: smoke\n    run: {a: 1}\n",
            [(5, "tasks[0].run", "must be a string, not a mapping")],
            id="run-a-mapping",
        ),
        pytest.param(
            HEAD + "tasks: {smoke: ./smoke.sh}\n",
            [(3, "tasks", "must be a list, not a mapping")],
            id="tasks-a-mapping",
        ),
        pytest.param(
            HEAD + "tasks:\n  - [id, smoke]\n",
            [(4, "tasks[0]", "must be a mapping, not a list")],
            id="task-a-list",
        ),
        pytest.param(
            HEAD + "scheduling: [spread]\n" + TASK,
            [(3, "scheduling", "must be a mapping, not a list")],
            id="scheduling-a-list",
        ),
        pytest.param(
            HEAD + "scheduling:\n  labels: [sdk]\n" + TASK,
            [(4, "scheduling.labels", "must be a mapping, not a list")],
            id="labels-a-list",
        ),
        pytest.param(
            HEAD + "scheduling:\n  labels: {sdk: {a: b}}\n" + TASK,
            [(4, "scheduling.labels.sdk", "must be a list, not a mapping")],
            id="label-value-a-mapping",
        ),
        pytest.param(
            "name: [a]\non: push\n" + TASK,
            [(1, "name", "must be a string, not a list")],
            id="name-a-list",
        ),
        pytest.param(
            "name: hostile\non: 5\n" + TASK,
            [(2, "on", "unknown event '5'; expected one of push, pull_request, workflow_run, merge_group")],
            id="on-a-number",
        ),
        pytest.param(
            HEAD + "tasks:\n  - id: smoke\n    run: ./smoke.sh\n    ? [1, 2]\n    : 3\n",
            [(6, "tasks[0]", "keys must be plain strings")],
            id="key-not-a-string",
        ),
        pytest.param("- a\n- b\n", [(1, "", "must be a mapping, not a list")], id="document-a-list"),
        pytest.param("just text\n", [(1, "", "must be a mapping, not 'just text'")], id="document-a-string"),
        pytest.param(
            HEAD + TASK + "---\n" + HEAD + TASK,
            [(7, "", "a manifest holds one YAML document; this file has 2")],
            id="two-documents",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_on_its_line(
    text: str, expected: list[tuple[int, str, str]]
) -> None:
    assert errors(text) == expected


def test_deep_nesting_is_not_valid_yaml_rather_than_a_recursion_error() -> None:
    [(line, field, message)] = errors(HEAD + TASK + "    requirements: " + "[" * 5000 + "]" * 5000 + "\n")
    assert (line, field) == (6, "")
    assert message.startswith("not valid YAML: ")


def test_aliases_that_stand_for_a_million_values_are_refused() -> None:
    nine = ", ".join(["x"] * 9)
    text = (
        f"a: &a [{nine}]\n"
        + "".join(
            f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]\n"
            for previous, name in zip("abcde", "bcdef", strict=True)
        )
        + HEAD
        + TASK
    )
    assert errors(text) == [
        (
            1,
            "",
            f"the manifest holds more than {MAX_NODES:,} keys and values "
            "(counting what each alias stands for)",
        )
    ]


def padded(size: int, pad: str = "#") -> str:
    """A valid manifest followed by a comment of ``pad`` (and ``#`` for what is left) that makes it ``size``
    bytes of UTF-8."""
    text = HEAD + TASK + "#"
    room = size - len(text.encode()) - 1
    width = len(pad.encode())
    return text + pad * (room // width) + "#" * (room % width) + "\n"


def test_a_manifest_over_the_size_limit_is_one_error_naming_its_size() -> None:
    result = parse_manifest(padded(MAX_MANIFEST_BYTES + 1), FILE)
    assert result.workflow is None
    assert [str(problem) for problem in result.errors] == [
        f"{FILE}:1:1: the file is 256.0 KiB (262,145 bytes); a manifest is at most 256 KiB, so it was "
        "not read"
    ]


def test_a_manifest_at_the_size_limit_is_read() -> None:
    result = parse_manifest(padded(MAX_MANIFEST_BYTES), FILE)
    assert (result.errors, result.name) == ((), "hostile")


def test_the_size_limit_counts_bytes_not_characters() -> None:
    text = padded(MAX_MANIFEST_BYTES + 1, "é")  # 2 bytes a character: far fewer characters than bytes
    assert len(text) < MAX_MANIFEST_BYTES
    [(line, field, message)] = errors(text)
    assert (line, field) == (1, "")
    assert message.startswith("the file is 256.0 KiB (262,145 bytes)")


def test_an_alias_inside_its_own_anchor_is_refused_on_its_line() -> None:
    assert errors(HEAD + "tasks: &tasks [*tasks]\n") == [
        (3, "", "this alias stands for a part of the manifest that holds it: no end to it")
    ]


def test_aliases_within_the_limit_are_read_as_what_they_stand_for() -> None:
    text = HEAD + "tasks:\n  - &smoke {id: smoke, run: ./smoke.sh}\n  - {id: boot, run: ./boot.sh}\n"
    result = parse_manifest(text + "scheduling: {labels: {sdk: &v '2.2.0'}}\n", FILE)
    assert result.workflow is not None
    assert [t.id for t in result.workflow.tasks] == ["smoke", "boot"]


def test_a_long_value_is_quoted_cut_short_in_its_message() -> None:
    [(_, field, message)] = errors(
        HEAD + "tasks:\n  - id: smoke\n    run: ./smoke.sh\n    type: " + "x" * 100_000 + "\n"
    )
    assert field == "tasks[0].type"
    assert message == "must be one of command, not " + repr("x" * 40) + "… (100000 characters)"


def test_a_label_with_many_repeated_values_keeps_each_value_once() -> None:
    values = ", ".join(f"v{i % 5000}" for i in range(20_000))
    result = parse_manifest(HEAD + f"scheduling: {{labels: {{sdk: [{values}]}}}}\n" + TASK, FILE)
    assert result.workflow is not None
    assert len(result.workflow.scheduling.requirements.labels["sdk"].values) == 5000


def test_shorten_number_keeps_short_numbers_and_cuts_long_ones() -> None:
    assert (shorten_number("007"), shorten_number("-" + HUGE)) == ("7", "-999…9 (5000 digits)")


def test_expanded_size_counts_aliases_without_recursing() -> None:
    reader = SourceReader("deep.yml")
    node = reader.compose("[" * 900 + "]" * 900, "document")
    assert node is not None
    assert expanded_size(node, 10_000) == (900, None)


def test_a_message_that_quotes_a_long_tag_is_cut_short() -> None:
    [(line, field, message)] = errors(HEAD + "scheduling: {tags: [" + "t" * 3000 + "]}\n" + TASK)
    assert (line, field) == (3, "scheduling.tags[0]")
    assert len(message) <= MAX_MESSAGE
    # The tag is quoted cut short where the message is made (core.labels), with its length.
    assert "… (3000 characters) is 3000 characters long; the limit is 63" in message
