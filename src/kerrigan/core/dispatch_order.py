"""Which waiting job gets a device next: seed 003's queue order, with a repository in place of a workspace.

Each repository's waiting jobs form a line; the oldest job whose session may take another device is the
repository's *head* (and when it finds no device, the job after it is offered one too: repositories are not
workspaces, and their jobs do not share one checkout). Heads are ordered:

1. gate jobs (merge queues and ``priority: gate``), in arrival order;
2. heads that have waited 60 seconds or more, oldest first;
3. newer heads, rotating between repositories by least recent dispatch;
4. background jobs, last.

A head can be blocked two ways. No device it can use is free: it waits, and since heads are offered
devices in this order it gets the first one to free up. Or a device is free but its runner host lacks the
vCPUs the job claims (``max_weight``): then smaller jobs behind it may use that host's room (backfill) for
its first 60 seconds; after that, or at once for a gate job, the host is held for it and takes no other job
until the blocked head fits, so big jobs are not starved by a stream of small ones. A job whose session
already holds ``max_devkits`` devices waits on its own session: it is not a head, blocks nobody, and its
queue-wait clock pauses.

Everything here is a pure function of the queue, the free devices and the time, which is passed in.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kerrigan.core.manifest import Priority

AGING_S: Final = 60.0
BACKFILL_GRACE_S: Final = 60.0


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job waiting for a device.

    ``candidates`` are the devices its requirements match, in the order selection prefers them;
    ``ready_at`` is when it became dispatchable (its queue-wait clock's start), in seconds.
    """

    id: str
    repository: str
    session_id: str
    priority: Priority
    ready_at: float
    candidates: tuple[str, ...]
    vcpus: int = 2

    @property
    def gate(self) -> bool:
        """Gate jobs go first and never let others backfill past them."""
        return self.priority is Priority.GATE


class WaitKind(enum.StrEnum):
    """What a job that was not dispatched waits on."""

    DEVICE = "device"  # every device it can use is busy
    CAPACITY = "capacity"  # a device is free, but its runner host lacks the vCPUs the job claims
    FENCED = "fenced"  # a device is free, but its runner host is held for a blocked older head or gate job
    OWN_SESSION = "own_session"  # its session holds max_devkits devices: the queue-wait clock pauses


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a job waits, and (for fences and heads) on which job."""

    kind: WaitKind
    on: str | None = None

    @property
    def counts_toward_queue_wait(self) -> bool:
        """Seed 003: the clock pauses while the only blocker is the session's own earlier job."""
        return self.kind is not WaitKind.OWN_SESSION


@dataclass(frozen=True, slots=True)
class DispatchPlan:
    """Jobs to start now with their devices, in dispatch order, and why each other job waits."""

    assignments: tuple[tuple[QueuedJob, str], ...]
    waiting: Mapping[str, Waiting]
    order: tuple[str, ...] = field(default=())  # every job id in the order it stands in the queue

    def position(self, job_id: str) -> int | None:
        """1-based place of a waiting job in the queue."""
        waiting = [job for job in self.order if job in self.waiting]
        return waiting.index(job_id) + 1 if job_id in waiting else None


def _rank(head: QueuedJob, now: float, last_dispatch: Mapping[str, float]) -> tuple[float, ...]:
    """Sort key placing a head in seed 003's four tiers."""
    waited = now - head.ready_at
    if head.gate:
        return (0, head.ready_at)
    if head.priority is Priority.BACKGROUND:
        return (3, head.ready_at)
    if waited >= AGING_S:
        return (1, head.ready_at)
    return (2, last_dispatch.get(head.repository, float("-inf")), head.ready_at)


def order_heads(
    heads: Iterable[QueuedJob], now: float, last_dispatch: Mapping[str, float]
) -> list[QueuedJob]:
    """Heads in the order they are offered devices."""
    return sorted(heads, key=lambda head: (*_rank(head, now, last_dispatch), head.id))


def plan_dispatch(  # noqa: PLR0915 -- one pass over the heap; its steps share the round's state
    jobs: Sequence[QueuedJob],
    *,
    now: float,
    free_devices: Iterable[str],
    session_room: Mapping[str, int],
    last_dispatch: Mapping[str, float],
    device_hosts: Mapping[str, str] | None = None,
    host_room: Mapping[str, int] | None = None,
) -> DispatchPlan:
    """Assign free devices to waiting jobs, in queue order.

    ``session_room`` says how many more devices each session may hold (``max_devkits`` less those it
    holds); ``last_dispatch`` when each repository last had a job dispatched; ``device_hosts`` which
    runner host drives each device and ``host_room`` how many vCPUs each host has left under its
    ``max_weight`` (a host not listed has room for anything).
    """
    free = set(free_devices)
    room = dict(session_room)
    last = dict(last_dispatch)
    hosts = device_hosts or {}
    weight = dict(host_room or {})
    lines: dict[str, list[QueuedJob]] = {}
    for job in sorted(jobs, key=lambda job: (job.ready_at, job.id)):
        lines.setdefault(job.repository, []).append(job)
    assignments: list[tuple[QueuedJob, str]] = []
    waiting: dict[str, Waiting] = {}
    held: dict[str, str] = {}  # runner host -> the blocked head it is held for
    dispatched: set[str] = set()

    def verdict(head: QueuedJob) -> tuple[str | None, Waiting]:
        usable = [device for device in head.candidates if device in free]
        if not usable:
            return None, Waiting(WaitKind.DEVICE)
        fenced_by = None
        for device in usable:
            host = hosts.get(device)
            holder = held.get(host) if host is not None else None
            if holder is not None and holder != head.id:
                fenced_by = fenced_by or holder
                continue
            if host is None or host not in weight or weight[host] >= head.vcpus:
                return device, Waiting(WaitKind.DEVICE)
        if fenced_by is not None:
            return None, Waiting(WaitKind.FENCED, fenced_by)
        return None, Waiting(WaitKind.CAPACITY)

    # Each repository's line holds one job in the heap at a time: its head. Popping a head decides it
    # (a device, or why it waits) and puts the next job of its line in, ranked with the repository's
    # latest dispatch. Every job is decided once: O(n log n), not a fresh sort after every grant.
    heap: list[tuple[Any, ...]] = []
    position = dict.fromkeys(lines, 0)

    def push_next(repository: str) -> None:
        line = lines[repository]
        if position[repository] < len(line):
            job = line[position[repository]]
            position[repository] += 1
            heapq.heappush(heap, (*_rank(job, now, last), job.id, job))

    for repository in lines:
        push_next(repository)
    while heap and free:
        head: QueuedJob = heapq.heappop(heap)[-1]
        if room.get(head.session_id, 0) <= 0:
            waiting[head.id] = Waiting(WaitKind.OWN_SESSION, head.session_id)
        else:
            device, why = verdict(head)
            if device is not None:
                assignments.append((head, device))
                dispatched.add(head.id)
                free.discard(device)
                room[head.session_id] = room.get(head.session_id, 0) - 1
                host = hosts.get(device)
                if host is not None and host in weight:
                    weight[host] -= head.vcpus
                last[head.repository] = now
            else:
                waiting[head.id] = why
                if why.kind is WaitKind.CAPACITY and (head.gate or now - head.ready_at >= BACKFILL_GRACE_S):
                    for candidate in head.candidates:
                        if candidate in free and candidate in hosts:
                            held.setdefault(hosts[candidate], head.id)
        push_next(head.repository)
    # No device left free: whoever was not reached waits on a device (or its own session); no need to
    # rank them one by one.
    for line in lines.values():
        for job in line:
            if job.id not in dispatched and job.id not in waiting:
                full = room.get(job.session_id, 0) <= 0
                waiting[job.id] = (
                    Waiting(WaitKind.OWN_SESSION, job.session_id) if full else Waiting(WaitKind.DEVICE)
                )

    order = _queue_order(assignments, waiting, jobs, now=now, last=last)
    return DispatchPlan(tuple(assignments), waiting, tuple(order))


def _queue_order(
    assignments: Sequence[tuple[QueuedJob, str]],
    waiting: Mapping[str, Waiting],
    jobs: Sequence[QueuedJob],
    *,
    now: float,
    last: Mapping[str, float],
) -> list[str]:
    """Started jobs, then every waiting job in queue order (every job has been decided by now)."""
    order = [job.id for job, _ in assignments]
    return order + [job.id for job in order_heads([j for j in jobs if j.id in waiting], now, last)]
