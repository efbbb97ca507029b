"""``matrix``: validation with lines, combinations in order, job names and keys, ``{matrix.KEY}``."""

from __future__ import annotations

import json
import math
import re
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.matrix import (
    MAX_JOB_KEY,
    MAX_MATRIX_TASK_ID,
    Axis,
    Combination,
    Matrix,
    TemplateError,
    expand,
    job_key,
    key_problem,
    parse_template,
    read_matrix,
    shown_name,
    task_of,
)
from kerrigan.core.yamlsource import SourceReader

FILE = "hil.yml"
TASK_ID = re.compile(r"[a-z0-9._-]{1,63}")


def read(text: str, task_id: str | None = "smoke") -> tuple[Matrix | None, list[tuple[int, str, str]]]:
    """The matrix written as a YAML document of its own (its lines are the document's)."""
    reader = SourceReader(FILE)
    node = reader.compose(text, "matrix")
    assert node is not None
    matrix = read_matrix(reader, node, "tasks[0].matrix", task_id=task_id)
    return matrix, [(p.line, p.field, p.message) for p in reader.sorted_errors()]


def names(matrix: Matrix | None, task_id: str = "smoke") -> list[str]:
    return [combination.name(task_id) for combination in expand(matrix)]


# -- reading ------------------------------------------------------------------------------------------


def test_values_are_taken_as_written_in_the_order_written() -> None:
    matrix, problems = read("board: [modalix, davinci]\nsdk: [2.10, '2.2']\n")
    assert problems == []
    assert matrix == Matrix((Axis("board", ("modalix", "davinci"), 1), Axis("sdk", ("2.10", "2.2"), 2)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[a, b]", (1, "tasks[0].matrix", "must be a mapping, not a list")),
        ("~", (1, "tasks[0].matrix", "is empty: give each key its list of values, or leave matrix out")),
        ("{}", (1, "tasks[0].matrix", "names no key: give each key its list of values")),
        (
            "a: [x]\nBoard: [x]",
            (
                2,
                "tasks[0].matrix.Board",
                "'Board' is not a valid matrix key: a lowercase letter, then up to 31 lowercase letters, "
                "digits or '_'; did you mean 'board'?",
            ),
        ),
        ("node-version: [x]", (1, "tasks[0].matrix.node-version", "did you mean 'node_version'?")),
        ("board: []", (1, "tasks[0].matrix.board", "an empty list makes no combination")),
        ("board:", (1, "tasks[0].matrix.board", "needs a list of values")),
        ("board: modalix", (1, "tasks[0].matrix.board", "must be a list, not 'modalix'")),
        ("board:\n  - {a: b}", (2, "tasks[0].matrix.board[0]", "must be a string, not a mapping")),
        ("board: ['']", (1, "tasks[0].matrix.board[0]", "must not be empty")),
        (
            "board:\n  - modalix\n  - modalix",
            (3, "tasks[0].matrix.board[1]", "value 'modalix' is listed twice (first on line 2)"),
        ),
        (
            "board: [" + "x" * 64 + "]",
            (1, "tasks[0].matrix.board[0]", "is 64 characters long; the limit is 63"),
        ),
        (
            "board: [x]\nboard: [y]",
            (2, "tasks[0].matrix.board", "duplicate key 'board' (first set on line 1)"),
        ),
        ("board: [x]\ninclude: [{board: y}]", (2, "tasks[0].matrix.include", "include is not supported")),
        (
            "board: [x, y]\nexclude: [{borad: x}]",
            (2, "tasks[0].matrix.exclude[0].borad", "unknown key 'borad'; did you mean 'board'?"),
        ),
        (
            "board: [modalix, davinci]\nexclude:\n  - board: davnci",
            (3, "tasks[0].matrix.exclude[0].board", "'davnci' is not one of board's values; did you mean"),
        ),
        (
            "board: [x, y]\nexclude: [{}]",
            (2, "tasks[0].matrix.exclude[0]", "an empty entry would drop every"),
        ),
        ("board: [x]\nexclude: {board: x}", (2, "tasks[0].matrix.exclude", "must be a list, not a mapping")),
        (
            "board: [x, y]\nexclude: [{board: x}, {board: y}]",
            (1, "tasks[0].matrix", "exclude drops every combination: the task would have no job"),
        ),
    ],
)
def test_a_malformed_matrix_is_an_error_on_its_line(text: str, expected: tuple[int, str, str]) -> None:
    matrix, problems = read(text)
    assert matrix is None
    line, field, message = expected
    assert [(p_line, p_field) for p_line, p_field, _ in problems] == [(line, field)]
    assert message in problems[0][2]


def test_every_problem_is_reported_at_once() -> None:
    _, problems = read("Board: [x]\nsdk: []\nos: [a, a]\n")
    assert [line for line, _, _ in problems] == [1, 2, 3]


def test_too_many_combinations_is_an_error_naming_the_count() -> None:
    _, problems = read("a: [1, 2, 3, 4, 5, 6, 7, 8, 9]\nb: [1, 2, 3, 4, 5, 6, 7, 8, 9]\nc: [1, 2, 3, 4]\n")
    assert problems == [(1, "tasks[0].matrix", "makes 324 combinations; the limit is 256 a task")]


def test_the_combination_cap_counts_after_exclude() -> None:
    values = "[" + ", ".join(str(n) for n in range(17)) + "]"
    fits, problems = read(f"a: {values}\nb: {values}\nexclude: [{{a: '0'}}, {{a: '1'}}]\n")
    assert problems == []  # 289 less 34
    assert fits is not None
    assert len(expand(fits)) == 255
    _, problems = read(f"a: {values}\nb: {values}\nexclude: [{{a: '0'}}]\n")
    assert problems == [
        (1, "tasks[0].matrix", "makes 272 combinations (289 less 17 excluded); the limit is 256 a task")
    ]


def test_a_huge_product_is_refused_without_listing_it() -> None:
    values = "[" + ", ".join(str(n) for n in range(100)) + "]"
    _, problems = read("\n".join(f"k{i}: {values}" for i in range(16)))
    assert problems == [(1, "tasks[0].matrix", f"makes {100**16:,} combinations; the limit is 256 a task")]


def test_more_than_sixteen_keys_is_an_error() -> None:
    _, problems = read("\n".join(f"k{i}: [x]" for i in range(17)))
    assert problems == [(1, "tasks[0].matrix", "has 17 keys; the limit is 16")]


def test_a_matrix_task_id_leaves_room_for_the_job_keys() -> None:
    assert read("board: [x]", task_id="t" * MAX_MATRIX_TASK_ID)[1] == []
    _, problems = read("board: [x]", task_id="t" * (MAX_MATRIX_TASK_ID + 1))
    assert len(problems) == 1
    assert f"at most {MAX_MATRIX_TASK_ID} characters" in problems[0][2]


@pytest.mark.parametrize("key", ["board", "sdk", "a", "os_2", "x" * 32])
def test_valid_matrix_keys(key: str) -> None:
    assert key_problem(key) is None


@pytest.mark.parametrize("key", ["", "2sdk", "_a", "a.b", "a-b", "Ab", "x" * 33, "é"])
def test_invalid_matrix_keys(key: str) -> None:
    assert key_problem(key) is not None


# -- expansion and names ------------------------------------------------------------------------------


def test_combinations_vary_the_rightmost_key_fastest() -> None:
    matrix, _ = read("board: [modalix, davinci]\nsdk: ['2.1', '2.2']\n")
    assert names(matrix) == [
        "smoke (board=modalix, sdk=2.1)",
        "smoke (board=modalix, sdk=2.2)",
        "smoke (board=davinci, sdk=2.1)",
        "smoke (board=davinci, sdk=2.2)",
    ]


def test_exclude_drops_every_combination_matching_a_partial_one() -> None:
    matrix, _ = read(
        "board: [modalix, davinci]\nsdk: ['2.1', '2.2']\nos: [linux, rtos]\n"
        "exclude:\n  - {board: davinci, sdk: '2.1'}\n  - {os: rtos, sdk: '2.2'}\n"
    )
    assert names(matrix) == [
        "smoke (board=modalix, sdk=2.1, os=linux)",
        "smoke (board=modalix, sdk=2.1, os=rtos)",
        "smoke (board=modalix, sdk=2.2, os=linux)",
        "smoke (board=davinci, sdk=2.2, os=linux)",
    ]


def test_a_task_without_a_matrix_is_one_job_keyed_by_its_id() -> None:
    (only,) = expand(None)
    assert (only.name("smoke"), only.key("smoke"), only.values()) == ("smoke", "smoke", {})


def test_a_value_holding_separators_is_quoted_in_the_name() -> None:
    first = Combination((("a", "x, b=y"), ("b", "z")))
    second = Combination((("a", "x"), ("b", "y, b=z")))
    assert first.name("t") == 't (a="x, b=y", b=z)'
    assert second.name("t") == 't (a=x, b="y, b=z")'
    assert Combination((("a", " x"),)).name("t") == 't (a=" x")'


def test_a_job_key_is_readable_when_it_fits() -> None:
    combination = Combination((("board", "modalix"), ("sdk", "2.2")))
    assert combination.key("smoke") == "smoke[board=modalix,sdk=2.2]"
    assert task_of("smoke[board=modalix,sdk=2.2]") == "smoke"
    assert task_of("smoke") == "smoke"


def test_a_long_or_unusual_job_key_keeps_a_readable_start_and_a_digest() -> None:
    long = Combination((("board", "modalix-" + "x" * 60),))
    odd = Combination((("board", "dev kit, rev=2]"),))
    for combination in (long, odd):
        key = combination.key("flash-and-test")
        assert len(key) <= MAX_JOB_KEY
        assert re.fullmatch(r"flash-and-test\[board=[A-Za-z0-9._=,-]*~[0-9a-f]{10}\]", key), key
    assert odd.key("flash-and-test").startswith("flash-and-test[board=dev_kit,_rev=2_~")
    assert long.key("flash-and-test") != Combination((("board", "modalix-" + "x" * 61),)).key(
        "flash-and-test"
    )


def test_job_key_refuses_a_task_id_with_no_room() -> None:
    with pytest.raises(ValueError, match="too long"):
        job_key("t" * 60, Combination((("board", "x" * 10),)))


# -- placeholders -------------------------------------------------------------------------------------

KEYS = ("board", "sdk")
VALUES = {"board": "modalix", "sdk": "2.2"}


@pytest.mark.parametrize(
    ("text", "rendered"),
    [
        ("{matrix.board}", "modalix"),
        ("sdk-{matrix.sdk}-{matrix.board}", "sdk-2.2-modalix"),
        ("plain", "plain"),
        ("", ""),
        ("{{matrix.board}}", "{matrix.board}"),  # doubled braces are literal
        ('{{"board": "{matrix.board}"}}', '{"board": "modalix"}'),
        ("}}{{", "}{"),
    ],
)
def test_placeholders_are_replaced_and_doubled_braces_are_literal(text: str, rendered: str) -> None:
    assert parse_template(text, KEYS).render(VALUES) == rendered


def test_substitution_is_one_pass() -> None:
    assert parse_template("{matrix.board}", KEYS).render({"board": "{matrix.sdk}"}) == "{matrix.sdk}"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{matrix.borad}", "'{matrix.borad}': unknown matrix key 'borad'; did you mean 'board'?"),
        ("{matrix.zzz}", "'{matrix.zzz}': unknown matrix key 'zzz'; the matrix has board, sdk"),
        ("{matrix.}", "'{matrix.}' names no key: write {matrix.KEY}, KEY one of board, sdk"),
        ("{board}", "'{board}': did you mean {matrix.board}?"),
        ("{ matrix.board }", "'{ matrix.board }': write {matrix.board}, without spaces"),
        ("{x}", "'{x}' is not a placeholder: write {matrix.KEY} (KEY one of board, sdk)"),
        ("a-{matrix.board", "an unclosed '{' at character 3 of 'a-{matrix.board'; write '{{'"),
        ("a}b", "a lone '}' at character 2 of 'a}b'; write '}}' for a literal brace"),
        ("${{ matrix.board }}", "GitHub Actions' ${{ matrix.KEY }} is written {matrix.KEY}"),
    ],
)
def test_malformed_placeholders_are_errors_naming_the_mistake(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as raised:
        parse_template(text, KEYS)
    assert message in str(raised.value)


def test_without_a_matrix_text_is_as_written_but_a_placeholder_is_an_error() -> None:
    assert parse_template('{"a": {"b": 1}}', None).render({}) == '{"a": {"b": 1}}'
    with pytest.raises(TemplateError, match="the task has no matrix"):
        parse_template("sdk-{matrix.sdk}", None)


# -- properties ---------------------------------------------------------------------------------------

# Values are any printable text, or short runs of the characters that separate a name's parts, which is
# where two combinations could read alike (a="x, b=y", b="z" against a="x", b="y, b=z").
values_st = st.one_of(
    st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=63),
    st.lists(st.sampled_from(["a", "b", "x", ",", " ", "=", "(", ")", '"']), min_size=1, max_size=8).map(
        "".join
    ),
)
keys_st = st.one_of(st.sampled_from(["a", "b", "x"]), st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True))


@st.composite
def matrices(draw: st.DrawFn) -> Matrix:
    """1-4 keys of 1-5 distinct printable values each, and a few partial combinations to exclude."""
    count = draw(st.integers(1, 4))
    keys = draw(st.lists(keys_st, min_size=count, max_size=count, unique=True))
    axes = tuple(
        Axis(
            key, tuple(draw(st.lists(values_st.filter(str.isprintable), min_size=1, max_size=5, unique=True)))
        )
        for key in keys
    )
    exclude = []
    for _ in range(draw(st.integers(0, 3))):
        chosen = draw(
            st.lists(st.sampled_from(axes), min_size=1, max_size=len(axes), unique_by=lambda a: a.key)
        )
        exclude.append(tuple((axis.key, draw(st.sampled_from(axis.values))) for axis in chosen))
    return Matrix(axes, tuple(exclude))


def read_name(name: str, task_id: str) -> tuple[tuple[str, str], ...]:
    """The pairs of a job's name, read back by the documented form: ``task (k=v, k="v, w")``."""
    body = name.removeprefix(f"{task_id} (").removesuffix(")")
    pairs = []
    at = 0
    while at < len(body):
        equals = body.index("=", at)
        key = body[at:equals]
        if body.startswith('"', equals + 1):
            value, end = json.JSONDecoder().raw_decode(body, equals + 1)
        else:
            end = body.find(", ", equals + 1)
            end = len(body) if end < 0 else end
            value = body[equals + 1 : end]
        pairs.append((key, value))
        assert body.startswith(", ", end) or end == len(body)
        at = end + 2
    return tuple(pairs)


def brute_count(matrix: Matrix) -> int:
    """Product of the value counts, less those matching an exclude, counted by inclusion-exclusion."""
    partials = [dict(partial) for partial in matrix.exclude]
    total = 0
    for size in range(len(partials) + 1):
        for group in combinations(partials, size):
            merged: dict[str, str] = {}
            if any(merged.setdefault(k, v) != v for partial in group for k, v in partial.items()):
                continue  # contradictory partials match nothing together
            free = math.prod(len(axis.values) for axis in matrix.axes if axis.key not in merged)
            total += (-1) ** size * free
    return total


@settings(max_examples=300, deadline=None)
@given(matrices(), st.from_regex(r"[a-z0-9][a-z0-9._-]{0,49}", fullmatch=True))
def test_expansion_count_names_and_keys(matrix: Matrix, task_id: str) -> None:
    combinations = expand(matrix)
    assert len(combinations) == brute_count(matrix)
    assert len({c.name(task_id) for c in combinations}) == len(combinations)
    assert all(read_name(c.name(task_id), task_id) == c.pairs for c in combinations)  # so names are unique
    keys = [c.key(task_id) for c in combinations]
    assert len(set(keys)) == len(keys)
    assert all(len(key) <= MAX_JOB_KEY and task_of(key) == task_id for key in keys)
    assert all(re.fullmatch(r"[A-Za-z0-9._=,\[\]~-]+", key) for key in keys)


literal_st = st.text(st.characters(codec="utf-8", categories=("L", "N", "P", "Zs"), exclude_characters="{}"))


@settings(max_examples=300, deadline=None)
@given(matrices(), st.data())
def test_substitution_leaves_no_placeholder_of_a_known_key(matrix: Matrix, data: st.DataObject) -> None:
    keys = matrix.keys
    pieces = data.draw(st.lists(st.one_of(literal_st, st.sampled_from(keys).map(lambda k: ("key", k)))))
    text = "".join(f"{{matrix.{piece[1]}}}" if isinstance(piece, tuple) else piece for piece in pieces)
    template = parse_template(text, keys)
    for combination in expand(matrix)[:5]:
        values = combination.values()
        expected = "".join(values[piece[1]] if isinstance(piece, tuple) else piece for piece in pieces)
        rendered = template.render(values)
        assert rendered == expected
        if all("{matrix." not in value for value in values.values()):
            assert "{matrix." not in rendered


def test_a_job_key_is_shown_as_people_read_it_unless_its_values_were_hashed() -> None:
    assert shown_name("smoke[board=modalix,sdk=2.2]") == "smoke (board=modalix, sdk=2.2)"
    assert shown_name("smoke") == "smoke"
    hashed = job_key("smoke", Combination((("board", "a b"),)))
    assert "~" in hashed
    assert shown_name(hashed) == hashed
