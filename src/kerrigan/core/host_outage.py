"""A runner host gone silent, and the jobs that may still run there.

A runner host is offline until its agent's first heartbeat, and again once its last heartbeat is older than
a lease (:mod:`kerrigan.store.runners`). An agent stopped mid-job (``kill -9``, a crash, a cut network)
leaves its job's processes running on the host until the agent starts again and cleans up, while the server
ends the job ``runner_lost`` when its lease runs out. So while a host is offline the device pages and the
API name the jobs that held its devices when it was last heard of, and whether the server has ended them:
the device is not free to touch while one may still run there.

Pure: every time is given.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from kerrigan.core.device_status import when
from kerrigan.core.lifecycle import ENDED, JobState


@dataclass(frozen=True, slots=True)
class StrandedJob:
    """A job that held a device (or, with no board, room) on a runner host when the host was last heard of.

    ``ended_at`` is when the server ended it (``runner_lost`` when its lease ran out); ``None`` while it has
    not. Either way its processes may still run on the host until the host's agent starts again.
    """

    id: int
    session_id: str
    repository: str  # ``""``: the lab's own (a health check)
    task_id: str
    state: JobState
    reason: str | None
    ended_at: datetime | None
    devices: tuple[str, ...]  # those it held there; none for a job without a board
    started: bool = True  # its command had started (not only leased or accepted)

    @property
    def ended(self) -> bool:
        """Whether the server has ended it (the host may not know yet)."""
        return self.state in ENDED

    @property
    def held_words(self) -> str:
        """What it was doing on the host when the host went silent: ``running``, ``leased``, ``accepted``."""
        if self.ended:
            return "running" if self.started else "leased"
        return self.state.value


@dataclass(frozen=True, slots=True)
class HostOutage:
    """An offline runner host: when its agent was last heard of (``None``: never) and the jobs that held
    its devices then, by id."""

    host: str
    last_heard_at: datetime | None
    jobs: tuple[StrandedJob, ...] = ()

    def on(self, device_id: str) -> HostOutage:
        """The outage as one of its devices sees it: only the jobs that held that device."""
        return replace(self, jobs=tuple(job for job in self.jobs if device_id in job.devices))

    def __str__(self) -> str:
        """``runner host lab-a-01 offline since 2026-12-01 10:02 (its last heartbeat)``."""
        if self.last_heard_at is None:
            return f"runner host {self.host} offline: its agent has never spoken"
        return f"runner host {self.host} offline since {when(self.last_heard_at)} (its last heartbeat)"


def stranded_text(job: StrandedJob, name: str) -> str:
    """``job 42 (octo/firmware flash) was running here when its host went silent; ended runner_lost at
    2026-12-01 10:03; it may still be running on the host until its agent restarts``. ``name`` is how the
    reader may see the job (its repository and task, or words that hide them)."""
    words = f"job {job.id} ({name}) was {job.held_words} here when its host went silent; "
    if job.ended:
        words += f"ended {job.reason or job.state.value}"
        if job.ended_at is not None:
            words += f" at {when(job.ended_at)}"
    else:
        words += "not ended yet (it ends runner_lost when its lease runs out)"
    return words + "; it may still be running on the host until its agent restarts"
