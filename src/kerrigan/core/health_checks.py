"""A device's health check: the command that says whether the device works, and when it runs.

A pool (for its devices) or a device (over its pool's) may define one in the inventory::

    health_check: {run: "/opt/lab/health/modalix.sh", every: 24h, timeout_s: 600, vcpus: 1}

It runs on the device's runner host as a job of its own session (no repository, no check run), every
``every`` while the device is idle, after an infrastructure failure on the device, when the device returns
from maintenance, and on demand. Passing sets the device ``good``, failing sets it ``bad``.

Everything here is pure: times are given, never read from a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

from kerrigan.core import durations
from kerrigan.core.durations import DurationError

HEALTH_CHECK_EVENT: Final = "health_check"  # a health-check session's event (it has no repository)
HEALTH_CHECK_WORKFLOW: Final = "health-check"
HEALTH_CHECK_TASK: Final = "health-check"
HEALTH_CHECK_KEYS: Final = ("run", "every", "timeout_s", "vcpus")

MIN_EVERY_S: Final = 5 * 60
MAX_EVERY_S: Final = 365 * 24 * 3600
DEFAULT_TIMEOUT_S: Final = 600
MAX_TIMEOUT_S: Final = 86_400
DEFAULT_VCPUS: Final = 1
MAX_VCPUS: Final = 256
MAX_RUN: Final = 4096

PASSED: Final = "health check passed"
FAILED: Final = "health check failed"


class HealthCheckError(ValueError):
    """A health check's field that is not well formed."""


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """What runs to check a device: ``run`` in a fresh workspace on its runner host, every ``every_s``
    seconds while it is idle (``None``: only when something asks), for at most ``timeout_s``."""

    run: str
    every_s: int | None = None
    timeout_s: int = DEFAULT_TIMEOUT_S
    vcpus: int = DEFAULT_VCPUS

    def as_document(self) -> dict[str, object]:
        """The check as the inventory file writes it (and the database and the API keep it)."""
        document: dict[str, object] = {"run": self.run}
        if self.every_s is not None:
            document["every"] = durations.duration_text(self.every_s)
        document["timeout_s"] = self.timeout_s
        document["vcpus"] = self.vcpus
        return document

    def due(self, last: datetime | None, now: datetime) -> bool:
        """Whether its ``every`` says it runs again at ``now``, its last run having been at ``last``."""
        if self.every_s is None:
            return False
        return last is None or now - last >= timedelta(seconds=self.every_s)


def parse_duration(value: object) -> int:
    """``30m``, ``24h``, ``7d``, ``90s`` or a number of seconds, at least 5 minutes; in seconds."""
    try:
        seconds = durations.parse_duration(value)
    except DurationError as exc:
        raise HealthCheckError(str(exc)) from None
    if not MIN_EVERY_S <= seconds <= MAX_EVERY_S:
        raise HealthCheckError(f"{value!r} is {seconds} s: it must be 5 minutes (300 s) to 365 days")
    return seconds


def check_run(text: str) -> str:
    """The command: a non-empty string of at most 4096 characters, without NUL (no command line holds one)."""
    if not text.strip():
        raise HealthCheckError("must be a non-empty command")
    if "\0" in text:
        raise HealthCheckError("holds a NUL character, which no command line can")
    if len(text) > MAX_RUN:
        raise HealthCheckError(f"is {len(text)} characters; at most {MAX_RUN}")
    return text


def health_check_from_document(document: Mapping[str, object]) -> HealthCheck:
    """A check :meth:`HealthCheck.as_document` wrote; :class:`HealthCheckError` if it is not one."""
    unknown = set(document) - set(HEALTH_CHECK_KEYS)
    if unknown:
        raise HealthCheckError(f"unknown key {sorted(unknown)[0]!r}")
    run = document.get("run")
    if not isinstance(run, str):
        raise HealthCheckError("run must be a string")
    every = document.get("every")
    timeout_s, vcpus = document.get("timeout_s", DEFAULT_TIMEOUT_S), document.get("vcpus", DEFAULT_VCPUS)
    if not isinstance(timeout_s, int) or not 1 <= timeout_s <= MAX_TIMEOUT_S:
        raise HealthCheckError(f"timeout_s must be 1 to {MAX_TIMEOUT_S}, not {timeout_s!r}")
    if not isinstance(vcpus, int) or not 1 <= vcpus <= MAX_VCPUS:
        raise HealthCheckError(f"vcpus must be 1 to {MAX_VCPUS}, not {vcpus!r}")
    return HealthCheck(check_run(run), parse_duration(every) if every is not None else None, timeout_s, vcpus)
