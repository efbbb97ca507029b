"""Times as clients write them (RFC 3339) read into UTC; a time past the calendar's ends is held there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kerrigan.core.instants import FIRST, LAST, TimeError, read_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01T18:00:00Z", datetime(2026, 12, 1, 18, tzinfo=UTC)),
        ("2026-12-01t18:00:00z", datetime(2026, 12, 1, 18, tzinfo=UTC)),
        ("2026-12-01T20:00:00+02:00", datetime(2026, 12, 1, 18, tzinfo=UTC)),
        ("2026-12-01T18:00:00.123456789Z", datetime(2026, 12, 1, 18, 0, 0, 123456, tzinfo=UTC)),
        (" 2026-12-01T18:00:00Z ", datetime(2026, 12, 1, 18, tzinfo=UTC)),
        ("0001-01-01T00:00:00+01:00", FIRST),
        ("9999-12-31T23:00:00-12:00", LAST),
    ],
)
def test_rfc_3339_times_are_read_into_utc(text: str, expected: datetime) -> None:
    assert read_time(text) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("2026-12-01T18:00:00", "needs its offset"),
        ("tomorrow", "is not an ISO 8601 time"),
        ("2026-13-01T18:00:00Z", "is not an ISO 8601 time"),
        ("2" * 41, "must be an ISO 8601 time"),
    ],
)
def test_other_texts_are_refused_saying_which_rule(text: str, words: str) -> None:
    with pytest.raises(TimeError, match=words):
        read_time(text)


@given(st.datetimes(timezones=st.timezones()))
def test_every_aware_time_written_in_iso_form_is_read(at: datetime) -> None:
    read = read_time(at.isoformat())
    assert read.tzinfo is UTC
    if FIRST + timedelta(days=1) < read < LAST - timedelta(days=1):
        assert read == at.astimezone(UTC)
