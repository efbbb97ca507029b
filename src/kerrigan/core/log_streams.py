"""The logs a job keeps: the command's output, and its board's console (docs/runner.md, "Device control").

Each is a numbered stream of chunks of its own, sent by the runner host, masked, timed on arrival, capped and
kept alike; only where it is shown differs.
"""

from __future__ import annotations

import enum


class LogStream(enum.StrEnum):
    """Which of a job's logs a chunk belongs to."""

    OUTPUT = "output"  # what the command printed
    CONSOLE = "console"  # what its board's console printed, from before power-on to the job's end
