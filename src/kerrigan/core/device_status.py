"""What a device's state and health say, and a runner host's pause, in the words diagnostics use.

A device's *state* (available, maintenance, offline, retired) is set by people: admins and the owners of its
pool, with a reason, who set it, since when and, for maintenance, an optional ``until`` after which it is
available again. Its *health* (good, unknown, bad) is set by Kerrigan: by its health check, or by three
infrastructure failures in a row without one. A ``bad`` device is not eligible (*not yet*); ``unknown`` and
``good`` are. A runner host may be *paused* with a reason and an optional ``until``: its devices get no new
jobs while the running ones finish. A device its runner host does not find (``--devices-file``) is
*absent*.

Every sentence here is pure: times are given, never read from a clock.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final


class Health(enum.StrEnum):
    """Whether a device works, as Kerrigan last found out."""

    GOOD = "good"
    UNKNOWN = "unknown"
    BAD = "bad"


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """A device's health, why, since when, and the health-check job that decided it (if one did)."""

    health: Health = Health.UNKNOWN
    reason: str = ""
    since: datetime | None = None
    job: int | None = None

    @property
    def eligible(self) -> bool:
        """Whether the device may take jobs as far as its health goes."""
        return self.health is not Health.BAD


UNKNOWN_HEALTH: Final = DeviceHealth()
INFRASTRUCTURE_FAILURES_FOR_BAD: Final = 3  # in a row, on a device without a health check


@dataclass(frozen=True, slots=True)
class StateNote:
    """Who set a device's state, why, since when and until when (all optional: the inventory file sets a
    state with a reason only)."""

    reason: str = ""
    by: str = ""
    since: datetime | None = None
    until: datetime | None = None


NO_NOTE: Final = StateNote()


@dataclass(frozen=True, slots=True)
class HostPause:
    """A paused runner host: no new jobs for its devices until it is resumed (or ``until``). A person pauses
    one; Kerrigan pauses one briefly by itself after it refused a job for lack of room (``refusal_hold``)."""

    reason: str
    by: str
    since: datetime
    until: datetime | None = None


def when(at: datetime) -> str:
    """A time as diagnostics write it: ``2026-12-01 09:12`` (UTC)."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")


def _note_words(note: StateNote) -> str:
    words = ""
    if note.since is not None:
        words += f" since {when(note.since)}"
    if note.by:
        words += f" by {note.by}"
    if note.until is not None:
        words += f" until {when(note.until)}"
    if note.reason:
        words += f": {note.reason}"
    return words


def state_text(state: str, note: StateNote) -> str:
    """``device in maintenance since 2026-12-01 09:12 by hubot until 2026-12-01 18:00: reflashing``."""
    rule = "device in maintenance" if state == "maintenance" else f"device {state}"
    return rule + _note_words(note)


def health_text(health: DeviceHealth) -> str:
    """``device health bad since 2026-12-01 10:02: health check failed (job 812)``."""
    words = f"device health {health.health.value}"
    if health.since is not None:
        words += f" since {when(health.since)}"
    if health.reason:
        words += f": {health.reason}"
        if health.job is not None:
            words += f" (job {health.job})"
    elif health.job is not None:
        words += f": job {health.job}"
    return words


def pause_text(host: str, pause: HostPause) -> str:
    """``runner host lab-a-01 paused by octocat until 2026-12-01 18:00: kernel upgrade``."""
    # The note's words without its since (the page says when the pause began).
    return f"runner host {host} paused" + _note_words(StateNote(pause.reason, pause.by, None, pause.until))


# How long a runner host that refused a job for lack of room gets no new jobs: the job it gave back goes to
# another host meanwhile, instead of straight back to the one that cannot take it (a disk under its floor
# stays so for minutes; a full queue drains in seconds).
REFUSAL_HOLD_S: Final = {"runner_disk_full": 60, "runner_full": 5}


def refusal_hold(reason: str, detail: str, at: datetime, by: str) -> HostPause | None:
    """The pause a capacity refusal (``reason`` with the runner's ``detail``) at ``at`` puts on its host,
    or None for a reason that does not hold it."""
    hold_s = REFUSAL_HOLD_S.get(reason)
    if hold_s is None:
        return None
    words = f"it refused a job {reason}" + (f" ({detail})" if detail else "")
    return HostPause(words[:500], by, at, at + timedelta(seconds=hold_s))


@dataclass(frozen=True, slots=True)
class DeviceReservation:
    """A person holding the device (:mod:`kerrigan.core.reservations`): who, until when, and why."""

    login: str
    until: datetime
    note: str = ""

    def __str__(self) -> str:
        """``device reserved by hubot until 2026-12-01 12:30: UART bring-up``."""
        return f"device reserved by {self.login} until {when(self.until)}" + (
            f": {self.note}" if self.note else ""
        )


def absent_text(host: str) -> str:
    """``device absent from runner host lab-a-01``."""
    return f"device absent from runner host {host}"


def maintenance_over(until: datetime | None, now: datetime) -> bool:
    """Whether a maintenance (or a pause) set to end ``until`` has ended at ``now``."""
    return until is not None and until <= now
