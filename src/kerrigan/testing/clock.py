"""Clocks the test moves: one of datetimes for the store and the app, one of seconds (and its sleep) for code
that waits, so that nothing tested waits on the real time."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


class FakeClock:
    """A clock that only moves when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 29, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@dataclass
class FakeTime:
    """A clock of seconds and its sleep, for code that takes both (the GitHub client, the runner's requests
    to GitHub, the stand-in's rate limits): sleeping moves the clock on at once and is recorded. It starts at
    the wall clock's time unless told; the test may also move :attr:`now` itself."""

    now: float = field(default_factory=time.time)
    slept: list[float] = field(default_factory=list)

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds
