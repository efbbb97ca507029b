"""Seed 003's CPU topology and allocator: first core kept back, whole cores first, overlap only when full."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.cpus import (
    ClaimRefused,
    Cpu,
    CpuAllocator,
    Topology,
    format_cpu_list,
    parse_cpu_list,
)


def host(cores: int, threads: int = 2, *, packages: int = 1, offline: tuple[int, ...] = ()) -> Topology:
    """A host numbered as Linux numbers it: thread ``t`` of core ``c`` is CPU ``c + t * cores``.

    Cores are spread evenly over ``packages``, each package numbering its cores from 0 (as the 2-socket Xeon
    does); the ``offline`` CPUs are left out.
    """
    per_package = cores // packages
    cpus = [
        Cpu(core + thread * cores, core // per_package, core % per_package)
        for core in range(cores)
        for thread in range(threads)
        if core + thread * cores not in offline
    ]
    return Topology.from_cpus(cpus)


def allocate_all(allocator: CpuAllocator, claims: list[int]) -> list[tuple[int, ...]]:
    return [allocator.allocate(f"job{n}", claim) for n, claim in enumerate(claims)]


# Five cores, two threads: core 0 is (0, 5) and is kept back; jobs get (1, 6), (2, 7), (3, 8), (4, 9).
FIVE_PAIRS = host(5)


@pytest.mark.parametrize(
    ("topology", "sibling_groups", "reserved", "allocatable"),
    [
        pytest.param(
            host(5), ((0, 5), (1, 6), (2, 7), (3, 8), (4, 9)), (0, 5), (1, 2, 3, 4, 6, 7, 8, 9), id="smt"
        ),
        pytest.param(host(4, 1), ((0,), (1,), (2,), (3,)), (0,), (1, 2, 3), id="no-smt"),
        pytest.param(
            host(4, 4),
            ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15)),
            (0, 4, 8, 12),
            (1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15),
            id="four-threads-per-core",
        ),
        pytest.param(
            host(4, offline=(0, 6)),
            ((1, 5), (2,), (3, 7), (4,)),
            (1, 5),
            (2, 3, 4, 7),
            id="cpu0-offline-first-online-core-kept",
        ),
        pytest.param(
            host(4, packages=2),
            ((0, 4), (1, 5), (2, 6), (3, 7)),
            (0, 4),
            (1, 2, 3, 5, 6, 7),
            id="two-sockets-with-the-same-core-ids",
        ),
    ],
)
def test_topology_reads_online_siblings_and_reserves_cpu_zero_core(
    topology: Topology,
    sibling_groups: tuple[tuple[int, ...], ...],
    reserved: tuple[int, ...],
    allocatable: tuple[int, ...],
) -> None:
    assert topology.sibling_groups == sibling_groups
    assert topology.physical_cores == len(sibling_groups)
    assert topology.reserved() == reserved
    assert topology.allocatable() == allocatable
    assert CpuAllocator(topology).limit == len(allocatable)


@pytest.mark.parametrize(
    ("topology", "cpus"),
    [
        pytest.param(host(1, 1), 1, id="one-cpu"),
        pytest.param(host(1, 2), 2, id="one-core-two-threads"),
        pytest.param(host(2, 2), 4, id="two-cores"),
        pytest.param(host(3, 1), 3, id="three-cores-no-smt"),
        pytest.param(host(3, 4), 12, id="three-cores-four-threads"),
        pytest.param(host(4, offline=(3, 7)), 6, id="four-cores-with-one-offline"),
    ],
)
def test_small_hosts_keep_every_cpu_allocatable(topology: Topology, cpus: int) -> None:
    assert topology.physical_cores < 4
    assert topology.reserved() == ()
    assert topology.allocatable() == topology.cpu_ids
    assert len(topology.allocatable()) == cpus


def test_topology_keeps_its_cpus_and_groups_in_ascending_order() -> None:
    shuffled = Topology((Cpu(3, 0, 1), Cpu(0, 0, 0), Cpu(2, 0, 0), Cpu(1, 0, 1)), ((3, 1), (2, 0)))
    assert shuffled.cpu_ids == (0, 1, 2, 3)
    assert shuffled.sibling_groups == ((0, 2), (1, 3))


@pytest.mark.parametrize(
    ("cpus", "groups", "message"),
    [
        pytest.param((), (), "at least one online CPU", id="empty"),
        pytest.param((Cpu(0, 0, 0), Cpu(0, 0, 0)), ((0,),), "twice", id="duplicate-cpu"),
        pytest.param((Cpu(0, 0, 0), Cpu(1, 0, 1)), ((0,),), "do not partition", id="cpu-in-no-group"),
        pytest.param((Cpu(0, 0, 0),), ((0,), (0,)), "do not partition", id="cpu-in-two-groups"),
        pytest.param((Cpu(0, 0, 0),), ((0, 1),), "do not partition", id="group-with-an-unknown-cpu"),
    ],
)
def test_topology_whose_groups_do_not_partition_its_cpus_is_rejected(
    cpus: tuple[Cpu, ...], groups: tuple[tuple[int, ...], ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        Topology(cpus, groups)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0", (0,)),
        ("0-3", (0, 1, 2, 3)),
        ("0-3,8,10-11", (0, 1, 2, 3, 8, 10, 11)),
        ("0-23,27-40,42,44,46-47\n", (*range(24), *range(27, 41), 42, 44, 46, 47)),
        ("5-5", (5,)),
        ("", ()),
        ("\n", ()),
    ],
)
def test_cpu_lists_parse_as_the_kernel_writes_them(text: str, cpus: tuple[int, ...]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize(
    "text",
    ["0-", "-3", "a", "0,,2", "0,", ",0", "3-1", "0-3,2", "4,1", "1,1", "0 - 3", "0, 1", "+1", "0-3:2", "٣"],
)
def test_malformed_cpu_lists_raise_naming_the_list(text: str) -> None:
    with pytest.raises(ValueError, match="malformed CPU list") as raised:
        parse_cpu_list(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize(
    ("cpus", "text"),
    [((), ""), ((0,), "0"), ((0, 1, 2, 3, 8, 10, 11), "0-3,8,10-11"), ((7, 1, 2, 2), "1-2,7")],
)
def test_cpu_sets_format_as_kernel_lists(cpus: tuple[int, ...], text: str) -> None:
    assert format_cpu_list(cpus) == text


@given(st.sets(st.integers(0, 300)))
def test_formatted_cpu_lists_parse_back_to_the_same_cpus(cpus: set[int]) -> None:
    assert parse_cpu_list(format_cpu_list(cpus)) == tuple(sorted(cpus))


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param([2, 2, 2, 2], [(1, 6), (2, 7), (3, 8), (4, 9)], id="pairs-one-by-one"),
        pytest.param([4, 2, 2], [(1, 2, 6, 7), (3, 8), (4, 9)], id="four-then-pairs"),
        pytest.param([2, 6], [(1, 6), (2, 3, 4, 7, 8, 9)], id="pair-then-the-rest"),
        pytest.param([8], [(1, 2, 3, 4, 6, 7, 8, 9)], id="the-whole-host"),
    ],
)
def test_even_claims_use_whole_pairs_without_overlap_while_free(
    claims: list[int], expected: list[tuple[int, ...]]
) -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    assert allocate_all(allocator, claims) == expected
    assert set(allocator.claims_per_cpu().values()) == {1}


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param([1, 1], [(1,), (6,)], id="second-single-fills-the-split-pair"),
        pytest.param([1, 3], [(1,), (2, 6, 7)], id="three-is-a-whole-pair-and-the-split-pairs-thread"),
        pytest.param([3, 1], [(1, 2, 6), (7,)], id="single-after-three-fills-its-split-pair"),
        pytest.param([3, 3], [(1, 2, 6), (3, 7, 8)], id="second-three-closes-the-first-ones-pair"),
        pytest.param([2, 1, 2, 1], [(1, 6), (2,), (3, 8), (7,)], id="pairs-stay-whole-around-singles"),
    ],
)
def test_odd_claims_prefer_an_already_split_pair(claims: list[int], expected: list[tuple[int, ...]]) -> None:
    assert allocate_all(CpuAllocator(FIVE_PAIRS), claims) == expected


def test_odd_claims_split_a_fresh_pair_only_when_no_pair_is_split() -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    assert allocate_all(allocator, [2, 2, 3]) == [(1, 6), (2, 7), (3, 4, 8)]


def fragmented_pairs() -> CpuAllocator:
    """Pairs (1, 6), (2, 7) and (3, 8) each with one free thread (1, 2, 3); (4, 9) fully held."""
    allocator = CpuAllocator(FIVE_PAIRS)
    assert allocate_all(allocator, [1] * 8) == [(1,), (6,), (2,), (7,), (3,), (8,), (4,), (9,)]
    for job in ("job0", "job2", "job4"):
        allocator.release(job)
    return allocator


@pytest.mark.parametrize(
    ("claim", "expected"),
    [pytest.param(2, (1, 2), id="two"), pytest.param(3, (1, 2, 3), id="every-free-thread")],
)
def test_fragmented_even_claim_uses_free_threads_before_overlap(
    claim: int, expected: tuple[int, ...]
) -> None:
    allocator = fragmented_pairs()
    assert allocator.allocate("fragmented", claim) == expected
    assert max(allocator.claims_per_cpu().values()) == 1


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param(
            [4, 4, 2, 2, 3],
            [(1, 2, 6, 7), (3, 4, 8, 9), (1, 2), (3, 4), (6, 7, 8)],
            id="full-host-overlaps-the-least-claimed",
        ),
        pytest.param(
            [6, 4, 2],
            [(1, 2, 3, 6, 7, 8), (1, 2, 4, 9), (3, 4)],
            id="free-cpus-first-then-the-least-claimed",
        ),
    ],
)
def test_overlap_uses_least_claimed_cpus_only_after_free_cpus(
    claims: list[int], expected: list[tuple[int, ...]]
) -> None:
    assert allocate_all(CpuAllocator(FIVE_PAIRS), claims) == expected


def test_recorded_live_cpu_sets_reregister_after_restart() -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    allocator.register("kept-pair", (6, 1))
    allocator.register("kept-single", [2])
    allocator.register("kept-overlapping", (1, 3))
    assert allocator.allocations() == {"kept-pair": (1, 6), "kept-single": (2,), "kept-overlapping": (1, 3)}
    assert allocator.claims_per_cpu() == {1: 2, 2: 1, 3: 1, 4: 0, 6: 1, 7: 0, 8: 0, 9: 0}
    # New claims place around the re-registered sets as around any others.
    assert allocator.allocate("new-single", 1) == (7,)
    assert allocator.allocate("new-pair", 2) == (4, 9)


@pytest.mark.parametrize(
    ("cpus", "message"),
    [
        pytest.param((0,), "not allocatable", id="reserved-core"),
        pytest.param((1, 11), "not allocatable", id="unknown-cpu"),
        pytest.param((), "no recorded CPUs", id="empty"),
        pytest.param((1, 1), "twice", id="duplicate"),
    ],
)
def test_recorded_cpu_sets_outside_the_allocatable_cpus_are_rejected(
    cpus: tuple[int, ...], message: str
) -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    with pytest.raises(ValueError, match=message):
        allocator.register("job", cpus)
    assert allocator.allocations() == {}


def test_a_job_holds_one_cpu_set_at_a_time() -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    allocator.allocate("job", 2)
    with pytest.raises(ValueError, match="already holds CPUs 1,6"):
        allocator.allocate("job", 2)
    with pytest.raises(ValueError, match="already holds"):
        allocator.register("job", (3,))


def test_release_frees_the_jobs_cpus_and_is_idempotent() -> None:
    allocator = CpuAllocator(FIVE_PAIRS)
    allocator.allocate("job", 3)
    assert allocator.release("job") == (1, 2, 6)
    assert allocator.release("job") == ()
    assert set(allocator.claims_per_cpu().values()) == {0}
    assert allocator.allocate("again", 3) == (1, 2, 6)


@pytest.mark.parametrize(
    ("topology", "claim", "detail"),
    [
        pytest.param(FIVE_PAIRS, 0, "claims 0 vCPUs; a job claims at least 1 vCPU", id="zero"),
        pytest.param(FIVE_PAIRS, -2, "claims -2 vCPUs; a job claims at least 1 vCPU", id="negative"),
        pytest.param(FIVE_PAIRS, 9, "claims 9 vCPUs; this host has 8 allocatable", id="over-by-one"),
        pytest.param(host(3, 1), 4, "claims 4 vCPUs; this host has 3 allocatable", id="small-host"),
        pytest.param(host(1, 1), 2, "claims 2 vCPUs; this host has 1 allocatable", id="one-cpu"),
    ],
)
def test_oversized_and_zero_claims_are_refused_before_start_with_limit_detail(
    topology: Topology, claim: int, detail: str
) -> None:
    allocator = CpuAllocator(topology)
    with pytest.raises(ClaimRefused) as refused:
        allocator.allocate("job", claim)
    assert refused.value.reason == "runner_full"
    assert refused.value.detail == detail
    assert str(refused.value) == f"runner_full: {detail}"
    assert allocator.allocations() == {}
    assert set(allocator.claims_per_cpu().values()) == {0}


def test_a_claim_of_the_whole_allocatable_host_is_accepted() -> None:
    assert CpuAllocator(host(1, 1)).allocate("job", 1) == (0,)


@pytest.mark.parametrize(
    ("claims", "expected"),
    [
        pytest.param([2, 2], [(0, 3), (6, 9)], id="second-pair-fills-the-split-core"),
        pytest.param([2, 6], [(0, 3), (1, 4, 6, 7, 9, 10)], id="whole-core-plus-the-split-cores-rest"),
        pytest.param([3, 1, 5], [(0, 3, 6), (9,), (1, 2, 4, 7, 10)], id="single-closes-the-split-core"),
    ],
)
def test_four_thread_cores_fill_a_split_core_before_splitting_a_fresh_one(
    claims: list[int], expected: list[tuple[int, ...]]
) -> None:
    # Three cores of four threads: (0, 3, 6, 9), (1, 4, 7, 10), (2, 5, 8, 11); none kept back.
    assert allocate_all(CpuAllocator(host(3, 4)), claims) == expected


def test_hosts_without_smt_place_one_cpu_per_core_and_overlap_when_full() -> None:
    # Five single-thread cores: CPU 0 is kept back.
    assert allocate_all(CpuAllocator(host(5, 1)), [1, 1, 3]) == [(1,), (2,), (1, 3, 4)]


def test_single_cpu_cores_take_the_odd_thread_when_no_pair_is_split() -> None:
    # Cores 0 and 2 lost their second thread: the single CPU of core 2 takes an odd thread whole.
    allocator = CpuAllocator(host(5, offline=(5, 7)))
    assert allocator.topology.reserved() == (0,)
    assert allocate_all(allocator, [1, 2, 3]) == [(2,), (1, 6), (3, 4, 8)]


@st.composite
def topologies(draw: st.DrawFn) -> Topology:
    """Hosts of 1-10 cores with 1, 2 or 4 threads each, numbered either way, some CPUs offline."""
    cores = draw(st.integers(1, 10))
    threads = draw(st.sampled_from([1, 2, 4]))
    strided = draw(st.booleans())
    cpus = [
        Cpu(core + thread * cores if strided else core * threads + thread, 0, core)
        for core in range(cores)
        for thread in range(threads)
    ]
    kept = draw(st.lists(st.booleans(), min_size=len(cpus), max_size=len(cpus)))
    online = [cpu for cpu, keep in zip(cpus, kept, strict=True) if keep] or cpus[:1]
    return Topology.from_cpus(online)


# Each step allocates a claim (scaled down to the host) or, when ``release`` is drawn, frees a live job.
steps = st.lists(st.tuples(st.booleans(), st.integers(1, 40)), max_size=25)


def check_allocation(allocator: CpuAllocator, job_id: str, claim: int) -> tuple[int, ...]:
    """Allocate, asserting the properties every allocation has."""
    before = allocator.claims_per_cpu()
    cpus = allocator.allocate(job_id, claim)
    assert len(cpus) == claim
    assert len(set(cpus)) == claim
    assert set(cpus) <= set(allocator.topology.allocatable())
    free = {cpu for cpu, count in before.items() if count == 0}
    if len(free) >= claim:
        assert set(cpus) <= free
    else:
        # Every free CPU first; the overlap takes only CPUs no more claimed than those it passed over.
        assert free <= set(cpus)
        overlapped = [before[cpu] for cpu in cpus if cpu not in free]
        passed_over = [count for cpu, count in before.items() if cpu not in cpus]
        assert not passed_over or max(overlapped) <= min(passed_over)
    return cpus


def run(allocator: CpuAllocator, plan: list[tuple[bool, int]]) -> list[tuple[int, ...]]:
    results = []
    for n, (release, size) in enumerate(plan):
        live = sorted(allocator.allocations())
        if release and live:
            results.append(allocator.release(live[size % len(live)]))
        else:
            claim = 1 + (size - 1) % allocator.limit
            results.append(check_allocation(allocator, f"job{n}", claim))
        held = Counter(cpu for cpus in allocator.allocations().values() for cpu in cpus)
        assert allocator.claims_per_cpu() == {cpu: held[cpu] for cpu in allocator.topology.allocatable()}
    return results


@settings(max_examples=300, deadline=None)
@given(topologies(), steps)
def test_allocations_are_exact_allocatable_and_exclusive_while_free(
    topology: Topology, plan: list[tuple[bool, int]]
) -> None:
    run(CpuAllocator(topology), plan)


@settings(max_examples=200, deadline=None)
@given(topologies(), steps, st.integers(1, 40))
def test_allocate_then_release_restores_the_claims(
    topology: Topology, plan: list[tuple[bool, int]], size: int
) -> None:
    allocator = CpuAllocator(topology)
    run(allocator, plan)
    before = (allocator.claims_per_cpu(), allocator.allocations())
    allocator.allocate("probe", 1 + (size - 1) % allocator.limit)
    allocator.release("probe")
    assert (allocator.claims_per_cpu(), allocator.allocations()) == before


@settings(max_examples=100, deadline=None)
@given(topologies(), steps)
def test_the_same_history_gives_the_same_placement(topology: Topology, plan: list[tuple[bool, int]]) -> None:
    assert run(CpuAllocator(topology), plan) == run(CpuAllocator(topology), plan)


@settings(max_examples=100, deadline=None)
@given(topologies(), steps)
def test_reregistering_live_sets_after_restart_reproduces_the_claims(
    topology: Topology, plan: list[tuple[bool, int]]
) -> None:
    before = CpuAllocator(topology)
    run(before, plan)
    after = CpuAllocator(topology)
    for job_id, cpus in before.allocations().items():
        after.register(job_id, cpus)
    assert after.claims_per_cpu() == before.claims_per_cpu()
    assert after.allocate("next", 1) == before.allocate("next", 1)
