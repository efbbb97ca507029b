"""Hold the failed board (DESIGN.md, "Boards in a person's hands"): a writer of the repository gets a
reservation of a failed job's device(s) (a gang job's: all of them), ``KERRIGAN_HOLD_S`` long, queued like
any reservation and pinned to exactly that device (``kerrigan.target_id``).

Which jobs may be held, which one ``/kerrigan hold [task]`` means, the requests a hold makes and the words
the check run and the replies use are decided here; :mod:`kerrigan.store.holds` applies them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from kerrigan.core.lifecycle import JobState
from kerrigan.core.requirements import LabelRequirement, Origin, Requirements
from kerrigan.core.reservations import MAX_WAIT_S, ReservationRequest, ReservationState

DEFAULT_HOLD_S: Final = 1800  # KERRIGAN_HOLD_S
TARGET_LABEL: Final = "kerrigan.target_id"
# The ends of a job that leave its board worth looking at: it failed, timed out, or failed and was retried.
HELD_STATES: Final = frozenset({JobState.FAILED, JobState.TIMED_OUT, JobState.RETRIED})


@dataclass(frozen=True, slots=True)
class HoldableJob:
    """What a hold needs of a job: which, where it ran, and how it ended."""

    pk: int
    task_id: str
    state: JobState
    devices: tuple[str, ...]  # its device, or a gang's in role order; empty: it held none
    attempt: int = 1


def failed(job: HoldableJob) -> bool:
    """Whether the job ended in a way its board may be held for (with a board to hold)."""
    return job.state in HELD_STATES and bool(job.devices)


def refusal(job: HoldableJob, retired: frozenset[str]) -> str | None:
    """Why ``job``'s boards cannot be held (``retired``: the devices that are), or None when they can."""
    if job.state not in HELD_STATES:
        return (
            f"job {job.pk} ({job.task_id}) did not fail (it is {job.state.value}): "
            "only a failed job's board is held"
        )
    if not job.devices:
        return f"job {job.pk} ({job.task_id}) ran on no board"
    gone = [device for device in job.devices if device in retired]
    if gone:
        return f"board {', '.join(gone)} of job {job.pk} is retired"
    return None


def hold_requests(job: HoldableJob, duration_s: int) -> list[ReservationRequest]:
    """One reservation request per device of ``job``, each pinned to its device by ``kerrigan.target_id``,
    waiting for it as long as the hold would last (the board may be running someone's job meanwhile)."""
    origin = (Origin(f"job {job.pk}", 0),)
    return [
        ReservationRequest(
            Requirements({TARGET_LABEL: LabelRequirement(TARGET_LABEL, (device,), origin)}, ()),
            duration_s,
            device=device,
            wait_s=min(duration_s, MAX_WAIT_S),
            note=f"hold of failed job {job.pk} ({job.task_id[:100]})",
        )
        for device in job.devices
    ]


@dataclass(frozen=True, slots=True)
class Choice:
    """The job a ``/kerrigan hold [task]`` means, or why none is meant (``problem``)."""

    job: HoldableJob | None
    problem: str = ""
    ambiguous: bool = False  # several tasks failed and none was named


def choose(jobs: Sequence[HoldableJob], task: str) -> Choice:
    """The failed job ``/kerrigan hold [task]`` means among the newest session's ``jobs``: the newest
    failed attempt of ``task``; without a task, the only task that failed. Else why none is."""
    held = [job for job in jobs if failed(job)]
    if task:
        held = [job for job in held if job.task_id == task]
        if not held:
            return Choice(None, f"no failed job of task `{task[:100]}` ran on a board")
        return Choice(max(held, key=lambda job: (job.attempt, job.pk)))
    tasks = sorted({job.task_id for job in held})
    if not tasks:
        return Choice(None, "no failed job ran on a board")
    if len(tasks) > 1:
        shown = ", ".join(f"`{name[:100]}`" for name in tasks[:5]) + (" …" if len(tasks) > 5 else "")
        problem = f"jobs of {len(tasks)} tasks failed ({shown}): name one, `/kerrigan hold TASK`"
        return Choice(None, problem, ambiguous=True)
    return Choice(max(held, key=lambda job: (job.attempt, job.pk)))


@dataclass(frozen=True, slots=True)
class HoldShown:
    """One board of a hold as the check run tells it."""

    login: str
    device: str
    job_pk: int
    task_id: str
    state: ReservationState
    until: datetime | None  # active: when it ends; waiting: how long it waits for the board


def hold_line(hold: HoldShown) -> str:
    """``@hubot holds imx8-01 (job 12, boot) until 2026-12-01 12:30 UTC``, or waits for it, or held it."""
    where = f"`{hold.device}` (job {hold.job_pk}, {hold.task_id})"
    when = hold.until.strftime("%Y-%m-%d %H:%M UTC") if hold.until is not None else "?"
    if hold.state is ReservationState.ACTIVE:
        return f"@{hold.login} holds {where} until {when}"
    if hold.state is ReservationState.WAITING:
        return f"@{hold.login} waits for {where}, busy now, until {when} at most"
    return f"@{hold.login} held {where}"
