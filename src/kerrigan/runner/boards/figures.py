"""What the agent counts of its boards for its ``/metrics`` (:mod:`kerrigan.runner.metrics`): every power
switch, by why it was made, and how long each boot took.

A switch is counted once made (the switch answered): a power cycle is one switch, so is a switch on or
off; a status read is none. The reasons are a closed set (:class:`SwitchReason`), each shown at 0 from the
start for a device with power so that ``rate()`` sees the first.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field
from typing import Final

# Upper bounds of the boot histogram's buckets, in seconds: a board's boot takes seconds to minutes (the
# devices file's boot.timeout_s is 120 in the design's example).
BOOT_BUCKETS: Final = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)


class SwitchReason(enum.Enum):
    """Why the agent switched a board's power."""

    JOB = "job"  # before a job's command: its power cycle (or, under power: keep, a board off switched on)
    RECOVERY = "recovery"  # the power cycle of a recovery the server queued (core.recovery)
    JOB_REQUEST = "job_request"  # the job's own `kerrigan device power cycle|on|off`
    AFTER_JOB = "after_job"  # after a job: after_job: off (a restarted agent's too)
    PERSON = "person"  # a person's `kerrigan power` on a board they hold (core.device_power)


@dataclass
class BootTimes:
    """One device's boots: how many took at most each of :data:`BOOT_BUCKETS`, how many, how long in all."""

    within: list[int] = field(default_factory=lambda: [0] * len(BOOT_BUCKETS))
    count: int = 0
    total_s: float = 0.0


@dataclass
class BoardFigures:
    """The agent's figures of its boards since it started (its memory only: a restart starts them at 0)."""

    switches: collections.Counter[tuple[str, SwitchReason]] = field(default_factory=collections.Counter)
    boots: dict[str, BootTimes] = field(default_factory=dict)

    def switched(self, device_id: str, reason: SwitchReason) -> None:
        """``device_id``'s power was switched (or cycled) for ``reason``."""
        self.switches[device_id, reason] += 1

    def booted(self, device_id: str, seconds: float) -> None:
        """``device_id`` booted ``seconds`` after its power-on (boot.ready seen)."""
        times = self.boots.setdefault(device_id, BootTimes())
        times.count += 1
        times.total_s += seconds
        for index, bound in enumerate(BOOT_BUCKETS):
            if seconds <= bound:
                times.within[index] += 1
