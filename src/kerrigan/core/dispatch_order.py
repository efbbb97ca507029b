"""Which waiting job gets a device next: seed 003's queue order, with a repository in place of a workspace.

Each repository's waiting jobs form a line; the oldest job whose session may take another device is the
repository's *head* (and when it finds no device, the job after it is offered one too: repositories are not
workspaces, and their jobs do not share one checkout). Heads are ordered:

1. gate jobs (merge queues and ``priority: gate``), in arrival order;
2. people's reservations (``reservation``: a board for a person, :mod:`kerrigan.core.reservations`), in
   arrival order, each person a line of their own;
3. heads that have waited 60 seconds or more, oldest first;
4. newer heads, rotating between repositories by least recent dispatch;
5. background jobs, last.

A head can be blocked two ways. No device it can use is free: it waits, and since heads are offered
devices in this order it gets the first one to free up. Or a device is free but its runner host lacks the
vCPUs the job claims (``max_weight``): then smaller jobs behind it may use that host's room (backfill) for
its first 60 seconds; after that, or at once for a gate job, the host is held for it and takes no other job
until the blocked head fits, so big jobs are not starved by a stream of small ones. A job whose session
already holds ``max_devkits`` devices waits on its own session: it is not a head, blocks nobody, and its
queue-wait clock pauses.

A gang job (``roles``: several devices at once, see :mod:`kerrigan.core.gang`) stands in the same order and
starts only when one runner host has a free candidate for every role, on distinct devices, with room for
its vCPUs; its session must have room for one device per role. It gets all of them or none, within the
round: nothing is held across rounds, so gangs cannot deadlock. What keeps a gang from starving behind
single jobs that each take one of its devices as it frees is the same grace: for its first 60 seconds
(none for a gate) others may take its devices; after that, when no host fits it yet, the free devices of
the host closest to a full set (the most roles matched; the first such in preference order; a host only
one gang a round sets devices aside on) are set aside for it, and a host with a full set but too few vCPUs
is held for it, as for a single head. Set-aside devices are not leased, so the next round the gang finds
them again, and the next device of its own to free goes to it before any younger job. A host keeps idle
at most one device fewer than a gang has roles, for one gang at a time.

A job with ``board: none`` (``boardless``) holds no device: it stands in the same order and is placed on
one of its candidate runner ``hosts`` that has room for its vCPUs under ``max_weight`` (the one with the most
room left; a host that has not reported its ``max_weight`` last, for its agent to refuse what it cannot
fit), whether or not any device is free. It does not count against its session's ``max_devkits``. Its vCPUs
count against the host's room like any job's; a host held for a blocked head takes no boardless job either.
Blocked for vCPUs past its grace (none for a gate), it holds the one candidate host with the most room left,
as a blocked head does. A boardless job with no candidate host waits on a host (``HOST``).

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

from kerrigan.core.gang import Blocker, Role, RoleCount, fit_gang
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

    A gang job names its ``roles``, each with its own candidates; its ``candidates`` are then every role's
    candidates together (left empty, they are filled in), and ``vcpus`` its claim on the one host. A
    ``boardless`` job (``board: none``) takes no device: its candidates are runner ``hosts``, in id order.
    """

    id: str
    repository: str
    session_id: str
    priority: Priority
    ready_at: float
    candidates: tuple[str, ...]
    vcpus: int = 2
    arrival: int = 0
    roles: tuple[Role, ...] = ()
    reservation: bool = False  # a person's reservation: after gate work, before the rest
    hosts: tuple[str, ...] = ()  # a boardless job's candidate runner hosts
    boardless: bool = False

    def __post_init__(self) -> None:
        if not self.roles:
            return
        names = [role.name for role in self.roles]
        if len(set(names)) != len(names):
            raise ValueError(f"job {self.id}: roles {names} name a role twice")
        union = tuple(dict.fromkeys(device for role in self.roles for device in role.candidates))
        if not self.candidates:
            object.__setattr__(self, "candidates", union)  # frozen: set once, here
        elif set(self.candidates) != set(union):
            raise ValueError(f"job {self.id}: a gang job's candidates are its roles' candidates together")

    @property
    def gate(self) -> bool:
        """Gate jobs go first and never let others backfill past them."""
        return self.priority is Priority.GATE

    @property
    def devices_needed(self) -> int:
        """Devices the job takes at once: one per role for a gang, else one."""
        return len(self.roles) or 1


class WaitKind(enum.StrEnum):
    """What a job that was not dispatched waits on."""

    DEVICE = "device"  # every device it can use is busy
    CAPACITY = "capacity"  # a device is free, but its runner host lacks the vCPUs the job claims
    FENCED = "fenced"  # a device is free, but it (or its host) is kept for a blocked older head or gate
    GANG = "gang"  # a gang: every role has a free device, but no one runner host has one for each
    OWN_SESSION = "own_session"  # its session holds max_devkits devices: the queue-wait clock pauses
    HOST = "host"  # a boardless job: no runner host it may run on is online and not paused now


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a job waits, and (for fences and heads) on which job; for a gang, each role's free devices
    when its turn came (none free for a gang the round did not reach)."""

    kind: WaitKind
    on: str | None = None
    counts: tuple[RoleCount, ...] = ()
    # A gang none of whose devices was free: its roles, counted only when asked (most gangs of a busy
    # queue wait so, and a round would otherwise count every one of them).
    none_free_of: tuple[Role, ...] = ()

    @property
    def roles(self) -> tuple[RoleCount, ...]:
        """For a gang, each role's free devices of its candidates when its turn came."""
        return self.counts or tuple(RoleCount(r.name, 0, len(r.candidates)) for r in self.none_free_of)

    @property
    def counts_toward_queue_wait(self) -> bool:
        """Seed 003: the clock pauses while the only blocker is the session's own earlier job."""
        return self.kind is not WaitKind.OWN_SESSION


@dataclass(frozen=True, slots=True)
class GangPlacement:
    """The runner host a gang job starts on and each role's device there, in role order."""

    host: str
    devices: tuple[tuple[str, str], ...]


@dataclass(frozen=True)  # no slots: ``_positions`` is cached on the instance
class DispatchPlan:
    """Jobs to start now with their devices, in dispatch order, and why each other job waits.

    ``assignments`` has one pair per device: a gang job appears once for each of its roles, in role
    order and next to each other, and ``gangs`` says which role each of its devices plays. ``placed``
    pairs each boardless job that starts with its runner host.
    """

    assignments: tuple[tuple[QueuedJob, str], ...]
    waiting: Mapping[str, Waiting]
    order: Sequence[str] = field(default=())  # every job id in the order it stands in the queue
    gangs: Mapping[str, GangPlacement] = field(default_factory=dict)  # by job id
    placed: tuple[tuple[QueuedJob, str], ...] = ()

    def roles_assigned(self) -> Iterator[tuple[QueuedJob, str, str | None]]:
        """Each assignment with the role its device plays (None for a job of one device)."""
        for job, device in self.assignments:
            placement = self.gangs.get(job.id)
            role = None
            if placement is not None:
                role = next((name for name, placed in placement.devices if placed == device), None)
            yield job, device, role

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


GATE_TIER, RESERVATION_TIER, AGED_TIER, NEWER_TIER, BACKGROUND_TIER = range(5)


def _tier(job: QueuedJob, now: float) -> int:
    """Which tier a head stands in: seed 003's four (gate, aged, newer, background) with people's
    reservations between gate work and the rest."""
    if job.priority is Priority.GATE:
        return GATE_TIER
    if job.reservation:
        return RESERVATION_TIER
    if job.priority is Priority.BACKGROUND:
        return BACKGROUND_TIER
    return AGED_TIER if now - job.ready_at >= AGING_S else NEWER_TIER


def _rank(head: QueuedJob, now: float, last_dispatch: Mapping[str, float]) -> tuple[float | str, ...]:
    """Sort key placing a head in its tier (:func:`_tier`); the id last, so no two heads tie."""
    tier = _tier(head, now)
    if tier == NEWER_TIER:  # only newer heads rotate between repositories
        return (tier, last_dispatch.get(head.repository, NEVER), head.ready_at, head.arrival, head.id)
    return (tier, head.ready_at, head.arrival, head.id)


def order_heads(
    heads: Iterable[QueuedJob], now: float, last_dispatch: Mapping[str, float]
) -> list[QueuedJob]:
    """Heads in the order they are offered devices."""
    return sorted(heads, key=lambda head: _rank(head, now, last_dispatch))


_arrival: Final = attrgetter("ready_at", "arrival", "id")
_FOR_ROOM: Final = frozenset({WaitKind.CAPACITY, WaitKind.FENCED})
_ON_DEVICE: Final = Waiting(WaitKind.DEVICE)  # frozen, so one instance serves every job that waits so
_ON_HOST: Final = Waiting(WaitKind.HOST)
_NO_ROOM: Final = Waiting(WaitKind.CAPACITY)
_GANG_KINDS: Final = {
    Blocker.DEVICE: WaitKind.DEVICE,
    Blocker.SPLIT: WaitKind.GANG,
    Blocker.CAPACITY: WaitKind.CAPACITY,
    Blocker.FENCED: WaitKind.FENCED,
}


def _none_free(job: QueuedJob) -> Waiting:
    """A gang that found no device free: each role 0 of its candidates."""
    return Waiting(WaitKind.DEVICE, None, (), job.roles)


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
    ``max_weight`` (a host not listed has room for anything). A gang job's devices must all be on one
    host that ``device_hosts`` names. Boardless jobs are placed on hosts, not devices (``placed``).
    """
    free = set(free_devices)
    unassigned = set(free)  # ``free`` and ``reserved``: one look tells most jobs they wait on a device
    room = dict(session_room)
    last = dict(last_dispatch)
    hosts = device_hosts or {}
    weight = dict(host_room or {})
    # Sorted once by arrival: each repository's line, and later every tier of the queue order, is a
    # filter of this list and so comes out sorted without being sorted again.
    queue = sorted(jobs, key=_arrival)
    lines: dict[str, list[QueuedJob]] = {}
    boardless_left = 0  # boardless jobs not decided yet: they need no free device, so the round goes on
    for job in queue:
        lines.setdefault(job.repository, []).append(job)
        if job.boardless:
            boardless_left += 1
    # ... while some host has room for one: those with vCPUs left, and any host not reporting max_weight
    # (room for anything) that a boardless job may use. Jobs of one task share their hosts' tuple.
    roomy = {host for host, left in weight.items() if left > 0}
    unbounded = boardless_left > 0 and any(
        host not in weight
        for hosts_of in {id(job.hosts): job.hosts for job in queue if job.boardless}.values()
        for host in hosts_of
    )
    assignments: list[tuple[QueuedJob, str]] = []
    placed: list[tuple[QueuedJob, str]] = []
    started: list[str] = []  # ids of the jobs that start, in the order they were decided
    gangs: dict[str, GangPlacement] = {}
    waiting: dict[str, Waiting] = {}
    held: dict[str, str] = {}  # runner host -> the blocked head it is held for
    # Free devices no later job may take this round, and the job each is kept for: those of a held host,
    # and those set aside for a gang past its grace. Out of ``free`` (its holder is decided already), so
    # the round ends when no device is left that anyone could take, and one look in C passes over them.
    reserved: dict[str, str] = {}
    for_gangs: set[str] = set()  # those of them set aside for a gang
    # The hosts a gang set devices aside on. One gang a host: each host waits for one gang at a time, so a
    # lab full of old gangs still runs other work.
    set_aside_on: set[str] = set()
    on_host: dict[str, list[str]] = {}  # runner host -> its devices, built at the first hold

    def hold(host: str, job_id: str) -> None:
        """Keep a host's free devices for a blocked head until the round ends."""
        if host in held:
            return
        held[host] = job_id
        if not on_host:
            for device, its_host in hosts.items():
                on_host.setdefault(its_host, []).append(device)
        for device in on_host.get(host, ()):
            if device in free:
                free.discard(device)
                reserved[device] = job_id

    on_session: dict[str, Waiting] = {}  # one OWN_SESSION verdict per session, shared by its jobs

    def own_session(session_id: str) -> Waiting:
        if session_id not in on_session:
            on_session[session_id] = Waiting(WaitKind.OWN_SESSION, session_id)
        return on_session[session_id]

    fences: dict[str, Waiting] = {}  # one FENCED verdict per job kept for, shared by those it fences

    def kept_from(job: QueuedJob, *, by_hosts_only: bool = False) -> Waiting | None:
        """FENCED by the first job one of this job's candidates is kept for (only a held host's, if asked)."""
        for device in job.candidates:
            holder = reserved.get(device)
            if holder is not None and not (by_hosts_only and device in for_gangs):
                if holder not in fences:
                    fences[holder] = Waiting(WaitKind.FENCED, holder)
                return fences[holder]
        return None

    def set_aside_for(job: QueuedJob) -> Waiting:
        """A job some of whose candidates are kept for another job: fenced by the first such job."""
        fenced = kept_from(job)
        if fenced is None:
            raise AssertionError(f"job {job.id}: none of its candidates is kept for another job")
        return fenced

    def verdict(head: QueuedJob) -> tuple[str | None, Waiting]:
        if unassigned.isdisjoint(head.candidates):  # most heads, when few devices are free: checked in C
            return None, _ON_DEVICE
        if free.isdisjoint(head.candidates):
            return None, set_aside_for(head)
        # A held host's devices are out of ``free``: what is left here is for anyone whose claim fits.
        for device in [device for device in head.candidates if device in free]:
            host = hosts.get(device)
            if host is None or host not in weight or weight[host] >= head.vcpus:
                return device, _ON_DEVICE
        # As before gangs: a held host fences it; a device set aside for a gang does not, for the job may
        # still hold the host it lacks vCPUs on.
        return None, (reserved and kept_from(head, by_hosts_only=True)) or Waiting(WaitKind.CAPACITY)

    # Per candidate list of boardless jobs (jobs of one task share its tuple): a heap of (-room, place,
    # host) over the hosts that report max_weight, the others in order, and the job the first held host
    # met is held for. Room only shrinks in a round, so an entry is at most stale upwards: checked at the
    # top, it is pushed back with the room left. A held host is kept for a job already decided: dropped.
    by_hosts: dict[int, tuple[list[tuple[int, int, str]], tuple[str, ...], list[str]]] = {}

    def place_on_host(head: QueuedJob) -> Waiting | None:
        """Place a boardless job on the candidate host with the most room (one not reporting, last), or
        say why it waits; past its grace, blocked for vCPUs, it holds the candidate with the most room."""
        if not head.hosts:
            return _ON_HOST
        found = by_hosts.get(id(head.hosts))
        if found is None:
            candidates = enumerate(head.hosts)
            reported = [(-weight[host], place, host) for place, host in candidates if host in weight]
            heapq.heapify(reported)
            unreported = tuple(host for host in head.hosts if host not in weight)
            found = by_hosts[id(head.hosts)] = (reported, unreported, [])
        reported, unreported, fenced_by = found
        while reported:
            recorded, place, host = reported[0]
            if host in held:
                fenced_by.append(held[host])
                heapq.heappop(reported)
            elif -recorded != weight[host]:
                heapq.heapreplace(reported, (-weight[host], place, host))
            else:
                break
        best = reported[0][2] if reported and -reported[0][0] >= head.vcpus else None
        chosen = best or next((host for host in unreported if host not in held), None)
        if chosen is not None:
            placed.append((head, chosen))
            started.append(head.id)
            if chosen in weight:
                weight[chosen] -= head.vcpus
                if weight[chosen] <= 0:
                    roomy.discard(chosen)
            last[head.repository] = now
            return None
        if reported and (head.gate or now - head.ready_at >= BACKFILL_GRACE_S):
            hold(reported[0][2], head.id)  # the one with the most room left
        if not reported and fenced_by:
            if fenced_by[0] not in fences:
                fences[fenced_by[0]] = Waiting(WaitKind.FENCED, fenced_by[0])
            return fences[fenced_by[0]]
        return _NO_ROOM

    def place_gang(head: QueuedJob) -> None:
        """All of a gang's devices on one host, or none and why; past its grace, set aside what it lacks."""
        if unassigned.isdisjoint(head.candidates):
            waiting[head.id] = _none_free(head)
            return
        if free.isdisjoint(head.candidates):
            waiting[head.id] = set_aside_for(head)
            return
        past_grace = head.gate or now - head.ready_at >= BACKFILL_GRACE_S
        fit = fit_gang(
            head.id,
            head.roles,
            head.vcpus,
            free=free,
            device_hosts=hosts,
            held=held,
            host_room=weight,
            closest_unless=set_aside_on if past_grace else None,
        )
        if fit.host is not None:
            for _, device in fit.devices:
                assignments.append((head, device))
                free.discard(device)
                unassigned.discard(device)
            started.append(head.id)
            gangs[head.id] = GangPlacement(fit.host, fit.devices)
            room[head.session_id] = room.get(head.session_id, 0) - len(head.roles)
            if fit.host in weight:
                weight[fit.host] -= head.vcpus  # one claim on the one host, however many devices
                if weight[fit.host] <= 0:
                    roomy.discard(fit.host)
            last[head.repository] = now
            return
        kind, on = _GANG_KINDS[fit.blocker or Blocker.DEVICE], fit.fenced_by
        if kind in (WaitKind.DEVICE, WaitKind.GANG) and not reserved.keys().isdisjoint(head.candidates):
            kind, on = WaitKind.FENCED, set_aside_for(head).on
        waiting[head.id] = Waiting(kind, on, fit.counts)
        if past_grace:
            for host in fit.blocked_hosts:
                hold(host, head.id)
            if not fit.blocked_hosts and fit.closest:
                set_aside_on.add(hosts[fit.closest[0]])
                for device in fit.closest:
                    free.discard(device)
                    reserved[device] = head.id
                    for_gangs.add(device)

    # Each repository's line holds one job in the heap at a time: its head, ``line[decided[repository]]``.
    # Popping a head decides it (a device, or why it waits) and puts the next job of its line in, ranked
    # with the repository's latest dispatch. Every job is decided once: O(n log n), not a fresh sort
    # after every grant. A round may pop every job (a free device that none of them can take keeps it
    # going), so the loop is written out: an entry is :func:`_rank` flattened, the same order with
    # ready_at in place of the last dispatch outside the newer tier, then the job.
    decided = dict.fromkeys(lines, 0)

    def entry(job: QueuedJob) -> tuple[int, float, float, int, str, QueuedJob]:
        tier = _tier(job, now)
        key = last.get(job.repository, NEVER) if tier == NEWER_TIER else job.ready_at
        return (tier, key, job.ready_at, job.arrival, job.id, job)

    heap = [entry(line[0]) for line in lines.values()]
    heapq.heapify(heap)
    gate, background = Priority.GATE, Priority.BACKGROUND
    while heap and (free or (boardless_left and (roomy or unbounded))):
        head = heapq.heappop(heap)[-1]
        if head.boardless:
            boardless_left -= 1
            why = place_on_host(head)
            if why is not None:
                waiting[head.id] = why
        elif head.roles:
            if room.get(head.session_id, 0) < len(head.roles):
                waiting[head.id] = own_session(head.session_id)
            else:
                place_gang(head)
        elif room.get(head.session_id, 0) <= 0:
            waiting[head.id] = own_session(head.session_id)
        elif unassigned.isdisjoint(head.candidates):  # most heads, when few devices are free: checked in C
            waiting[head.id] = _ON_DEVICE
        else:
            device, why = verdict(head)
            if device is not None:
                assignments.append((head, device))
                started.append(head.id)
                free.discard(device)
                unassigned.discard(device)
                room[head.session_id] = room.get(head.session_id, 0) - 1
                host = hosts.get(device)
                if host is not None and host in weight:
                    weight[host] -= head.vcpus
                    if weight[host] <= 0:
                        roomy.discard(host)
                last[head.repository] = now
            else:
                waiting[head.id] = why
                # Blocked for vCPUs (a device of its is free; it may also be fenced by a held host): past
                # its grace it holds the hosts whose free device it lacks room on. Their devices leave
                # ``free``, so a device no job has room for does not keep the round going to the end.
                if why.kind in _FOR_ROOM and (head.gate or now - head.ready_at >= BACKFILL_GRACE_S):
                    for candidate in head.candidates:
                        if candidate in free and candidate in hosts:
                            hold(hosts[candidate], head.id)
        repository = head.repository
        line = lines[repository]
        at = decided[repository] = decided[repository] + 1
        if at < len(line):
            job = line[at]
            # entry(job), inline: this runs once per job
            if job.priority is gate:
                heapq.heappush(heap, (GATE_TIER, job.ready_at, job.ready_at, job.arrival, job.id, job))
            elif job.reservation:
                heapq.heappush(heap, (RESERVATION_TIER, job.ready_at, job.ready_at, job.arrival, job.id, job))
            elif job.priority is background:
                heapq.heappush(heap, (BACKGROUND_TIER, job.ready_at, job.ready_at, job.arrival, job.id, job))
            elif now - job.ready_at >= AGING_S:
                heapq.heappush(heap, (AGED_TIER, job.ready_at, job.ready_at, job.arrival, job.id, job))
            else:
                newer = (NEWER_TIER, last.get(repository, NEVER), job.ready_at, job.arrival, job.id, job)
                heapq.heappush(heap, newer)
    # No device left free: whoever was not reached waits on a device (or its own session, or a device kept
    # for another job). Those are the rest of each line, past the jobs already decided; no need to rank
    # them one by one. With nothing free, what is still unassigned is exactly what is kept. A boardless
    # job among them found every host full: it waits for room (or for a host, having none to use).
    kept = unassigned if reserved else None
    for repository, line in lines.items():
        for job in line[decided[repository] :]:
            left = room.get(job.session_id, 0)
            if job.boardless:
                waiting[job.id] = _NO_ROOM if job.hosts else _ON_HOST
            elif left <= 0 or (job.roles and left < len(job.roles)):
                waiting[job.id] = own_session(job.session_id)
            elif kept and not kept.isdisjoint(job.candidates):
                waiting[job.id] = set_aside_for(job)
            else:
                waiting[job.id] = _none_free(job) if job.roles else _ON_DEVICE

    order = QueueOrder(started, queue, waiting, now=now, last_dispatch=last)
    return DispatchPlan(tuple(assignments), waiting, order, gangs, tuple(placed))


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
        tiers: tuple[list[QueuedJob], ...] = ([], [], [], [], [])
        for job in self._queue:
            if job.id in self._waiting:
                tiers[_tier(job, self._now)].append(job)
        tiers[NEWER_TIER].sort(key=lambda job: self._last.get(job.repository, NEVER))
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
