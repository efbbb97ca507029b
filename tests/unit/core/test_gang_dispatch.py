"""Gang jobs in the dispatch round: every role's device on one runner host, all or none, in queue order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.dispatch_order import (
    AGING_S,
    BACKFILL_GRACE_S,
    DispatchPlan,
    QueuedJob,
    WaitKind,
    plan_dispatch,
)
from kerrigan.core.gang import NO_HOST_FOR_EVERY_ROLE, Role, RoleCount, hosts_for_every_role, match_roles
from kerrigan.core.manifest import Priority

NOW = 10_000.0
HOSTS = {
    "a-dut": "host-a",
    "a-dut2": "host-a",
    "a-peer": "host-a",
    "b-dut": "host-b",
    "b-peer": "host-b",
}


def single(
    job_id: str,
    repository: str = "octo/s",
    *,
    waited: float = 1.0,
    candidates: Iterable[str] = ("a-dut",),
    priority: Priority = Priority.NORMAL,
    session: str | None = None,
    vcpus: int = 2,
) -> QueuedJob:
    return QueuedJob(
        job_id, repository, session or f"s-{job_id}", priority, NOW - waited, tuple(candidates), vcpus
    )


def gang(
    job_id: str,
    repository: str = "octo/g",
    *,
    waited: float = 1.0,
    roles: Mapping[str, Iterable[str]] | None = None,
    priority: Priority = Priority.NORMAL,
    session: str | None = None,
    vcpus: int = 2,
) -> QueuedJob:
    wanted = roles if roles is not None else {"dut": ["a-dut", "b-dut"], "peer": ["a-peer", "b-peer"]}
    return QueuedJob(
        job_id,
        repository,
        session or f"s-{job_id}",
        priority,
        NOW - waited,
        (),
        vcpus,
        roles=tuple(Role(name, tuple(devices)) for name, devices in wanted.items()),
    )


def plan(
    jobs: list[QueuedJob],
    free: Iterable[str],
    *,
    room: dict[str, int] | None = None,
    host_room: dict[str, int] | None = None,
    hosts: Mapping[str, str] = HOSTS,
    now: float = NOW,
    last: dict[str, float] | None = None,
) -> DispatchPlan:
    return plan_dispatch(
        jobs,
        now=now,
        free_devices=free,
        session_room=room if room is not None else {j.session_id: 4 for j in jobs},
        last_dispatch=last or {},
        device_hosts=hosts,
        host_room=host_room,
    )


def started(result: DispatchPlan) -> list[tuple[str, str]]:
    return [(queued.id, device) for queued, device in result.assignments]


# All or none, on one host, distinct devices


def test_a_gang_starts_with_a_device_for_every_role_on_one_host() -> None:
    result = plan([gang("g")], ["a-dut", "a-peer"])
    assert started(result) == [("g", "a-dut"), ("g", "a-peer")]
    assert result.gangs["g"].host == "host-a"
    assert result.gangs["g"].devices == (("dut", "a-dut"), ("peer", "a-peer"))


def test_a_gang_missing_one_role_takes_nothing_and_says_which_role_lacks_a_device() -> None:
    result = plan([gang("g")], ["a-dut", "b-dut"])
    assert started(result) == []
    assert result.waiting["g"].kind is WaitKind.DEVICE
    assert [str(count) for count in result.waiting["g"].roles] == [
        "role dut: 2/2 devices free",
        "role peer: 0/2 devices free",
    ]


def test_a_gang_is_never_split_across_runner_hosts() -> None:
    result = plan([gang("g")], ["a-dut", "b-peer"])
    assert started(result) == []
    waiting = result.waiting["g"]
    assert waiting.kind is WaitKind.GANG
    assert waiting.roles == (RoleCount("dut", 1, 2), RoleCount("peer", 1, 2))


def test_two_roles_that_can_use_the_same_device_get_distinct_devices() -> None:
    roles = {"dut": ["a-dut", "a-dut2"], "peer": ["a-dut"]}
    assert started(plan([gang("g", roles=roles)], ["a-dut", "a-dut2"])) == [("g", "a-dut2"), ("g", "a-dut")]
    alone = plan([gang("g", roles=roles)], ["a-dut"])
    assert started(alone) == []
    assert alone.waiting["g"].kind is WaitKind.GANG


def test_a_device_whose_host_is_unknown_is_no_gangs_device() -> None:
    roles = {"dut": ["x"], "peer": ["y"]}
    result = plan([gang("g", roles=roles)], ["x", "y"], hosts={})
    assert started(result) == []


def test_a_gang_claims_its_vcpus_once_on_its_host_and_goes_where_they_fit() -> None:
    jobs = [gang("g", waited=10, vcpus=6), single("after", waited=5, candidates=["a-dut2"], vcpus=1)]
    result = plan(
        jobs, ["a-dut", "a-dut2", "a-peer", "b-dut", "b-peer"], host_room={"host-a": 6, "host-b": 5}
    )
    # host-a is preferred and has 6 vCPUs: the gang takes them all (once, not once per device) ...
    assert started(result) == [("g", "a-dut"), ("g", "a-peer")]
    assert result.waiting["after"].kind is WaitKind.CAPACITY  # ... so host-a has none for the next job
    moved = plan(jobs[:1], ["a-dut", "a-peer", "b-dut", "b-peer"], host_room={"host-a": 4, "host-b": 6})
    assert moved.gangs["g"].host == "host-b"


def test_a_gang_whose_full_host_lacks_vcpus_waits_on_capacity() -> None:
    result = plan([gang("g", vcpus=8)], ["a-dut", "a-peer"], host_room={"host-a": 4})
    assert started(result) == []
    assert result.waiting["g"].kind is WaitKind.CAPACITY


def test_a_gang_needs_session_room_for_one_device_per_role() -> None:
    short = plan([gang("g", session="s")], ["a-dut", "a-peer"], room={"s": 1})
    assert started(short) == []
    assert (short.waiting["g"].kind, short.waiting["g"].on) == (WaitKind.OWN_SESSION, "s")
    assert not short.waiting["g"].counts_toward_queue_wait
    jobs = [gang("g", waited=10, session="s"), single("t", waited=5, candidates=["b-dut"], session="s")]
    enough = plan(jobs, ["a-dut", "a-peer", "b-dut"], room={"s": 2})
    assert [job for job, _ in started(enough)] == ["g", "g"]
    assert enough.waiting["t"].kind is WaitKind.OWN_SESSION  # the gang took both of the session's devices


def test_a_gang_job_appears_once_in_the_queue_order() -> None:
    result = plan([gang("g"), single("s", candidates=["b-dut"])], ["a-dut", "a-peer"])
    assert list(result.order) == ["g", "s"]


# Queue order between gangs and single jobs


def test_a_gate_single_job_goes_before_an_older_gang() -> None:
    jobs = [gang("g", waited=500), single("gate", waited=1, priority=Priority.GATE, candidates=["a-dut"])]
    result = plan(jobs, ["a-dut", "a-peer"])
    assert started(result) == [("gate", "a-dut")]


def test_an_aged_gang_goes_before_newer_single_jobs() -> None:
    jobs = [single("new", waited=5, candidates=["a-peer"]), gang("g", waited=AGING_S + 1)]
    assert [job for job, _ in started(plan(jobs, ["a-dut", "a-peer"]))] == ["g", "g"]


def test_a_background_gang_goes_after_newer_single_jobs() -> None:
    jobs = [
        gang("bg", waited=900, priority=Priority.BACKGROUND),
        single("new", waited=1, candidates=["a-peer"]),
    ]
    result = plan(jobs, ["a-dut", "a-peer"])
    assert started(result) == [("new", "a-peer")]


def test_newer_gangs_rotate_between_repositories_with_single_jobs() -> None:
    jobs = [single("s", "octo/busy", waited=20, candidates=["a-dut"]), gang("g", "octo/quiet", waited=5)]
    result = plan(jobs, ["a-dut", "a-peer"], last={"octo/busy": NOW - 1})
    assert [job for job, _ in started(result)] == ["g", "g"]


def test_the_older_of_two_gangs_wanting_the_same_devices_goes_first() -> None:
    jobs = [gang("young", waited=5), gang("old", waited=30)]
    result = plan(jobs, ["a-dut", "a-peer"])
    assert [job for job, _ in started(result)] == ["old", "old"]
    assert result.waiting["young"].kind is WaitKind.DEVICE


# Starvation and deadlock: rounds in which devices free one at a time


def rounds_until_started(
    queue: list[QueuedJob],
    holders: dict[str, str],
    frees: Iterable[str],
    arriving: Iterable[QueuedJob | None],
    *,
    step: float = 20.0,
) -> list[list[str]]:
    """Dispatch round after round. Before each round the job holding the next device of ``frees`` ends and
    the next of ``arriving`` (if any) joins the queue; started jobs hold their devices. The ids started in
    each round (a gang once)."""
    queue, holders = list(queue), dict(holders)
    last: dict[str, float] = {}
    per_round: list[list[str]] = []
    for n, (freed, newcomer) in enumerate(zip(frees, arriving, strict=True)):
        now = NOW + n * step
        holders.pop(freed, None)
        if newcomer is not None:
            queue.append(newcomer)
        free = set(HOSTS) - set(holders)
        result = plan(queue, free, now=now, last=last, room={job.session_id: 4 for job in queue})
        ids = list(dict.fromkeys(job.id for job, _ in result.assignments))
        for job, device in result.assignments:
            holders[device] = job.id
            last[job.repository] = now
        queue = [job for job in queue if job.id not in ids]
        per_round.append(ids)
    return per_round


def stream(count: float, step: float = 20.0) -> list[QueuedJob | None]:
    """A single job arriving each round, wanting either of host-a's devices that the gang needs."""
    return [
        QueuedJob(f"s{n}", "octo/s", f"s-s{n}", Priority.NORMAL, NOW + n * step - 1, ("a-dut", "a-peer"))
        for n in range(int(count))
    ]


def test_a_gang_past_its_grace_is_not_starved_by_single_jobs_taking_its_devices_in_turn() -> None:
    # Both of host-a's devices are busy; they free in turn, and each round a single job arrives that can
    # take either. host-b's pair stays busy. The gang entered the queue at NOW.
    only_a = {"dut": ["a-dut"], "peer": ["a-peer"]}
    g = QueuedJob(
        "g",
        "octo/g",
        "s-g",
        Priority.NORMAL,
        NOW,
        (),
        roles=tuple(Role(r, tuple(d)) for r, d in only_a.items()),
    )
    holders = {"a-dut": "x", "a-peer": "y", "b-dut": "z", "b-peer": "z"}
    frees = ["a-dut", "a-peer"] * 4
    per_round = rounds_until_started([g], holders, frees, stream(len(frees)))
    start = next(n for n, ids in enumerate(per_round) if "g" in ids)
    # Within its grace (rounds 0-3, 20 s apart) the single jobs took each freed device ...
    assert all(ids and "g" not in ids for ids in per_round[: int(BACKFILL_GRACE_S // 20)])
    # ... then the device that freed was set aside for the gang, and it started when the other one did.
    assert start == int(BACKFILL_GRACE_S // 20) + 1
    assert per_round[start - 1] == []


def test_a_single_job_kept_off_a_device_set_aside_for_a_gang_is_told_so() -> None:
    g = gang("g", waited=BACKFILL_GRACE_S + 1, roles={"dut": ["a-dut"], "peer": ["a-peer"]})
    result = plan([g, single("s", waited=1, candidates=["a-dut"])], ["a-dut"])
    assert started(result) == []
    assert (result.waiting["s"].kind, result.waiting["s"].on) == (WaitKind.FENCED, "g")


def test_a_young_gang_lets_single_jobs_use_its_free_devices() -> None:
    g = gang("g", waited=BACKFILL_GRACE_S - 1, roles={"dut": ["a-dut"], "peer": ["a-peer"]})
    assert started(plan([g, single("s", candidates=["a-dut"])], ["a-dut"])) == [("s", "a-dut")]


def test_a_gate_gang_sets_its_devices_aside_at_once() -> None:
    g = gang("g", priority=Priority.GATE, roles={"dut": ["a-dut"], "peer": ["a-peer"]})
    result = plan([g, single("s", candidates=["a-dut"])], ["a-dut"])
    assert started(result) == []
    assert result.waiting["s"].kind is WaitKind.FENCED


def test_a_gang_with_a_full_host_short_of_vcpus_holds_that_host_past_its_grace() -> None:
    g = gang("g", waited=BACKFILL_GRACE_S + 1, vcpus=8, roles={"dut": ["a-dut"], "peer": ["a-peer"]})
    small = single("s", candidates=["a-dut2"], vcpus=1)
    result = plan([g, small], ["a-dut", "a-peer", "a-dut2"], host_room={"host-a": 4})
    assert started(result) == []
    assert (result.waiting["s"].kind, result.waiting["s"].on) == (WaitKind.FENCED, "g")


def test_set_aside_devices_go_to_the_closest_host_only() -> None:
    # host-b has the dut free; host-a has nothing the gang wants: only b-dut is set aside, and a single
    # job may still take a-dut2.
    g = gang(
        "g", waited=BACKFILL_GRACE_S + 1, roles={"dut": ["a-dut", "b-dut"], "peer": ["a-peer", "b-peer"]}
    )
    result = plan([g, single("s", candidates=["b-dut", "a-dut2"])], ["b-dut", "a-dut2"])
    assert started(result) == [("s", "a-dut2")]


def test_only_one_gang_a_round_sets_devices_aside_on_a_host() -> None:
    # Both old gangs lack their peer on host-a; the older sets a-dut aside, the younger may not take
    # a-dut2 out of use as well, so a single job still gets it.
    roles = {"dut": ["a-dut", "a-dut2"], "peer": ["a-peer"]}
    older = gang("older", waited=BACKFILL_GRACE_S + 20, roles=roles)
    younger = gang("younger", waited=BACKFILL_GRACE_S + 10, roles=roles)
    result = plan([older, younger, single("s", candidates=["a-dut", "a-dut2"])], ["a-dut", "a-dut2"])
    assert started(result) == [("s", "a-dut2")]
    assert (result.waiting["younger"].kind, result.waiting["younger"].on) == (WaitKind.FENCED, "older")


def test_two_aged_gangs_wanting_the_same_devices_both_start_and_neither_holds_a_part() -> None:
    only_a = {"dut": ["a-dut"], "peer": ["a-peer"]}
    first = gang("first", waited=BACKFILL_GRACE_S + 20, roles=only_a)
    second = gang("second", waited=BACKFILL_GRACE_S + 10, roles=only_a)
    holders = {"a-dut": "x", "a-peer": "y", "b-dut": "z", "b-peer": "z"}
    # a-dut frees, then a-peer: the first gang starts; it ends (both free at once): the second starts.
    per_round = rounds_until_started([first, second], holders, ["a-dut", "a-peer", "none"], [None] * 3)
    assert per_round[:2] == [[], ["first"]]
    holders = {"b-dut": "z", "b-peer": "z"}
    assert rounds_until_started([second], holders, ["none"], [None]) == [["second"]]


# The static check: a runner host with a device for every role


def test_hosts_for_every_role_needs_one_host_with_a_distinct_device_per_role() -> None:
    hosts = {"a1": "host-a", "b1": "host-b", "b2": "host-b"}
    assert hosts_for_every_role([Role("dut", ("a1", "b1")), Role("peer", ("b2",))], hosts) == ("host-b",)
    assert hosts_for_every_role([Role("dut", ("a1",)), Role("peer", ("b1",))], hosts) == ()
    assert hosts_for_every_role([Role("dut", ("b1",)), Role("peer", ("b1",))], hosts) == ()  # one device
    assert hosts_for_every_role([Role("dut", ("x",)), Role("peer", ("y",))], {}) == ()
    assert NO_HOST_FOR_EVERY_ROLE == "gang: no runner host holds a device for every role"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ([["x", "y"], ["z"]], ["x", "z"]),  # no collision: everyone's first choice
        ([["x", "y"], ["x"]], ["y", "x"]),  # the first role moves over for the second
        ([["x"], ["x"]], ["x", None]),
        ([["x", "y"], ["y", "z"], ["x"]], ["y", "z", "x"]),
        ([[], ["x"]], [None, "x"]),
    ],
)
def test_match_roles_gives_each_role_a_distinct_device_preferring_first_choices(
    options: list[list[str]], expected: list[str | None]
) -> None:
    assert match_roles(options) == expected


def test_a_gang_jobs_candidates_are_its_roles_together() -> None:
    g = gang("g", roles={"dut": ["a", "b"], "peer": ["b", "c"]})
    assert g.candidates == ("a", "b", "c")
    assert g.devices_needed == 2
    with pytest.raises(ValueError, match="name a role twice"):
        QueuedJob("g", "r", "s", Priority.NORMAL, 0.0, (), roles=(Role("dut", ("a",)), Role("dut", ("b",))))
    with pytest.raises(ValueError, match="roles' candidates"):
        QueuedJob("g", "r", "s", Priority.NORMAL, 0.0, ("z",), roles=(Role("dut", ("a",)),))


def test_a_gang_the_round_did_not_reach_waits_with_no_device_free_for_any_role() -> None:
    result = plan([single("first", candidates=["a-dut"]), gang("g")], ["a-dut"])
    assert started(result) == [("first", "a-dut")]
    assert result.waiting["g"].roles == (RoleCount("dut", 0, 2), RoleCount("peer", 0, 2))


# Properties


DEVICES = [f"d{n}" for n in range(8)]


@st.composite
def mixed_queues(
    draw: st.DrawFn,
) -> tuple[list[QueuedJob], set[str], dict[str, int], dict[str, str], dict[str, int]]:
    hosts = {device: f"h{draw(st.integers(0, 2))}" for device in DEVICES}
    some = st.lists(st.sampled_from(DEVICES), min_size=1, max_size=4, unique=True)
    jobs = []
    for n in range(draw(st.integers(0, 12))):
        repository = f"octo/r{draw(st.integers(0, 3))}"
        waited = draw(st.floats(0, 300))
        priority = draw(st.sampled_from(list(Priority)))
        session = f"s{draw(st.integers(0, 4))}"
        vcpus = draw(st.integers(1, 8))
        if draw(st.booleans()):
            roles = {f"role{r}": draw(some) for r in range(draw(st.integers(1, 3)))}
            jobs.append(
                gang(
                    f"j{n}",
                    repository,
                    waited=waited,
                    roles=roles,
                    priority=priority,
                    session=session,
                    vcpus=vcpus,
                )
            )
        else:
            jobs.append(
                single(
                    f"j{n}",
                    repository,
                    waited=waited,
                    candidates=draw(some),
                    priority=priority,
                    session=session,
                    vcpus=vcpus,
                )
            )
    free = set(draw(st.lists(st.sampled_from(DEVICES), unique=True)))
    room = {f"s{n}": draw(st.integers(0, 4)) for n in range(5)}
    host_room = {f"h{n}": draw(st.integers(0, 16)) for n in range(3)}
    return jobs, free, room, hosts, host_room


@settings(max_examples=400, deadline=None)
@given(mixed_queues())
def test_no_plan_gives_a_device_twice_a_gang_in_part_or_a_gang_across_hosts(
    case: tuple[list[QueuedJob], set[str], dict[str, int], dict[str, str], dict[str, int]],
) -> None:
    jobs, free, room, hosts, host_room = case
    result = plan(jobs, free, room=dict(room), host_room=dict(host_room), hosts=hosts)
    devices = [device for _, device in result.assignments]
    assert len(devices) == len(set(devices))
    assert set(devices) <= free
    by_job: dict[str, list[str]] = {}
    for queued, device in result.assignments:
        by_job.setdefault(queued.id, []).append(device)
    per_session: dict[str, int] = {}
    per_host: dict[str, int] = {}
    for queued in jobs:
        if queued.id not in by_job:
            continue
        taken = by_job[queued.id]
        if queued.roles:
            placement = result.gangs[queued.id]
            assert len(taken) == len(queued.roles)  # every role, never a part
            assert {hosts[device] for device in taken} == {placement.host}  # one host
            for role, (name, device) in zip(queued.roles, placement.devices, strict=True):
                assert name == role.name
                assert device in role.candidates
            assert [device for _, device in placement.devices] == taken
        else:
            assert len(taken) == 1
            assert taken[0] in queued.candidates
            assert queued.id not in result.gangs
        per_session[queued.session_id] = per_session.get(queued.session_id, 0) + len(taken)
        host = hosts[taken[0]]
        per_host[host] = per_host.get(host, 0) + queued.vcpus
    assert all(count <= room.get(session, 0) for session, count in per_session.items())
    assert all(used <= host_room[host] for host, used in per_host.items())
    assert set(by_job).isdisjoint(result.waiting)
    assert set(by_job) | set(result.waiting) == {j.id for j in jobs}
    assert sorted(result.order) == sorted(j.id for j in jobs)
