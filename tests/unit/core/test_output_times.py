"""Each line of a raw log gets the arrival time of the chunk it began in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from kerrigan.core.output_times import LineStamper, stamp

AT = datetime(2026, 12, 1, 17, 30, 0, 5000, tzinfo=UTC)


def test_a_stamp_is_utc_to_the_millisecond() -> None:
    assert stamp(AT) == "2026-12-01T17:30:00.005Z "
    assert stamp(AT.astimezone(timezone(timedelta(hours=2)))) == "2026-12-01T17:30:00.005Z "


def test_a_line_split_over_chunks_keeps_the_time_it_began_at() -> None:
    stamper = LineStamper()
    later = AT + timedelta(minutes=1)
    text = stamper.feed("a\nb", AT) + stamper.feed("c\n\nd\n", later) + stamper.feed("", later)
    assert text == f"{stamp(AT)}a\n{stamp(AT)}bc\n{stamp(later)}\n{stamp(later)}d\n"


def test_a_chunk_without_a_time_leaves_its_lines_bare() -> None:
    stamper = LineStamper()
    assert stamper.feed("x\ny\n", None) + stamper.feed("z", AT) == f"x\ny\n{stamp(AT)}z"
