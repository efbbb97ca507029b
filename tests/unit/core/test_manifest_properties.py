"""Property: no generated manifest makes the parser raise; each gives a workflow or errors on real lines.

The strategy writes YAML shaped like a manifest (the keys of DESIGN.md's manifest, in block and flow style)
whose leaves are often hostile: integers of thousands of digits, floats, nulls, booleans, tags, anchors and
aliases, unicode, long strings, deep nesting, and now and then a document that is no manifest at all.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.manifest import parse_manifest
from kerrigan.core.yamlsource import MAX_MESSAGE

KEYS = (
    "name",
    "on",
    "scheduling",
    "tasks",
    "id",
    "run",
    "type",
    "vcpus",
    "timeout_s",
    "requirements",
    "labels",
    "tags",
    "strategy",
    "max_devkits",
    "priority",
    "queue_wait_limit_s",
    "pools",
    "capabilities",
    "push",
    "pull_request",
    "workflow_run",
    "merge_group",
    "branches",
    "workflows",
    "types",
    "sdk",
    "kerrigan.pool_id",
)
WORDS = ("push", "main", "spread", "pack", "gate", "command", "completed", "smoke", "2.2.0", "som", "uart")


def _digits(count: int) -> str:
    return ("9" * count)[:count]


numbers: st.SearchStrategy[str] = st.one_of(
    st.integers(-5, 5000).map(str),
    st.integers(19, 6000).map(_digits),
    st.integers(19, 6000).map(lambda n: "-" + _digits(n)),
    st.integers(1, 5000).map(lambda n: "0" * n + "4"),
    st.sampled_from(["1.5", "1e999", "-1e999", ".inf", ".nan", "-0.0", "0x10", "0o17", "1_000", "010"]),
)
leaves: st.SearchStrategy[str] = st.one_of(
    st.sampled_from(WORDS),
    numbers,
    st.sampled_from(["null", "~", "", "true", "false", "yes", "on", "off"]),
    st.sampled_from(["!!int 5", "!!str 3", "!!binary aGk=", "!custom x", "!!python/object:os.system x"]),
    st.sampled_from(["&a x", "&b [1, 2]", "&c {k: v}"]),
    st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=30).map(
        lambda text: json.dumps(text, ensure_ascii=False)
    ),
    st.sampled_from(['"\\ud800"', '"\\u0000"', '"\\x85"', "\u00a0", "\u2028x"]),
    st.integers(1, 1200).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 20_000).map(lambda n: "x" * n),
)
keys = st.one_of(
    st.sampled_from(KEYS), st.text(max_size=20).map(json.dumps), st.sampled_from(["[1, 2]", "? x"])
)


def _flow(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    mapping = st.lists(st.tuples(keys, children), max_size=5).map(
        lambda items: "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    )
    sequence = st.lists(children, max_size=5).map(lambda items: "[" + ", ".join(items) + "]")
    return st.one_of(mapping, sequence)


values = st.recursive(leaves, _flow, max_leaves=12)
fields = st.sampled_from(("type", "vcpus", "timeout_s", "requirements", "id", "run"))
# A task mostly well formed (an id and a command) with a few fields whose values are hostile.
task = st.tuples(st.integers(0, 3), st.lists(st.tuples(fields, st.one_of(numbers, values)), max_size=3)).map(
    lambda t: "{" + ", ".join([f"id: t{t[0]}", "run: ./x.sh"] + [f"{k}: {v}" for k, v in t[1]]) + "}"
)
tasks = st.one_of(
    values,
    st.lists(st.one_of(task, task, task, values), min_size=1, max_size=4).map(
        lambda items: "\n" + "".join(f"  - {item}\n" for item in items)
    ),
)
scheduling = st.lists(
    st.tuples(
        st.sampled_from(("strategy", "max_devkits", "priority", "queue_wait_limit_s", "labels", "tags")),
        st.one_of(numbers, values),
    ),
    max_size=3,
).map(lambda items: "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}")
top_value = {
    "name": st.one_of(st.sampled_from(["hil-smoke", "x"]), values),
    "on": st.one_of(st.sampled_from(["push", "[push, pull_request]", "{push: {branches: [main]}}"]), values),
    "scheduling": st.one_of(scheduling, scheduling, values),
    "tasks": tasks,
}


@st.composite
def manifests(draw: st.DrawFn) -> str:
    """A YAML document shaped like a manifest, with hostile leaves (sometimes no manifest at all)."""
    chosen = draw(
        st.one_of(st.just(sorted(top_value)), st.lists(st.sampled_from(sorted(top_value)), unique=True))
    )
    lines = [f"{key}: {draw(top_value[key])}" for key in chosen]
    if draw(st.integers(0, 4)) == 0:
        lines.append(f"{draw(keys)}: {draw(values)}")
    text = "\n".join(lines) + "\n"
    shape = draw(st.sampled_from(["mapping"] * 8 + ["leaf", "documents"]))
    if shape == "leaf":
        return draw(values) + "\n"
    if shape == "documents":
        return text + "---\n" + text
    return text


@settings(max_examples=200, deadline=None, derandomize=True)
@given(text=manifests())
def test_no_generated_manifest_makes_the_parser_raise(text: str) -> None:
    result = parse_manifest(text, "generated.yml")
    assert (result.workflow is None) == bool(result.errors)
    last_line = len(text.splitlines()) + 1  # YAML also breaks lines at U+2028, U+0085 ...
    for problem in result.errors + result.warnings:
        assert 1 <= problem.line <= last_line
        assert problem.file == "generated.yml"
        assert len(problem.message) <= MAX_MESSAGE, problem.message  # a value is quoted cut short
