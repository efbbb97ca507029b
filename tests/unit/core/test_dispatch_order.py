"""Queue order, as seed 003 orders heads, with repositories in place of workspaces; the clock is a number."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.dispatch_order import (
    AGING_S,
    BACKFILL_GRACE_S,
    DispatchPlan,
    QueuedJob,
    WaitKind,
    order_heads,
    plan_dispatch,
)
from kerrigan.core.manifest import Priority

NOW = 10_000.0


def job(
    job_id: str,
    repository: str = "octo/a",
    *,
    waited: float = 1.0,
    priority: Priority = Priority.NORMAL,
    candidates: Iterable[str] = ("d1",),
    session: str | None = None,
    vcpus: int = 2,
) -> QueuedJob:
    return QueuedJob(
        job_id, repository, session or f"s-{job_id}", priority, NOW - waited, tuple(candidates), vcpus
    )


def plan(
    jobs: list[QueuedJob],
    free: Iterable[str],
    *,
    room: dict[str, int] | None = None,
    last: dict[str, float] | None = None,
) -> DispatchPlan:
    return plan_dispatch(
        jobs,
        now=NOW,
        free_devices=free,
        session_room=room if room is not None else {j.session_id: 4 for j in jobs},
        last_dispatch=last or {},
    )


def started(result: DispatchPlan) -> list[tuple[str, str]]:
    return [(queued.id, device) for queued, device in result.assignments]


def test_gate_jobs_go_first_in_arrival_order_before_older_normal_jobs() -> None:
    jobs = [
        job("old-normal", "octo/a", waited=500),
        job("gate-2", "octo/b", waited=5, priority=Priority.GATE),
        job("gate-1", "octo/c", waited=10, priority=Priority.GATE),
    ]
    assert [j.id for j in order_heads(jobs, NOW, {})] == ["gate-1", "gate-2", "old-normal"]


def test_heads_waiting_sixty_seconds_or_more_go_oldest_first_before_newer_heads() -> None:
    jobs = [
        job("new", "octo/a", waited=5),
        job("aged-younger", "octo/b", waited=AGING_S),
        job("aged-older", "octo/c", waited=AGING_S + 30),
    ]
    assert [j.id for j in order_heads(jobs, NOW, {})] == ["aged-older", "aged-younger", "new"]


def test_newer_heads_rotate_between_repositories_by_least_recent_dispatch() -> None:
    jobs = [job("a", "octo/a", waited=20), job("b", "octo/b", waited=10), job("c", "octo/c", waited=5)]
    last = {"octo/a": NOW - 1, "octo/b": NOW - 100}  # octo/c has never had a job dispatched
    assert [j.id for j in order_heads(jobs, NOW, last)] == ["c", "b", "a"]


def test_background_jobs_go_last_however_long_they_waited() -> None:
    jobs = [job("bg", "octo/a", waited=5000, priority=Priority.BACKGROUND), job("normal", "octo/b", waited=1)]
    assert [j.id for j in order_heads(jobs, NOW, {})] == ["normal", "bg"]


def test_dispatch_rotates_a_busy_repository_behind_others_after_each_job() -> None:
    jobs = [
        job("a1", "octo/a", waited=30, candidates=["d1", "d2", "d3"]),
        job("a2", "octo/a", waited=29, candidates=["d1", "d2", "d3"]),
        job("b1", "octo/b", waited=10, candidates=["d1", "d2", "d3"]),
    ]
    result = plan(jobs, ["d1", "d2", "d3"])
    assert [j for j, _ in started(result)] == ["a1", "b1", "a2"]


HOSTS = {"big-1": "host-a", "small-1": "host-a", "small-2": "host-a", "elsewhere": "host-b"}


def hosted(jobs: list[QueuedJob], free: Iterable[str], host_room: dict[str, int]) -> DispatchPlan:
    return plan_dispatch(
        jobs,
        now=NOW,
        free_devices=free,
        session_room={j.session_id: 4 for j in jobs},
        last_dispatch={},
        device_hosts=HOSTS,
        host_room=host_room,
    )


def big_and_small(big_waited: float, *, gate: bool = False) -> list[QueuedJob]:
    """An 8-vCPU head on host-a and a 2-vCPU job behind it on the same host."""
    priority = Priority.GATE if gate else Priority.NORMAL
    return [
        job("big", "octo/a", waited=big_waited, priority=priority, candidates=["big-1"], vcpus=8),
        job("small", "octo/b", waited=1, candidates=["small-1"]),
    ]


def test_capped_head_allows_backfill_only_until_its_grace_expires() -> None:
    # host-a has 4 vCPUs left: the 8-vCPU head does not fit, a 2-vCPU job behind it does
    young = big_and_small(30)
    result = hosted(young, ["big-1", "small-1"], {"host-a": 4})
    assert started(result) == [("small", "small-1")]
    assert result.waiting["big"].kind is WaitKind.CAPACITY

    aged = big_and_small(BACKFILL_GRACE_S + 1)
    result = hosted(aged, ["big-1", "small-1"], {"host-a": 4})
    assert started(result) == []
    assert (result.waiting["small"].kind, result.waiting["small"].on) == (WaitKind.FENCED, "big")


def test_capacity_blocked_gate_still_fences_smaller_workers() -> None:
    gate = big_and_small(1, gate=True)
    result = hosted(gate, ["big-1", "small-1"], {"host-a": 4})
    assert started(result) == []
    assert result.waiting["small"].kind is WaitKind.FENCED


def test_a_fence_holds_only_the_blocked_heads_host() -> None:
    jobs = [
        job("big", "octo/a", waited=BACKFILL_GRACE_S + 1, candidates=["big-1"], vcpus=8),
        job("elsewhere", "octo/b", waited=1, candidates=["small-1", "elsewhere"]),
    ]
    result = hosted(jobs, ["big-1", "small-1", "elsewhere"], {"host-a": 4, "host-b": 4})
    assert started(result) == [("elsewhere", "elsewhere")]


def test_a_head_that_fits_takes_its_hosts_vcpus_before_the_next_is_placed() -> None:
    jobs = [
        job("first", "octo/a", waited=10, candidates=["small-1"], vcpus=3),
        job("second", "octo/b", waited=5, candidates=["small-2"], vcpus=3),
    ]
    result = hosted(jobs, ["small-1", "small-2"], {"host-a": 4})
    assert started(result) == [("first", "small-1")]
    assert result.waiting["second"].kind is WaitKind.CAPACITY


def test_a_young_blocked_head_lets_heads_behind_it_take_other_devices() -> None:
    jobs = [
        job("blocked", "octo/a", waited=10, candidates=["busy"]),
        job("next", "octo/b", waited=5, candidates=["busy", "free"]),
    ]
    result = plan(jobs, ["free"])
    assert started(result) == [("next", "free")]
    assert result.waiting["blocked"].kind is WaitKind.DEVICE


def test_a_job_waiting_for_a_busy_device_gets_it_first_when_it_frees() -> None:
    jobs = [
        job("waited-long", "octo/a", waited=500, candidates=["d1"]),
        job("newcomer", "octo/b", waited=1, candidates=["d1"]),
    ]
    assert started(plan(jobs, ["d1"])) == [("waited-long", "d1")]


def test_gate_jobs_get_freed_devices_before_older_workers() -> None:
    jobs = [
        job("gate", "octo/a", waited=1, priority=Priority.GATE, candidates=["d1"]),
        job("worker", "octo/b", waited=500, candidates=["d1"]),
    ]
    assert started(plan(jobs, ["d1"])) == [("gate", "d1")]


def test_a_job_whose_session_holds_max_devkits_waits_on_its_own_session_and_blocks_nobody() -> None:
    jobs = [
        job("second-of-session", "octo/a", waited=300, session="s1", candidates=["d1"]),
        job("other", "octo/a", waited=10, session="s2", candidates=["d1"]),
    ]
    result = plan(jobs, ["d1"], room={"s1": 0, "s2": 1})
    assert started(result) == [("other", "d1")]
    waiting = result.waiting["second-of-session"]
    assert (waiting.kind, waiting.on) == (WaitKind.OWN_SESSION, "s1")
    assert not waiting.counts_toward_queue_wait


def test_waiting_on_a_device_counts_toward_queue_wait() -> None:
    result = plan([job("j", candidates=["busy"])], [])
    assert result.waiting["j"].counts_toward_queue_wait


def test_a_blocked_head_does_not_stop_the_next_job_of_its_repository() -> None:
    jobs = [
        job("first", "octo/a", waited=30, candidates=["busy"]),
        job("second", "octo/a", waited=20, candidates=["free"]),
    ]
    assert started(plan(jobs, ["free"])) == [("second", "free")]


def test_jobs_of_one_session_take_at_most_its_room() -> None:
    jobs = [
        job(f"t{n}", "octo/a", waited=10 - n, session="s", candidates=["d1", "d2", "d3"]) for n in range(3)
    ]
    result = plan(jobs, ["d1", "d2", "d3"], room={"s": 2})
    assert [j for j, _ in started(result)] == ["t0", "t1"]
    assert result.waiting["t2"].kind is WaitKind.OWN_SESSION


def test_queue_position_counts_waiting_jobs_in_dispatch_order() -> None:
    jobs = [
        job("gate", "octo/a", waited=1, priority=Priority.GATE, candidates=["busy"]),
        job("normal", "octo/b", waited=30, candidates=["busy"]),
        job("bg", "octo/c", waited=900, priority=Priority.BACKGROUND, candidates=["busy"]),
    ]
    result = plan(jobs, [])
    assert [result.position(j) for j in ("gate", "normal", "bg")] == [1, 2, 3]


def test_the_same_queue_gives_the_same_plan() -> None:
    jobs = [
        job(f"j{n}", f"octo/r{n % 3}", waited=n * 7 % 90, candidates=[f"d{n % 4}", f"d{(n + 1) % 4}"])
        for n in range(12)
    ]
    first = started(plan(jobs, ["d0", "d1", "d2", "d3"]))
    assert all(started(plan(list(reversed(jobs)), ["d3", "d2", "d1", "d0"])) == first for _ in range(3))


@st.composite
def queues(
    draw: st.DrawFn,
) -> tuple[list[QueuedJob], set[str], dict[str, int], dict[str, str], dict[str, int]]:
    devices = [f"d{n}" for n in range(draw(st.integers(1, 6)))]
    hosts = {device: f"h{draw(st.integers(0, 2))}" for device in devices}
    jobs = [
        job(
            f"j{n}",
            f"octo/r{draw(st.integers(0, 3))}",
            waited=draw(st.floats(0, 300)),
            priority=draw(st.sampled_from(list(Priority))),
            candidates=draw(st.lists(st.sampled_from(devices), min_size=1, max_size=3, unique=True)),
            session=f"s{draw(st.integers(0, 4))}",
            vcpus=draw(st.integers(1, 8)),
        )
        for n in range(draw(st.integers(0, 12)))
    ]
    free = set(draw(st.lists(st.sampled_from(devices), unique=True)))
    room = {f"s{n}": draw(st.integers(0, 3)) for n in range(5)}
    host_room = {f"h{n}": draw(st.integers(0, 16)) for n in range(3)}
    return jobs, free, room, hosts, host_room


@settings(max_examples=300, deadline=None)
@given(queues())
def test_every_job_is_either_started_on_a_free_candidate_or_told_why_it_waits(
    case: tuple[list[QueuedJob], set[str], dict[str, int], dict[str, str], dict[str, int]],
) -> None:
    jobs, free, room, hosts, host_room = case
    result = plan_dispatch(
        jobs,
        now=NOW,
        free_devices=free,
        session_room=dict(room),
        last_dispatch={},
        device_hosts=hosts,
        host_room=dict(host_room),
    )
    devices = [device for _, device in result.assignments]
    assert len(devices) == len(set(devices))  # a device goes to one job
    for queued, device in result.assignments:
        assert device in free
        assert device in queued.candidates
    per_session: dict[str, int] = {}
    per_host: dict[str, int] = {}
    for queued, device in result.assignments:
        per_session[queued.session_id] = per_session.get(queued.session_id, 0) + 1
        per_host[hosts[device]] = per_host.get(hosts[device], 0) + queued.vcpus
    assert all(count <= room.get(session, 0) for session, count in per_session.items())
    assert all(used <= host_room[host] for host, used in per_host.items())
    started_ids = {queued.id for queued, _ in result.assignments}
    assert started_ids.isdisjoint(result.waiting)
    assert started_ids | set(result.waiting) == {j.id for j in jobs}
    assert sorted(result.order) == sorted(j.id for j in jobs)
    assert len(result.order) == len(set(result.order))


# Seed 003's named queue-order tests, with a repository in place of a workspace and a session's
# max_devkits in place of "blocked by its own workspace".

EIGHT = [f"d{n}" for n in range(8)]


def dispatch_rounds(
    jobs: list[QueuedJob], room: dict[str, int], rounds: Iterable[tuple[Iterable[str], dict[str, int]]]
) -> list[str]:
    """Dispatch round after round, each freeing some devices and some sessions' room (``(devices, room)``);
    the ids of the jobs started, in the order they started. Started jobs hold their devices."""
    queue, room, last, started_ids = list(jobs), dict(room), {}, []
    for n, (freed, freed_room) in enumerate(rounds):
        for session, more in freed_room.items():
            room[session] += more
        now = NOW + n
        result = plan_dispatch(queue, now=now, free_devices=freed, session_room=room, last_dispatch=last)
        for queued, _ in result.assignments:
            started_ids.append(queued.id)
            queue.remove(queued)
            room[queued.session_id] -= 1
            last[queued.repository] = now
    return started_ids


@pytest.mark.parametrize(
    "rounds",
    [[(EIGHT, {})], [([device], {}) for device in EIGHT]],
    ids=["eight-free-at-once", "one-freed-per-round"],
)
def test_gate_gets_next_eight_permits_before_older_workers_and_later_gates(
    rounds: list[tuple[list[str], dict[str, int]]],
) -> None:
    gate = [
        job(
            f"gate-{n}", "octo/merge", waited=30 - n, priority=Priority.GATE, candidates=EIGHT, session="gate"
        )
        for n in range(8)
    ]
    older_workers = [job(f"worker-{n}", f"octo/w{n}", waited=500 + n, candidates=EIGHT) for n in range(8)]
    later_gate = [
        job(
            f"later-{n}",
            "octo/later",
            waited=10 - n,
            priority=Priority.GATE,
            candidates=EIGHT,
            session="later",
        )
        for n in range(8)
    ]
    jobs = older_workers + later_gate + gate
    room = {queued.session_id: 8 for queued in jobs}
    assert dispatch_rounds(jobs, room, rounds) == [queued.id for queued in gate]


@pytest.mark.parametrize("gate_vcpus", [2, 8], ids=["gate-would-fit", "gate-would-fence-its-host"])
def test_workspace_conflicted_gate_does_not_block_independent_workers(gate_vcpus: int) -> None:
    # The gate's session already holds max_devkits devices. Were it a head, it would take small-1 (2 vCPUs)
    # or, not fitting host-a's 4 vCPUs (8), hold host-a against both workers.
    jobs = [
        job(
            "gate",
            "octo/a",
            priority=Priority.GATE,
            candidates=["small-1"],
            session="merge",
            vcpus=gate_vcpus,
        ),
        job("same-repository", "octo/a", waited=0.5, candidates=["small-1", "small-2"]),
        job("other-repository", "octo/b", waited=0.5, candidates=["small-1", "small-2"]),
    ]
    result = plan_dispatch(
        jobs,
        now=NOW,
        free_devices=["small-1", "small-2"],
        session_room={"merge": 0, "s-same-repository": 1, "s-other-repository": 1},
        last_dispatch={},
        device_hosts=HOSTS,
        host_room={"host-a": 4},
    )
    assert sorted(queued for queued, _ in started(result)) == ["other-repository", "same-repository"]
    assert (result.waiting["gate"].kind, result.waiting["gate"].on) == (WaitKind.OWN_SESSION, "merge")


def test_waiting_gate_does_not_stop_or_repin_running_workers() -> None:
    # A running worker holds leased-1 (on host-b, with room to spare): leased, so not free. Running workers
    # on host-a claim all but 2 of its vCPUs. The gate may use either device and claims 4.
    gate = job("gate", "octo/a", priority=Priority.GATE, candidates=["leased-1", "small-1"], vcpus=4)
    result = plan_dispatch(
        [gate],
        now=NOW,
        free_devices=["small-1"],
        session_room={gate.session_id: 4},
        last_dispatch={},
        device_hosts={"leased-1": "host-b", "small-1": "host-a"},
        host_room={"host-a": 2, "host-b": 16},
    )
    assert started(result) == []
    assert result.waiting["gate"].kind is WaitKind.CAPACITY


def test_jobs_waiting_on_a_workspace_keep_fifo_order() -> None:
    # Ids run against arrival, and the oldest have aged past 60 s while the youngest has not: only arrival
    # order gives this order.
    arrivals = ["t-e", "t-d", "t-c", "t-b", "t-a"]
    jobs = [
        job(job_id, "octo/a", waited=120 - 20 * n, session="s", candidates=EIGHT)
        for n, job_id in enumerate(arrivals)
    ]
    jobs.append(job("other", "octo/a", waited=90, session="other", candidates=EIGHT))
    # Round 0: the session is at max_devkits; then each round one of its jobs ends and one device frees.
    rounds = [(["d0"], {})] + [([f"d{n}"], {"s": 1}) for n in range(1, 6)]
    waiting = plan(jobs, ["d0"], room={"s": 0, "other": 1})
    assert [waiting.position(job_id) for job_id in arrivals] == [1, 2, 3, 4, 5]
    assert dispatch_rounds(jobs, {"s": 0, "other": 1}, rounds) == ["other", *arrivals]


def test_dispatch_indexes_add_each_starting_weight_and_cpu_claim_before_selecting_next() -> None:
    # host-a has 8 vCPUs left: 3 + 3 fit, a third 3 does not, and the 2-vCPU job behind it takes what is left.
    hosts = {"a1": "host-a", "a2": "host-a", "a3": "host-a", "a4": "host-a", "b1": "host-b"}
    jobs = [
        job("first", "octo/a", waited=50, candidates=["a1"], vcpus=3),
        job("second", "octo/b", waited=40, candidates=["a2"], vcpus=3),
        job("third", "octo/c", waited=30, candidates=["a3"], vcpus=3),
        job("fourth", "octo/d", waited=20, candidates=["a4"], vcpus=2),
        job("elsewhere", "octo/e", waited=10, candidates=["b1"], vcpus=4),
    ]
    result = plan_dispatch(
        jobs,
        now=NOW,
        free_devices=hosts,
        session_room={queued.session_id: 1 for queued in jobs},
        last_dispatch={},
        device_hosts=hosts,
        host_room={"host-a": 8, "host-b": 4},
    )
    assert started(result) == [("first", "a1"), ("second", "a2"), ("fourth", "a4"), ("elsewhere", "b1")]
    assert result.waiting["third"].kind is WaitKind.CAPACITY


def test_jobs_ready_at_the_same_moment_go_in_arrival_order_not_id_text_order() -> None:
    # Row 9 arrived before row 10; as text "10" sorts first, so the tie must be broken by arrival.
    nine = QueuedJob("9", "octo/a", "s", Priority.NORMAL, NOW - 5, ("d1",), arrival=9)
    ten = QueuedJob("10", "octo/a", "s", Priority.NORMAL, NOW - 5, ("d1",), arrival=10)
    result = plan([ten, nine], ["d1"])
    assert started(result) == [("9", "d1")]
    assert list(result.order) == ["9", "10"]


def test_a_reservation_comes_after_gate_work_and_before_everything_else() -> None:
    reservation = dataclasses.replace(job("r", "@hubot", waited=1), reservation=True, vcpus=0)
    aged = job("aged", "octo/a", waited=600)
    gate = job("gate", "octo/b", waited=1, priority=Priority.GATE)
    background = job("bg", "octo/c", waited=900, priority=Priority.BACKGROUND)
    result = plan([aged, background, reservation, gate], ["d1"])
    assert started(result) == [("gate", "d1")]
    assert list(result.order) == ["gate", "r", "aged", "bg"]
    assert started(plan([aged, background, reservation], ["d1"])) == [("r", "d1")]
