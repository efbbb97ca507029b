"""The push's trip through the code: which of Kerrigan's files one push enters, and how often it doubles back.

Not a timing: a reading aid for issue 27 ("following a push through the code enters 14 files and returns to
one it left 19 times"). It runs one existing integration test, a push to main that starts seven workflows and
ends with their check runs at the GitHub stand-in
(``tests/integration/github/test_push.py::test_push_to_main_creates_a_check_run_per_triggered_workflow``),
with a profiler that records the first call of every function of ``src/kerrigan`` (``kerrigan.testing``,
the stand-in, left out) made under the push event's router (``github/routes/push.py``), on the event
loop's thread: the order in which a reader following the push meets them. (Work handed to threads is not
followed: its entry point, called on the loop's thread, is.)

A reader follows the calls a few levels deep, not into every small function, so the trip is counted at
depths 1 to 4 (how many of Kerrigan's frames are on the stack from the router's down, the call's own
included; depth 1 is the router) and at every depth. For each: the files entered, the moves from one file
to another, the returns (a move into a file that the trip had left before) and the files returned to most.

    python benchmarks/trace_push_trip.py
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE = str(ROOT / "src" / "kerrigan") + "/"
LEFT_OUT = (SOURCE + "testing/",)
ROUTER = SOURCE + "github/routes/push.py"  # where the trip starts: the push event's router
TEST = "tests/integration/github/test_push.py::test_push_to_main_creates_a_check_run_per_triggered_workflow"
DEPTHS = (1, 2, 3, 4, None)  # None: every depth


def _ours(filename: str) -> bool:
    return filename.startswith(SOURCE) and not filename.startswith(LEFT_OUT)


def _depth(frame: FrameType | None) -> int | None:
    """How many of Kerrigan's frames are on the stack from the push's router down (None: not under it)."""
    depth = 0
    while frame is not None:
        filename = frame.f_code.co_filename
        if _ours(filename):
            depth += 1
            if filename == ROUTER:
                return depth
        frame = frame.f_back
    return None


@dataclass
class Trip:
    """The first call of each of Kerrigan's functions, in order: (depth, file)."""

    calls: list[tuple[int, str]] = field(default_factory=list)
    seen: set[object] = field(default_factory=set)

    def profile(self, frame: FrameType, event: str, _arg: Any) -> None:
        code = frame.f_code
        # The first call of each function only: a coroutine's every resumption is a "call" too, and the
        # background loops call the same few functions on every round.
        if event != "call" or code in self.seen or not _ours(code.co_filename):
            return
        depth = _depth(frame)
        if depth is None:
            return
        self.seen.add(code)
        self.calls.append((depth, code.co_filename[len(SOURCE) :]))

    def files(self, max_depth: int | None) -> list[str]:
        """The files entered in order, at most ``max_depth`` deep, one entry per stay in a file."""
        out: list[str] = []
        for depth, path in self.calls:
            if max_depth is not None and depth > max_depth:
                continue
            if not out or out[-1] != path:
                out.append(path)
        return out


class Tracing:
    """A pytest plugin: the profiler on while the test's body runs."""

    def __init__(self, trip: Trip) -> None:
        self.trip = trip

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        sys.setprofile(self.trip.profile)
        try:
            yield
        finally:
            sys.setprofile(None)


def report(trip: Trip) -> None:
    """Print the figures of the trip at each depth."""
    print(f"{TEST}\n{len(trip.calls)} functions of src/kerrigan called\n")
    print(f"{'depth':>6} {'files':>6} {'moves':>6} {'returns':>8}  returned to most")
    for max_depth in DEPTHS:
        path = trip.files(max_depth)
        seen: set[str] = set()
        returns: Counter[str] = Counter()
        for file in path:
            if file in seen:
                returns[file] += 1
            seen.add(file)
        most = ", ".join(f"{name} {count}" for name, count in returns.most_common(4))
        label = "all" if max_depth is None else f"<={max_depth}"
        print(f"{label:>6} {len(seen):>6} {max(len(path) - 1, 0):>6} {sum(returns.values()):>8}  {most}")


def main() -> int:
    trip = Trip()
    arguments = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", str(ROOT / TEST)]
    code = pytest.main(arguments, plugins=[Tracing(trip)])
    if code != 0:
        print(f"the traced test failed (pytest exit {code})")
        return int(code)
    report(trip)
    return 0


if __name__ == "__main__":
    sys.exit(main())
