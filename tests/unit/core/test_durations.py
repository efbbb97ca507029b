"""Durations as people write them, for health checks and reservations."""

from __future__ import annotations

import pytest

from kerrigan.core.durations import DurationError, duration_text, parse_duration


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("90s", 90), ("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("1d2h", 93_600), (45, 45), (" 600 ", 600)],
)
def test_a_duration_is_read_in_seconds(written: object, seconds: int) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("", "not a duration: a number of seconds"),
        ("1.5h", "not a duration: a number of seconds"),
        ("-1h", "not a duration: a number of seconds"),
        ("2 hours", "not a duration: a number of seconds"),
        ("1w", "not a duration: a number of seconds"),
        (True, "not a duration: a number of seconds"),
        ("30m1h", "give each unit once, the largest first"),
        ("1h1h", "give each unit once, the largest first"),
    ],
)
def test_what_is_not_a_duration_is_refused_saying_what_one_is(written: object, says: str) -> None:
    with pytest.raises(DurationError, match=says):
        parse_duration(written)


def test_a_duration_is_written_in_its_largest_exact_unit() -> None:
    assert [duration_text(s) for s in (86_400, 7200, 1800, 301, 0)] == ["1d", "2h", "30m", "301s", "0s"]


def test_a_long_hostile_text_is_refused_at_once() -> None:
    # A run of digits that ends badly once took exponential time to refuse (a form field anyone may post).
    for text in ("1" * 40 + "x", "1" * 31 + "x", "9" * 10_000, "1h" * 20):
        with pytest.raises(DurationError, match="not a duration"):
            parse_duration(text)
    assert parse_duration("123456789s") == 123_456_789
