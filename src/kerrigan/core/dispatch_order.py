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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Final, overload

from kerrigan.core.manifest import Priority

AGING_S: Final = 60.0
BACKFILL_GRACE_S: Final = 60.0
NEVER: Final = float("-inf")  # the last dispatch of a repository that has had none


@dataclass(frozen=True, slots=True)
class QueuedJob:
    """A job waiting for a device.

    ``candidates`` are the devices its requirements match, in the order selection prefers them;
    ``ready_at`` is when it became dispatchable (its queue-wait clock's start), in seconds; ``arrival``
    orders jobs that became ready at the same moment (the store's row number: ids are text, and "10"
    sorts before "9").
    """

    id: str
    repository: str
    session_id: str
    priority: Priority
    ready_at: float
    candidates: tuple[str, ...]
    vcpus: int = 2
    arrival: int = 0

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


@dataclass(frozen=True)  # no slots: ``_positions`` is cached on the instance
class DispatchPlan:
    """Jobs to start now with their devices, in dispatch order, and why each other job waits."""

    assignments: tuple[tuple[QueuedJob, str], ...]
    waiting: Mapping[str, Waiting]
    order: Sequence[str] = field(default=())  # every job id in the order it stands in the queue

    def position(self, job_id: str) -> int | None:
        """1-based place of a waiting job in the queue."""
        return self._positions.get(job_id)

    @cached_property
    def _positions(self) -> dict[str, int]:
        # Built once, on the first question: asking for every waiting job's place stays O(n), not O(n²).
        positions: dict[str, int] = {}
        for place, job_id in enumerate((job for job in self.order if job in self.waiting), 1):
            positions.setdefault(job_id, place)
        return positions


def _tier(job: QueuedJob, now: float) -> int:
    """Which of seed 003's four tiers a head stands in: 0 gate, 1 aged, 2 newer, 3 background."""
    if job.priority is Priority.GATE:
        return 0
    if job.priority is Priority.BACKGROUND:
        return 3
    return 1 if now - job.ready_at >= AGING_S else 2


def _rank(head: QueuedJob, now: float, last_dispatch: Mapping[str, float]) -> tuple[float | str, ...]:
    """Sort key placing a head in seed 003's four tiers; the id last, so no two heads tie."""
    tier = _tier(head, now)
    if tier == 2:  # only newer heads rotate between repositories
        return (tier, last_dispatch.get(head.repository, NEVER), head.ready_at, head.arrival, head.id)
    return (tier, head.ready_at, head.arrival, head.id)


def order_heads(
    heads: Iterable[QueuedJob], now: float, last_dispatch: Mapping[str, float]
) -> list[QueuedJob]:
    """Heads in the order they are offered devices."""
    return sorted(heads, key=lambda head: _rank(head, now, last_dispatch))


_arrival: Final = attrgetter("ready_at", "arrival", "id")
_ON_DEVICE: Final = Waiting(WaitKind.DEVICE)  # frozen, so one instance serves every job that waits so


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
    # Sorted once by arrival: each repository's line, and later every tier of the queue order, is a
    # filter of this list and so comes out sorted without being sorted again.
    queue = sorted(jobs, key=_arrival)
    lines: dict[str, list[QueuedJob]] = {}
    for job in queue:
        lines.setdefault(job.repository, []).append(job)
    assignments: list[tuple[QueuedJob, str]] = []
    waiting: dict[str, Waiting] = {}
    held: dict[str, str] = {}  # runner host -> the blocked head it is held for
    on_session: dict[str, Waiting] = {}  # one OWN_SESSION verdict per session, shared by its jobs

    def own_session(session_id: str) -> Waiting:
        if session_id not in on_session:
            on_session[session_id] = Waiting(WaitKind.OWN_SESSION, session_id)
        return on_session[session_id]

    def verdict(head: QueuedJob) -> tuple[str | None, Waiting]:
        if free.isdisjoint(head.candidates):  # most heads, when few devices are free: checked in C
            return None, _ON_DEVICE
        usable = [device for device in head.candidates if device in free]
        fenced_by = None
        for device in usable:
            host = hosts.get(device)
            holder = held.get(host) if host is not None else None
            if holder is not None and holder != head.id:
                fenced_by = fenced_by or holder
                continue
            if host is None or host not in weight or weight[host] >= head.vcpus:
                return device, _ON_DEVICE
        if fenced_by is not None:
            return None, Waiting(WaitKind.FENCED, fenced_by)
        return None, Waiting(WaitKind.CAPACITY)

    # Each repository's line holds one job in the heap at a time: its head, ``line[decided[repository]]``.
    # Popping a head decides it (a device, or why it waits) and puts the next job of its line in, ranked
    # with the repository's latest dispatch. Every job is decided once: O(n log n), not a fresh sort
    # after every grant.
    heap: list[tuple[tuple[float | str, ...], QueuedJob]] = []
    decided = dict.fromkeys(lines, 0)

    def push_head(repository: str) -> None:
        line = lines[repository]
        if decided[repository] < len(line):
            job = line[decided[repository]]
            heapq.heappush(heap, (_rank(job, now, last), job))

    for repository in lines:
        push_head(repository)
    while heap and free:
        _, head = heapq.heappop(heap)
        if room.get(head.session_id, 0) <= 0:
            waiting[head.id] = own_session(head.session_id)
        else:
            device, why = verdict(head)
            if device is not None:
                assignments.append((head, device))
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
        decided[head.repository] += 1
        push_head(head.repository)
    # No device left free: whoever was not reached waits on a device (or its own session). Those are the
    # rest of each line, past the jobs already decided; no need to rank them one by one.
    for repository, line in lines.items():
        for job in line[decided[repository] :]:
            waiting[job.id] = own_session(job.session_id) if room.get(job.session_id, 0) <= 0 else _ON_DEVICE

    order = QueueOrder([job.id for job, _ in assignments], queue, waiting, now=now, last_dispatch=last)
    return DispatchPlan(tuple(assignments), waiting, order)


class QueueOrder(Sequence[str]):
    """Every job id in the order it stands in the queue: the started jobs, then the waiting ones as
    :func:`order_heads` ranks them.

    Ranked on first use, not when the plan is made: a dispatch round needs only the assignments, and
    ranking every waiting job each round (10,000 of them in ``benchmarks/bench_dispatch.py``) was a third
    of its time. Nor is it a sort by :func:`_rank`: ``queue`` is in arrival order, so splitting it by tier
    leaves the gate, aged and background tiers already in their order, and the newer tier needs only a
    stable sort by its repository's last dispatch.
    """

    def __init__(
        self,
        started: Sequence[str],
        queue: Sequence[QueuedJob],
        waiting: Mapping[str, Waiting],
        *,
        now: float,
        last_dispatch: Mapping[str, float],
    ) -> None:
        """``queue`` holds every job in arrival order; ``last_dispatch`` as the round left it."""
        self._started = started
        self._queue = queue
        self._waiting = waiting
        self._now = now
        self._last = last_dispatch

    @cached_property
    def _ids(self) -> tuple[str, ...]:
        tiers: tuple[list[QueuedJob], ...] = ([], [], [], [])
        for job in self._queue:
            if job.id in self._waiting:
                tiers[_tier(job, self._now)].append(job)
        tiers[2].sort(key=lambda job: self._last.get(job.repository, NEVER))
        return (*self._started, *(job.id for tier in tiers for job in tier))

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...

    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._ids[index]

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    # Equal to the tuple of the same ids, as ``order`` was a tuple: plans compare by value as before.
    def __eq__(self, other: object) -> bool:
        if isinstance(other, QueueOrder):
            return self._ids == other._ids
        return isinstance(other, tuple) and self._ids == other

    def __hash__(self) -> int:
        return hash(self._ids)

    def __repr__(self) -> str:
        return f"QueueOrder({self._ids!r})"
