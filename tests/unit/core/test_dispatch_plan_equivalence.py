"""The dispatch plan is the same as before ``plan_dispatch`` became a class (issue 27): for generated queues
of single, gang, boardless and reservation jobs, on hosts with and without reported room, the planner's plan
equals the plan of a frozen copy of the function it replaced.

The copy is below, as it was (commit bf3e5f3), with only its names changed: it holds the old plan exactly,
which no description of the plan could, and it can go once the planner has been changed on purpose.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from operator import attrgetter
from typing import Final, overload

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.dispatch_order import (
    AGING_S,
    BACKFILL_GRACE_S,
    NEVER,
    DispatchPlan,
    GangPlacement,
    QueuedJob,
    Waiting,
    WaitKind,
    plan_dispatch,
)
from kerrigan.core.gang import Blocker, Role, fit_gang
from kerrigan.core.manifest import Priority

NOW = 10_000.0

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


def frozen_plan_dispatch(  # noqa: PLR0915 -- the old function, as it was
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

    order = FrozenQueueOrder(started, queue, waiting, now=now, last_dispatch=last)
    return DispatchPlan(tuple(assignments), waiting, order, gangs, tuple(placed))


class FrozenQueueOrder(Sequence[str]):
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
        if isinstance(other, FrozenQueueOrder):
            return self._ids == other._ids
        return isinstance(other, tuple) and self._ids == other

    def __hash__(self) -> int:
        return hash(self._ids)

    def __repr__(self) -> str:
        return f"QueueOrder({self._ids!r})"


# The queues: every kind of job, ties in readiness and arrival, the aging and grace boundaries, devices on
# hosts that report their room, hosts that do not, devices no host drives.
WAITED: Final = (0.0, 1.0, 30.0, AGING_S - 0.5, AGING_S, BACKFILL_GRACE_S + 1, 120.0, 300.0)
HOST_LISTS: Final = ((), ("h0",), ("h0", "h1"), ("h1", "h2", "h3"), ("h3", "h4"))  # shared, as a task's are


@st.composite
def rounds(draw: st.DrawFn) -> dict[str, object]:
    devices = [f"d{n}" for n in range(draw(st.integers(0, 8)))]
    hosts = {device: f"h{draw(st.integers(0, 3))}" for device in devices if draw(st.integers(0, 5))}
    some = st.lists(st.sampled_from(devices or ["d0"]), min_size=1, max_size=4, unique=True)
    kinds = ("single", "gang", "boardless") if devices else ("boardless",)
    jobs: list[QueuedJob] = []
    for n in range(draw(st.integers(0, 14))):
        kind = draw(st.sampled_from(kinds))
        common = {
            "id": f"j{n}",
            "repository": f"octo/r{draw(st.integers(0, 3))}",
            "session_id": f"s{draw(st.integers(0, 4))}",
            "priority": draw(st.sampled_from(list(Priority))),
            "ready_at": NOW - draw(st.sampled_from(WAITED) | st.floats(0, 400)),
            "vcpus": draw(st.integers(1, 8)),
            "arrival": draw(st.integers(0, 3)),
        }
        if kind == "boardless":
            hosts_of = draw(st.sampled_from(HOST_LISTS))
            jobs.append(QueuedJob(**common, candidates=(), hosts=hosts_of, boardless=True))
        elif kind == "gang":
            roles = tuple(Role(f"role{r}", tuple(draw(some))) for r in range(draw(st.integers(1, 3))))
            jobs.append(QueuedJob(**common, candidates=(), roles=roles))
        else:
            jobs.append(QueuedJob(**common, candidates=tuple(draw(some)), reservation=draw(st.booleans())))
    reported = draw(st.lists(st.sampled_from([f"h{n}" for n in range(5)]), unique=True))
    free = set(draw(st.lists(st.sampled_from(devices), unique=True))) if devices else set()
    last = {f"octo/r{n}": NOW - draw(st.floats(0, 200)) for n in range(4) if draw(st.booleans())}
    host_room = {host: draw(st.integers(0, 16)) for host in reported}
    return {
        "jobs": jobs,
        "now": NOW,
        "free_devices": free,
        "session_room": {f"s{n}": draw(st.integers(0, 4)) for n in range(5) if draw(st.integers(0, 5))},
        "last_dispatch": last,
        "device_hosts": hosts if draw(st.integers(0, 9)) else None,
        "host_room": host_room if draw(st.integers(0, 5)) else None,
    }


def assert_same_plan(new: DispatchPlan, old: DispatchPlan) -> None:
    assert new.assignments == old.assignments
    assert new.waiting == old.waiting
    assert tuple(new.order) == tuple(old.order)
    assert new.gangs == old.gangs
    assert new.placed == old.placed
    assert [new.position(job) for job in new.waiting] == [old.position(job) for job in old.waiting]


def plans(case: Mapping[str, object]) -> tuple[DispatchPlan, DispatchPlan]:
    # Each planner gets its own copies: the function may not change what it was given, nor may the class.
    def given_() -> dict[str, object]:
        return {
            key: value.copy() if isinstance(value, dict | set | list) else value
            for key, value in case.items()
        }

    return plan_dispatch(**given_()), frozen_plan_dispatch(**given_())  # type: ignore[arg-type]


@settings(max_examples=1500, deadline=None)
@given(rounds())
def test_the_planner_plans_as_the_function_it_replaced(case: dict[str, object]) -> None:
    assert_same_plan(*plans(case))


def busy_lab(seed: int) -> dict[str, object]:
    """A few hundred jobs of every kind over 120 devices on 12 hosts, a third of them free."""
    rng = random.Random(seed)
    devices = [f"dev-{n:03d}" for n in range(120)]
    hosts = {device: f"host-{n % 12:02d}" for n, device in enumerate(devices)}
    families = [devices[start : start + 8] for start in range(0, len(devices), 8)]
    host_lists = [tuple(f"host-{n:02d}" for n in rng.sample(range(14), rng.randint(1, 5))) for _ in range(6)]
    jobs: list[QueuedJob] = []
    for n in range(rng.randint(100, 400)):
        common = {
            "id": f"job-{n:04d}",
            "repository": f"octo/repo-{rng.randrange(8)}",
            "session_id": f"s-{rng.randrange(60)}",
            "priority": rng.choice([Priority.GATE, Priority.NORMAL, Priority.NORMAL, Priority.BACKGROUND]),
            "ready_at": NOW - rng.choice([rng.uniform(0, 600), AGING_S, 0.0]),
            "vcpus": rng.randint(1, 6),
            "arrival": n,
        }
        kind = rng.random()
        if kind < 0.1:
            jobs.append(QueuedJob(**common, candidates=(), hosts=rng.choice(host_lists), boardless=True))
        elif kind < 0.2:
            family = rng.choice(families)
            roles = (Role("dut", tuple(family[:4])), Role("peer", tuple(family[4:])))
            jobs.append(QueuedJob(**common, candidates=(), roles=roles))
        else:
            family = rng.choice(families)
            jobs.append(QueuedJob(**common, candidates=tuple(family), reservation=rng.random() < 0.05))
    return {
        "jobs": jobs,
        "now": NOW,
        "free_devices": set(rng.sample(devices, 40)),
        "session_room": {f"s-{n}": rng.randint(0, 4) for n in range(60)},
        "last_dispatch": {f"octo/repo-{n}": NOW - rng.uniform(0, 300) for n in range(0, 8, 2)},
        "device_hosts": hosts,
        "host_room": {f"host-{n:02d}": rng.randint(0, 12) for n in range(11)},  # host-11 does not report
    }


@pytest.mark.parametrize("seed", range(40))
def test_the_planner_plans_a_busy_lab_as_the_function_it_replaced(seed: int) -> None:
    assert_same_plan(*plans(busy_lab(seed)))
