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
Rank = tuple[int, float, float, int, str, QueuedJob]
# Read once: an enum member looked up on its class costs as much as the rest of a rank, which a round
# works out for every job it reaches.
_GATE: Final = Priority.GATE
_BACKGROUND: Final = Priority.BACKGROUND


def rank(job: QueuedJob, now: float, last_dispatch: Mapping[str, float]) -> Rank:
    """Where a job stands in the queue: the queue-order policy, written once.

    Its tier first: seed 003's four (gate, heads waiting :data:`AGING_S` or more, newer heads, background)
    with people's reservations between gate work and the rest. Newer heads rotate between repositories: the
    repository's last dispatch, least recent first; every other tier keeps arrival order. Then when it
    became ready, its arrival and its id, so no two jobs tie; the job itself last (never compared), so a
    round's heap holds ranks as they are.
    """
    priority = job.priority
    if priority is _GATE:
        tier = GATE_TIER
    elif job.reservation:
        tier = RESERVATION_TIER
    elif priority is _BACKGROUND:
        tier = BACKGROUND_TIER
    elif now - job.ready_at >= AGING_S:
        tier = AGED_TIER
    else:
        return (NEWER_TIER, last_dispatch.get(job.repository, NEVER), job.ready_at, job.arrival, job.id, job)
    return (tier, job.ready_at, job.ready_at, job.arrival, job.id, job)


def order_heads(
    heads: Iterable[QueuedJob], now: float, last_dispatch: Mapping[str, float]
) -> list[QueuedJob]:
    """Heads in the order they are offered devices."""
    return sorted(heads, key=lambda head: rank(head, now, last_dispatch))


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


def plan_dispatch(
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
    return DispatchRound(
        jobs,
        now=now,
        free_devices=free_devices,
        session_room=session_room,
        last_dispatch=last_dispatch,
        device_hosts=device_hosts,
        host_room=host_room,
    ).plan()


class DispatchRound:
    """One dispatch decision (:func:`plan_dispatch`): the round's state, and the steps that change it.

    Each repository's line holds one job in a heap at a time, its head, ranked by :func:`rank` with the
    repository's latest dispatch. Popping a head decides it (a device, a host, or why it waits) and puts
    the next job of its line in. Every job is decided once: O(n log n), not a fresh sort after every grant.
    The round ends when nothing is left that any job could take; the jobs not reached then wait, each told
    why without being ranked one by one.
    """

    def __init__(
        self,
        jobs: Sequence[QueuedJob],
        *,
        now: float,
        free_devices: Iterable[str],
        session_room: Mapping[str, int],
        last_dispatch: Mapping[str, float],
        device_hosts: Mapping[str, str] | None = None,
        host_room: Mapping[str, int] | None = None,
    ) -> None:
        self.now = now
        self.free = set(free_devices)
        # ``free`` and ``reserved``: one look tells most jobs they wait on a device.
        self.unassigned = set(self.free)
        self.room = dict(session_room)  # devices each session may still take
        self.last = dict(last_dispatch)  # each repository's last dispatch, this round's grants included
        self.hosts = device_hosts or {}
        self.weight = dict(host_room or {})  # vCPUs each host that reports max_weight has left
        # Sorted once by arrival: each repository's line, and later every tier of the queue order, is a
        # filter of this list and so comes out sorted without being sorted again.
        self.queue = sorted(jobs, key=_arrival)
        self.lines: dict[str, list[QueuedJob]] = {}
        # Boardless jobs not decided yet need no free device, so the round goes on while one is left and
        # some host has room for it: those with vCPUs left, and any host not reporting max_weight (room for
        # anything) that a boardless job may use. Jobs of one task share their hosts' tuple.
        self.boardless_left = 0
        boardless: dict[int, tuple[str, ...]] = {}
        for job in self.queue:
            self.lines.setdefault(job.repository, []).append(job)
            if job.boardless:
                self.boardless_left += 1
                boardless[id(job.hosts)] = job.hosts
        self.decided = dict.fromkeys(self.lines, 0)  # a line's head is ``line[decided[repository]]``
        self.roomy = {host for host, left in self.weight.items() if left > 0}
        self.unbounded = any(host not in self.weight for hosts in boardless.values() for host in hosts)
        self.assignments: list[tuple[QueuedJob, str]] = []
        self.placed: list[tuple[QueuedJob, str]] = []
        self.started: list[str] = []  # ids of the jobs that start, in the order they were decided
        self.gangs: dict[str, GangPlacement] = {}
        self.waiting: dict[str, Waiting] = {}
        self.held: dict[str, str] = {}  # runner host -> the blocked head it is held for
        # Free devices no later job may take this round, and the job each is kept for: those of a held
        # host, and those set aside for a gang past its grace. Out of ``free`` (its holder is decided
        # already), so the round ends when no device is left that anyone could take, and one look in C
        # passes over them.
        self.reserved: dict[str, str] = {}
        self.for_gangs: set[str] = set()  # those of them set aside for a gang
        # The hosts a gang set devices aside on. One gang a host: each host waits for one gang at a time,
        # so a lab full of old gangs still runs other work.
        self.set_aside_on: set[str] = set()
        self.on_host: dict[str, list[str]] = {}  # runner host -> its devices, built at the first hold
        self.on_session: dict[str, Waiting] = {}  # one OWN_SESSION verdict per session, shared by its jobs
        self.fences: dict[str, Waiting] = {}  # one FENCED verdict per job kept for, shared by those it fences
        # Per candidate list of boardless jobs: a heap of (-room, place, host) over the hosts that report
        # max_weight, the others in order, and the jobs the held hosts met are held for (see _place_on_host).
        self.by_hosts: dict[int, tuple[list[tuple[int, int, str]], tuple[str, ...], list[str]]] = {}

    def plan(self) -> DispatchPlan:
        """Decide every job: the heads in queue order while anything is left to take, then the rest."""
        now, last, lines, decided = self.now, self.last, self.lines, self.decided
        free, unassigned, room, waiting = self.free, self.unassigned, self.room, self.waiting
        heap = [rank(line[0], now, last) for line in lines.values()]
        heapq.heapify(heap)
        while heap and (free or (self.boardless_left and (self.roomy or self.unbounded))):
            head = heapq.heappop(heap)[-1]
            if head.boardless:
                self.boardless_left -= 1
                why = self._place_on_host(head)
                if why is not None:
                    waiting[head.id] = why
            elif head.roles:
                if room.get(head.session_id, 0) < len(head.roles):
                    waiting[head.id] = self._own_session(head.session_id)
                else:
                    self._place_gang(head)
            elif room.get(head.session_id, 0) <= 0:
                waiting[head.id] = self._own_session(head.session_id)
            elif unassigned.isdisjoint(head.candidates):  # most heads, when few devices are free: in C
                waiting[head.id] = _ON_DEVICE
            else:
                self._place(head)
            line = lines[head.repository]
            at = decided[head.repository] = decided[head.repository] + 1
            if at < len(line):
                heapq.heappush(heap, rank(line[at], now, last))
        self._unreached()
        order = QueueOrder(self.started, self.queue, waiting, now=now, last_dispatch=last)
        return DispatchPlan(tuple(self.assignments), waiting, order, self.gangs, tuple(self.placed))

    def _unreached(self) -> None:
        """No device left free: whoever was not reached waits on a device (or its own session, or a device
        kept for another job). Those are the rest of each line, past the jobs already decided. With nothing
        free, what is still unassigned is exactly what is kept. A boardless job among them found every host
        full: it waits for room (or for a host, having none to use)."""
        kept = self.unassigned if self.reserved else None
        room, waiting = self.room, self.waiting
        for repository, line in self.lines.items():
            for job in line[self.decided[repository] :]:
                left = room.get(job.session_id, 0)
                if job.boardless:
                    waiting[job.id] = _NO_ROOM if job.hosts else _ON_HOST
                elif left <= 0 or (job.roles and left < len(job.roles)):
                    waiting[job.id] = self._own_session(job.session_id)
                elif kept and not kept.isdisjoint(job.candidates):
                    waiting[job.id] = self._set_aside_for(job)
                else:
                    waiting[job.id] = _none_free(job) if job.roles else _ON_DEVICE

    def _start(self, head: QueuedJob, host: str | None) -> None:
        """``head`` starts (on ``host``, when one drives its devices): its vCPUs leave the host's room."""
        self.started.append(head.id)
        self.last[head.repository] = self.now
        if host is not None and host in self.weight:
            self.weight[host] -= head.vcpus  # one claim on the one host, however many devices
            if self.weight[host] <= 0:
                self.roomy.discard(host)

    def _take(self, head: QueuedJob, device: str) -> None:
        self.assignments.append((head, device))
        self.free.discard(device)
        self.unassigned.discard(device)

    def _place(self, head: QueuedJob) -> None:
        """A job of one device: the first free candidate whose host has room for its vCPUs, or why not."""
        device, why = self._verdict(head)
        if device is not None:
            self._take(head, device)
            self.room[head.session_id] = self.room.get(head.session_id, 0) - 1
            self._start(head, self.hosts.get(device))
            return
        self.waiting[head.id] = why
        # Blocked for vCPUs (a device of its is free; it may also be fenced by a held host): past its grace
        # it holds the hosts whose free device it lacks room on. Their devices leave ``free``, so a device
        # no job has room for does not keep the round going to the end.
        if why.kind in _FOR_ROOM and self._past_grace(head):
            for candidate in head.candidates:
                if candidate in self.free and candidate in self.hosts:
                    self._hold(self.hosts[candidate], head.id)

    def _verdict(self, head: QueuedJob) -> tuple[str | None, Waiting]:
        if self.free.isdisjoint(head.candidates):
            return None, self._set_aside_for(head)
        # A held host's devices are out of ``free``: what is left here is for anyone whose claim fits.
        for device in [device for device in head.candidates if device in self.free]:
            host = self.hosts.get(device)
            if host is None or host not in self.weight or self.weight[host] >= head.vcpus:
                return device, _ON_DEVICE
        # As before gangs: a held host fences it; a device set aside for a gang does not, for the job may
        # still hold the host it lacks vCPUs on.
        return None, (self.reserved and self._kept_from(head, by_hosts_only=True)) or Waiting(
            WaitKind.CAPACITY
        )

    def _past_grace(self, head: QueuedJob) -> bool:
        """Whether others may no longer backfill past a blocked ``head`` (a gate job: at once)."""
        return head.gate or self.now - head.ready_at >= BACKFILL_GRACE_S

    def _hold(self, host: str, job_id: str) -> None:
        """Keep a host's free devices for a blocked head until the round ends."""
        if host in self.held:
            return
        self.held[host] = job_id
        if not self.on_host:
            for device, its_host in self.hosts.items():
                self.on_host.setdefault(its_host, []).append(device)
        for device in self.on_host.get(host, ()):
            if device in self.free:
                self.free.discard(device)
                self.reserved[device] = job_id

    def _own_session(self, session_id: str) -> Waiting:
        if session_id not in self.on_session:
            self.on_session[session_id] = Waiting(WaitKind.OWN_SESSION, session_id)
        return self.on_session[session_id]

    def _fenced(self, holder: str) -> Waiting:
        """FENCED by ``holder``: one verdict per job kept for, shared by those it fences."""
        if holder not in self.fences:
            self.fences[holder] = Waiting(WaitKind.FENCED, holder)
        return self.fences[holder]

    def _kept_from(self, job: QueuedJob, *, by_hosts_only: bool = False) -> Waiting | None:
        """FENCED by the first job one of this job's candidates is kept for (only a held host's, if asked)."""
        for device in job.candidates:
            holder = self.reserved.get(device)
            if holder is not None and not (by_hosts_only and device in self.for_gangs):
                return self._fenced(holder)
        return None

    def _set_aside_for(self, job: QueuedJob) -> Waiting:
        """A job some of whose candidates are kept for another job: fenced by the first such job."""
        fenced = self._kept_from(job)
        if fenced is None:
            raise AssertionError(f"job {job.id}: none of its candidates is kept for another job")
        return fenced

    def _place_on_host(self, head: QueuedJob) -> Waiting | None:
        """Place a boardless job on the candidate host with the most room (one not reporting, last), or
        say why it waits; past its grace, blocked for vCPUs, it holds the candidate with the most room.

        Jobs of one task share their hosts' tuple, and with it a heap of (-room, place, host) over those
        that report max_weight. Room only shrinks in a round, so an entry is at most stale upwards: checked
        at the top, it is pushed back with the room left. A held host is kept for a job already decided: it
        is dropped, and the job it is held for noted."""
        if not head.hosts:
            return _ON_HOST
        weight, held = self.weight, self.held
        found = self.by_hosts.get(id(head.hosts))
        if found is None:
            candidates = enumerate(head.hosts)
            reported = [(-weight[host], place, host) for place, host in candidates if host in weight]
            heapq.heapify(reported)
            unreported = tuple(host for host in head.hosts if host not in weight)
            found = self.by_hosts[id(head.hosts)] = (reported, unreported, [])
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
            self.placed.append((head, chosen))
            self._start(head, chosen)
            return None
        if reported and self._past_grace(head):
            self._hold(reported[0][2], head.id)  # the one with the most room left
        if not reported and fenced_by:
            return self._fenced(fenced_by[0])
        return _NO_ROOM

    def _place_gang(self, head: QueuedJob) -> None:
        """All of a gang's devices on one host, or none and why; past its grace, set aside what it lacks."""
        if self.unassigned.isdisjoint(head.candidates):
            self.waiting[head.id] = _none_free(head)
            return
        if self.free.isdisjoint(head.candidates):
            self.waiting[head.id] = self._set_aside_for(head)
            return
        past_grace = self._past_grace(head)
        fit = fit_gang(
            head.id,
            head.roles,
            head.vcpus,
            free=self.free,
            device_hosts=self.hosts,
            held=self.held,
            host_room=self.weight,
            closest_unless=self.set_aside_on if past_grace else None,
        )
        if fit.host is not None:
            for _, device in fit.devices:
                self._take(head, device)
            self.gangs[head.id] = GangPlacement(fit.host, fit.devices)
            self.room[head.session_id] = self.room.get(head.session_id, 0) - len(head.roles)
            self._start(head, fit.host)
            return
        kind, on = _GANG_KINDS[fit.blocker or Blocker.DEVICE], fit.fenced_by
        if kind in (WaitKind.DEVICE, WaitKind.GANG) and not self.reserved.keys().isdisjoint(head.candidates):
            kind, on = WaitKind.FENCED, self._set_aside_for(head).on
        self.waiting[head.id] = Waiting(kind, on, fit.counts)
        if past_grace:
            for host in fit.blocked_hosts:
                self._hold(host, head.id)
            if not fit.blocked_hosts and fit.closest:
                self.set_aside_on.add(self.hosts[fit.closest[0]])
                for device in fit.closest:
                    self.free.discard(device)
                    self.reserved[device] = head.id
                    self.for_gangs.add(device)


class QueueOrder(Sequence[str]):
    """Every job id in the order it stands in the queue: the started jobs, then the waiting ones as
    :func:`order_heads` ranks them.

    Ranked on first use, not when the plan is made: a dispatch round needs only the assignments, and
    ranking every waiting job each round (10,000 of them in ``benchmarks/bench_dispatch.py``) was a third
    of its time.
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
        now, last, waiting = self._now, self._last, self._waiting
        ranks = sorted([rank(job, now, last) for job in self._queue if job.id in waiting])
        return (*self._started, *(ranked[-1].id for ranked in ranks))

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
