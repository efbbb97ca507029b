"""The printable rule: Unicode 14's non-printable categories from a fixed table, stated as a pattern."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.printable import (
    NOT_PRINTABLE,
    PRINTABLE_CHARACTER,
    is_printable,
    printable_pattern,
)

NOT_PRINTABLE_CATEGORIES = {"Cc", "Cf", "Zs", "Zl", "Zp", "Cs", "Co"}


def _ranges(predicate: object) -> tuple[tuple[int, int], ...]:
    found: list[tuple[int, int]] = []
    start = None
    for code_point in range(sys.maxunicode + 2):
        hit = code_point <= sys.maxunicode and predicate(code_point)  # type: ignore[operator]
        if hit and start is None:
            start = code_point
        elif not hit and start is not None:
            found.append((start, code_point - 1))
            start = None
    return tuple(found)


@pytest.mark.skipif(
    unicodedata.unidata_version != "14.0.0",
    reason=f"the table is Unicode 14's; this Python has Unicode {unicodedata.unidata_version}",
)
def test_the_table_is_unicode_14s_non_printable_categories() -> None:
    def not_printable(code_point: int) -> bool:
        return chr(code_point) != " " and unicodedata.category(chr(code_point)) in NOT_PRINTABLE_CATEGORIES

    assert _ranges(not_printable) == NOT_PRINTABLE


@pytest.mark.parametrize(
    "text",
    ["a", "board=nrf52840 rev B", "café", "Ünïcödé", "日本語", "🔧 swapped the cable", " "],
)
def test_text_a_person_writes_is_printable(text: str) -> None:
    assert is_printable(text)


@pytest.mark.parametrize(
    "text",
    [
        "line\nbreak",
        "tab\there",
        "nul\x00",
        "del\x7f",
        "c1\x85",
        "no-break\u00a0space",
        "zero\u200bwidth",
        "right-to-left \u202e override",
        "line\u2028separator",
        "bom\ufeff",
        "private\ue000use",
        "lone \ud800 surrogate",
        "plane 16 \U00100000",
    ],
)
def test_controls_invisible_and_private_characters_are_not(text: str) -> None:
    assert not is_printable(text)


def test_a_code_point_unicode_14_leaves_unassigned_is_printable() -> None:
    # U+1FAE8 (shaking face) came with Unicode 15: isprintable refuses it on Python 3.11, the rule does not,
    # so a text takes the same answer on every server.
    assert is_printable("\U0001fae8")


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_the_documents_pattern_agrees_with_the_rule(text: str) -> None:
    # Hypothesis's text holds no lone surrogate, as JSON text cannot: there the pattern and the rule agree.
    assert (re.fullmatch(PRINTABLE_CHARACTER + "*", text) is not None) == is_printable(text)


@settings(max_examples=200)
@given(st.from_regex(printable_pattern(1, 20), fullmatch=True))
def test_what_the_pattern_generates_the_rule_accepts(text: str) -> None:
    assert 1 <= len(text) <= 20
    assert is_printable(text)
