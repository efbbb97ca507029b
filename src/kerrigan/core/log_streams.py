"""The logs a job keeps: the command's output, and its board's console (docs/runner.md, "Device control").

Each is a numbered stream of chunks of its own, sent by the runner host, masked, timed on arrival, capped and
kept alike; only where it is shown differs.
"""

from __future__ import annotations

import enum
from typing import Final

from kerrigan.core.lifecycle import JobState


class LogStream(enum.StrEnum):
    """Which of a job's logs a chunk belongs to."""

    OUTPUT = "output"  # what the command printed
    CONSOLE = "console"  # what its board's console printed, from before power-on to the job's end


# The jobs whose check run shows the last lines of their console: those that failed (for the code, or
# because the board did not power on, boot, or keep its console: ``power_failed``, ``boot_failed``,
# ``console_lost``), and those that ran out of time (a board that hung). A job that passed shows none.
CONSOLE_SHOWN: Final = frozenset({JobState.FAILED, JobState.RETRIED, JobState.TIMED_OUT})
