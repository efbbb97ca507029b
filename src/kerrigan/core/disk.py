"""Disk admission on a runner host, the workspace eviction it plans, and how long history and workspaces live.

Seed 003's rules, with a smaller default floor. The hard floor is ``--free-space-floor-bytes`` (8 GiB by
default; 0 turns admission and cleanup off) and the soft goal is twice the floor. At or above the soft goal
nothing is evicted. Below it, workspaces unused for 30 minutes go first, least recently used first, until the
soft goal is reached. When
free space was under the hard floor, recently used workspaces follow, again least recently used first, until
the soft goal. If the planned free space is still under the floor, the job is refused with
``runner_disk_full``. Running and reserved workspaces, and those the caller protects (the incoming job's
workspace and its siblings), are never evicted.

Retention: a job record lives 24 hours from the later of its end and the time in its id; a task workspace
expires after 24 hours idle; a head workspace survives idle expiry but stays evictable under disk pressure.

Times are seconds on one clock the caller reads; nothing here reads it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, Literal

GIB: Final = 1 << 30
# Seed 003's 128 GiB was for build machines that compile large trees; a runner host here drives boards,
# and one with a 64 GB disk (or 76 GiB free) would refuse every job under it. 8 GiB is twice the largest
# repository the agent unpacks by default (``UnpackLimits``: 4 GiB), so an admitted job has room for its
# source and as much again for what it builds and uploads.
DEFAULT_FLOOR_BYTES: Final = 8 * GIB
IDLE_EVICTION_S: Final = 30 * 60
RETENTION_S: Final = 24 * 60 * 60


class WorkspaceKind(enum.StrEnum):
    """Whether a workspace expires after a day idle (``task``) or stays until disk pressure (``head``)."""

    TASK = "task"
    HEAD = "head"


@dataclass(frozen=True, slots=True)
class Workspace:
    """One workspace directory under the runner's work dir, as the runner last saw it."""

    name: str
    size_bytes: int
    last_used_s: float
    running: bool = False
    reserved: bool = False
    kind: WorkspaceKind = WorkspaceKind.TASK


@dataclass(frozen=True, slots=True)
class DiskPolicy:
    """The hard floor of free space and how long a workspace must be unused to count as idle."""

    floor_bytes: int = DEFAULT_FLOOR_BYTES
    idle_s: float = IDLE_EVICTION_S

    def __post_init__(self) -> None:
        if self.floor_bytes < 0:
            raise ValueError(f"floor_bytes must be 0 or more, got {self.floor_bytes}")
        if self.idle_s < 0:
            raise ValueError(f"idle_s must be 0 or more, got {self.idle_s}")

    @property
    def enabled(self) -> bool:
        """A floor of 0 turns admission checks and cleanup off."""
        return self.floor_bytes > 0

    @property
    def soft_goal_bytes(self) -> int:
        """The free space cleanup aims for: twice the floor."""
        return 2 * self.floor_bytes

    def shortfall(self, free_bytes: int) -> str | None:
        """What free space under the floor means, with both figures; ``None`` at or above it, or when off."""
        if not self.enabled or free_bytes >= self.floor_bytes:
            return None
        return (
            f"free disk {free_bytes / GIB:,.1f} GiB is under the floor of {self.floor_bytes / GIB:,.1f} GiB "
            "(--free-space-floor-bytes): every job is refused runner_disk_full until space is freed or the "
            "floor lowered"
        )


@dataclass(frozen=True, slots=True)
class DiskFull:
    """The typed refusal ``runner_disk_full``: free space after planned eviction, and the floor it missed."""

    free_bytes: int
    floor_bytes: int
    reason: Literal["runner_disk_full"] = field(default="runner_disk_full", init=False)


@dataclass(frozen=True, slots=True)
class AdmissionPlan:
    """The workspaces to evict, in order, and whether the job is admitted once they are gone."""

    evict: tuple[Workspace, ...]
    free_bytes: int
    refusal: DiskFull | None = None

    @property
    def admitted(self) -> bool:
        """Whether the job may go ahead."""
        return self.refusal is None

    @property
    def evicted_names(self) -> tuple[str, ...]:
        """The names of the workspaces to evict, in eviction order."""
        return tuple(workspace.name for workspace in self.evict)


def evictable(workspace: Workspace, protected: frozenset[str]) -> bool:
    """Whether cleanup may ever delete this workspace."""
    return not (workspace.running or workspace.reserved or workspace.name in protected)


def _least_recently_used_first(workspaces: Iterable[Workspace]) -> list[Workspace]:
    # Names break ties so the same snapshot always gives the same plan.
    return sorted(workspaces, key=lambda workspace: (workspace.last_used_s, workspace.name))


def _eviction_order(
    free_bytes: int,
    workspaces: Iterable[Workspace],
    policy: DiskPolicy,
    now_s: float,
    protected: frozenset[str],
) -> Iterator[Workspace]:
    """Candidates in the order cleanup takes them: idle ones, then (under the floor) recent ones."""
    candidates = [workspace for workspace in workspaces if evictable(workspace, protected)]
    idle = [workspace for workspace in candidates if now_s - workspace.last_used_s >= policy.idle_s]
    yield from _least_recently_used_first(idle)
    # Hard pressure is judged on the space measured before cleanup: once under the floor, cleanup keeps
    # going to the soft goal so the next job does not land straight back under it.
    if free_bytes < policy.floor_bytes:
        idle_names = {workspace.name for workspace in idle}
        yield from _least_recently_used_first(
            workspace for workspace in candidates if workspace.name not in idle_names
        )


def plan_admission(
    free_bytes: int,
    workspaces: Iterable[Workspace],
    policy: DiskPolicy,
    now_s: float,
    protected: frozenset[str] = frozenset(),
) -> AdmissionPlan:
    """Which workspaces to evict before a job is admitted, and whether it then is.

    ``protected`` names the incoming job's workspace and its siblings. ``free_bytes`` on the plan is the
    space expected once the evictions are done.
    """
    if not policy.enabled or free_bytes >= policy.soft_goal_bytes:
        return AdmissionPlan(evict=(), free_bytes=free_bytes)
    evict: list[Workspace] = []
    free_after = free_bytes
    for workspace in _eviction_order(free_bytes, workspaces, policy, now_s, protected):
        if free_after >= policy.soft_goal_bytes:
            break
        evict.append(workspace)
        free_after += workspace.size_bytes
    refusal = None
    if free_after < policy.floor_bytes:
        refusal = DiskFull(free_bytes=free_after, floor_bytes=policy.floor_bytes)
    return AdmissionPlan(evict=tuple(evict), free_bytes=free_after, refusal=refusal)


def job_history_expired(
    ended_s: float | None, id_time_s: float, now_s: float, retention_s: float = RETENTION_S
) -> bool:
    """Whether a job's record, output and replay history may go.

    They are kept ``retention_s`` from the later of the job's end and the time in its id; a job that has
    not ended (``ended_s`` is ``None``) is kept.
    """
    if ended_s is None:
        return False
    return now_s - max(ended_s, id_time_s) >= retention_s


def workspace_expired(workspace: Workspace, now_s: float, retention_s: float = RETENTION_S) -> bool:
    """Whether a workspace has been idle long enough to delete outside disk pressure.

    Only task workspaces expire; head workspaces wait for disk pressure. Running and reserved ones never do.
    """
    if workspace.kind is not WorkspaceKind.TASK or workspace.running or workspace.reserved:
        return False
    return now_s - workspace.last_used_s >= retention_s
