"""Diagnostics stored compactly: an exact round trip, old plain rows, the size at 10,000 devices."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.diagnostics_store import COMPACT_FROM, compact, expand
from kerrigan.core.explain import resolution_json
from kerrigan.core.matching import resolve
from kerrigan.testing.builders import requirements
from kerrigan.testing.labs import synthetic_lab

_text = st.text(max_size=12)
_reasons = st.sampled_from(
    [
        "form-factor missing",
        "sdk expected 2.2.0, got 2.0.0",
        "tag uart-debgu missing",
        "device in maintenance",
    ]
)
_verdict = st.fixed_dictionaries(
    {
        "device": st.one_of(_text, st.from_regex(r"dev-[0-9]{6}", fullmatch=True)),
        "pool": st.one_of(_text, st.sampled_from(["pool-0000", "pool-0001"])),
        "reasons": st.lists(st.one_of(_reasons, _text), max_size=4),
        "never": st.booleans(),
    }
)
# Lists the compact form must pass over as they are: other shapes than explain writes.
_odd_entry = st.one_of(
    st.none(),
    st.integers(),
    st.fixed_dictionaries(
        {"device": _text, "pool": st.none(), "reasons": st.just([]), "never": st.booleans()}
    ),
    st.fixed_dictionaries({"device": _text, "reasons": st.lists(_text, max_size=2)}),
)
_task = st.fixed_dictionaries(
    {
        "id": _text,
        "line": st.integers(1, 500),
        "requested": st.fixed_dictionaries({"labels": st.dictionaries(_text, st.lists(_text, max_size=2))}),
        "outcome": st.sampled_from(["eligible", "waiting", "unschedulable"]),
        "eligible_pools": st.lists(_text, max_size=3),
        "eligible_devices": st.one_of(
            st.lists(_text, max_size=60), st.lists(st.one_of(_text, st.integers()))
        ),
        "rejected_devices": st.one_of(
            st.lists(_verdict, max_size=60),
            st.lists(st.one_of(_verdict, _odd_entry), max_size=40),
        ),
        "nearest_misses": st.lists(_verdict, max_size=3),
    }
)
_document = st.fixed_dictionaries(
    {
        "workflow": _text,
        "file": _text,
        "errors": st.just([]),
        "tasks": st.lists(st.one_of(_task, st.integers()), max_size=3),
        "retry": st.fixed_dictionaries({"infrastructure": st.integers(0, 5)}),
        "scheduling": st.fixed_dictionaries({"max_devkits": st.integers(1, 8)}),
    }
)


def _through_json(value: Any) -> Any:
    """What the JSON column gives back."""
    return json.loads(json.dumps(value))


@settings(max_examples=300, deadline=None)
@given(_document, st.sampled_from([0, 1, 5, COMPACT_FROM]))
def test_expand_gives_back_exactly_the_document_compacted(document: dict[str, Any], from_length: int) -> None:
    stored = _through_json(compact(document, from_length=from_length))
    expanded = expand(stored)
    assert expanded == document
    assert json.dumps(expanded) == json.dumps(document)  # key order too, as the API would write it


@settings(max_examples=100, deadline=None)
@given(_document)
def test_what_the_dispatcher_and_retry_read_stays_readable_without_expanding(
    document: dict[str, Any],
) -> None:
    stored = compact(document, from_length=0)
    assert stored["retry"] == document["retry"]
    assert stored["scheduling"] == document["scheduling"]
    for before, after in zip(document["tasks"], stored["tasks"], strict=True):
        if isinstance(before, dict):
            assert after["requested"] == before["requested"]
            assert after["nearest_misses"] == before["nearest_misses"]


def test_a_row_stored_before_compaction_reads_as_it_is() -> None:
    plain = {
        "workflow": "hil",
        "tasks": [
            {
                "id": "smoke",
                "eligible_devices": [f"dev-{n}" for n in range(COMPACT_FROM * 2)],
                "rejected_devices": [
                    {"device": f"dev-x{n}", "pool": "p", "reasons": ["tag t missing"], "never": True}
                    for n in range(COMPACT_FROM * 2)
                ],
            }
        ],
        "retry": {"infrastructure": 2},
    }
    assert expand(_through_json(plain)) == plain


def test_short_lists_stay_plain_and_long_ones_are_kept_by_reference() -> None:
    verdict = {"device": "dev-1", "pool": "p", "reasons": ["tag t missing"], "never": True}
    short = {"tasks": [{"rejected_devices": [verdict] * (COMPACT_FROM - 1)}]}
    long = {"tasks": [{"rejected_devices": [verdict] * COMPACT_FROM}]}
    assert compact(short) == short
    stored = compact(long)["tasks"][0]["rejected_devices"]
    assert stored["count"] == COMPACT_FROM
    assert stored["reasons"] == ["tag t missing"]
    assert stored["verdicts"] == [[[0], True]]


def test_an_unschedulable_task_against_10000_devices_is_stored_in_under_64_kb() -> None:
    lab = synthetic_lab(100, 100)
    unmatchable = requirements({"form-factor": "som", "sdk": "2.2.0"}, tags=["uart-debgu"])
    task = {"id": "smoke", "line": 3, **resolution_json(resolve(unmatchable, lab, repository="octo/fw"))}
    document = {"workflow": "hil", "tasks": [task]}
    assert task["outcome"] == "unschedulable"
    assert len(task["rejected_devices"]) == 10_000  # type: ignore[arg-type]
    plain = len(json.dumps(document))
    stored = len(json.dumps(compact(document)))
    assert plain > 1_000_000  # what a session stored before
    assert stored < 64 * 1024
    assert expand(_through_json(compact(document))) == _through_json(document)


def test_a_damaged_stored_list_is_handed_on_as_it_is_not_raised() -> None:
    verdict = {"device": "dev-1", "pool": "p", "reasons": ["tag t missing"], "never": True}
    stored = compact({"tasks": [{"id": "smoke", "rejected_devices": [verdict] * 40}]}, from_length=1)
    damaged = _through_json(stored)
    damaged["tasks"][0]["rejected_devices"]["columns"] = "not base64 of deflate!"
    assert expand(damaged) == damaged
    shortened = _through_json(stored)
    shortened["tasks"][0]["rejected_devices"]["verdicts"] = []
    assert expand(shortened) == shortened
