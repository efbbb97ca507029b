"""How much a runner host takes on at once (seed 003's "vCPU claims" and "Capacity" rules), without I/O."""

from __future__ import annotations

import pytest

from kerrigan.core.cpus import Cpu, CpuAllocator, Topology
from kerrigan.core.host_capacity import (
    DEFAULT_MAX_QUEUE_DEPTH,
    DEFAULT_MAX_WEIGHT,
    HostLimits,
    Refusal,
    admission_refusal,
    claim_of,
    startable,
)


def allocator(cores: int, threads: int = 2) -> CpuAllocator:
    """A fresh allocator on a host numbered as Linux numbers it: thread ``t`` of core ``c`` is CPU
    ``c + t * cores``."""
    cpus = [Cpu(core + thread * cores, 0, core) for core in range(cores) for thread in range(threads)]
    return CpuAllocator(Topology.from_cpus(cpus))


# Five cores with two threads: the first core (CPUs 0 and 5) is kept back, so eight CPUs are allocatable.
EIGHT_ALLOCATABLE = 8


def fresh_host() -> CpuAllocator:
    host = allocator(5)
    assert host.limit == EIGHT_ALLOCATABLE
    return host


@pytest.mark.parametrize(("weight_hint", "claim"), [(None, 2), (1, 1), (2, 2), (3, 3), (8, 8), (28, 28)])
def test_claims_are_exact_and_unsized_jobs_always_claim_two(weight_hint: int | None, claim: int) -> None:
    assert claim_of(weight_hint) == claim


def test_an_unsized_job_weighs_two_against_max_weight() -> None:
    # Two unsized jobs fill a max_weight of 4 exactly; a third waits.
    limits = HostLimits(max_weight=4)
    waiting = [(job, claim_of(None)) for job in ("a", "b", "c")]
    assert startable(waiting, running_weight=0, limits=limits) == ["a", "b"]


@pytest.mark.parametrize(
    ("claim", "named"),
    [
        pytest.param(0, "at least 1 vCPU", id="zero"),
        pytest.param(-1, "at least 1 vCPU", id="negative"),
        pytest.param(9, f"{EIGHT_ALLOCATABLE} allocatable", id="one-over"),
        pytest.param(64, f"{EIGHT_ALLOCATABLE} allocatable", id="far-over"),
    ],
)
def test_oversized_and_zero_claims_are_refused_before_start_with_limit_detail(claim: int, named: str) -> None:
    refusal = admission_refusal(claim, fresh_host(), accepted_waiting=0, limits=HostLimits())
    assert refusal is not None
    assert refusal.retry is False  # it never fits this host: offering it again cannot help
    assert named in refusal.detail
    assert f"claims {claim} vCPU" in refusal.detail


@pytest.mark.parametrize("claim", [1, 2, EIGHT_ALLOCATABLE])
def test_claims_from_one_to_the_allocatable_count_are_accepted(claim: int) -> None:
    assert admission_refusal(claim, fresh_host(), accepted_waiting=0, limits=HostLimits()) is None


def test_a_claim_that_never_fits_is_refused_for_good_even_when_the_queue_is_full() -> None:
    refusal = admission_refusal(
        EIGHT_ALLOCATABLE + 1, fresh_host(), accepted_waiting=DEFAULT_MAX_QUEUE_DEPTH, limits=HostLimits()
    )
    assert refusal is not None
    assert refusal.retry is False
    assert "allocatable" in refusal.detail


def test_oversized_refusal_does_not_depend_on_cpus_already_held() -> None:
    # Admission judges the host's size, not what running jobs hold: a full host still accepts a fitting claim.
    host = fresh_host()
    host.allocate("running", EIGHT_ALLOCATABLE)
    assert admission_refusal(EIGHT_ALLOCATABLE, host, accepted_waiting=0, limits=HostLimits()) is None


def test_a_claim_over_max_weight_that_fits_the_host_is_accepted() -> None:
    limits = HostLimits(max_weight=4)
    assert admission_refusal(6, fresh_host(), accepted_waiting=0, limits=limits) is None


def test_pinned_job_waits_until_its_exact_claim_fits_max_weight() -> None:
    limits = HostLimits(max_weight=8)
    # 4 of 8 running: the 6-vCPU job does not fit and waits; the 2-vCPU job behind it is not held up.
    assert startable([("big", 6), ("small", 2)], running_weight=4, limits=limits) == ["small"]
    # With the small job running too, the big one still waits, and is not squeezed in under its claim.
    assert startable([("big", 6)], running_weight=6, limits=limits) == []
    assert startable([("big", 6)], running_weight=3, limits=limits) == []
    # Once running weight drops to what leaves room for its exact claim, it starts.
    assert startable([("big", 6)], running_weight=2, limits=limits) == ["big"]
    assert startable([("big", 6)], running_weight=0, limits=limits) == ["big"]


def test_a_waiting_job_over_max_weight_does_not_block_later_arrivals() -> None:
    limits = HostLimits(max_weight=8)
    waiting = [("first", 1), ("too-big", 8), ("third", 3), ("fourth", 4)]
    assert startable(waiting, running_weight=0, limits=limits) == ["first", "third", "fourth"]


@pytest.mark.parametrize(
    ("waiting", "chosen"),
    [
        pytest.param([("a", 4), ("b", 4), ("c", 2), ("d", 1)], ["a", "b"], id="full-after-two"),
        pytest.param([("a", 3), ("b", 3), ("c", 3), ("d", 2)], ["a", "b", "d"], id="skip-then-fill"),
        pytest.param([("a", 2), ("b", 2), ("c", 2), ("d", 2), ("e", 2)], ["a", "b", "c", "d"], id="twos"),
    ],
)
def test_dispatch_indexes_add_each_starting_weight_and_cpu_claim_before_selecting_next(
    waiting: list[tuple[str, int]], chosen: list[str]
) -> None:
    limits = HostLimits(max_weight=8)
    started = startable(waiting, running_weight=0, limits=limits)
    assert started == chosen
    claims = dict(waiting)
    assert sum(claims[job] for job in started) <= limits.max_weight
    # Each chosen start takes its CPUs before the next is placed, so while the host has free CPUs the
    # starting jobs never share one.
    host = fresh_host()
    placed = [set(host.allocate(job, claims[job])) for job in started]
    assert sum(len(cpus) for cpus in placed) == len(set().union(*placed))


def test_running_weight_counts_against_the_jobs_chosen_now() -> None:
    limits = HostLimits(max_weight=8)
    assert startable([("a", 2), ("b", 2)], running_weight=7, limits=limits) == []
    assert startable([("a", 2), ("b", 2), ("c", 1)], running_weight=7, limits=limits) == ["c"]
    assert startable([("a", 2), ("b", 2), ("c", 1)], running_weight=5, limits=limits) == ["a", "c"]


def test_nothing_starts_while_running_weight_is_over_a_lowered_max_weight() -> None:
    # After a restart with a smaller --max-weight the recorded running jobs may exceed it.
    assert startable([("a", 1)], running_weight=12, limits=HostLimits(max_weight=8)) == []


def test_startable_keeps_arrival_order() -> None:
    waiting = [("3", 1), ("1", 1), ("2", 1)]
    assert startable(waiting, running_weight=0, limits=HostLimits()) == ["3", "1", "2"]


def test_queue_depth_counts_sixty_four_awaiting_bundles() -> None:
    limits = HostLimits()
    assert limits.max_queue_depth == 64
    assert admission_refusal(2, fresh_host(), accepted_waiting=63, limits=limits) is None
    refusal = admission_refusal(2, fresh_host(), accepted_waiting=64, limits=limits)
    assert refusal == Refusal(
        "max_queue_depth: 64 jobs are accepted and not yet running (limit 64)", retry=True
    )


def test_queue_depth_follows_its_setting() -> None:
    limits = HostLimits(max_queue_depth=3)
    assert admission_refusal(1, fresh_host(), accepted_waiting=2, limits=limits) is None
    refusal = admission_refusal(1, fresh_host(), accepted_waiting=3, limits=limits)
    assert refusal is not None
    assert refusal.retry is True
    assert "max_queue_depth" in refusal.detail
    assert "limit 3" in refusal.detail


def test_limits_default_to_twenty_eight_vcpus_and_sixty_four_waiting_jobs() -> None:
    assert HostLimits() == HostLimits(max_weight=28, max_queue_depth=64)
    assert (DEFAULT_MAX_WEIGHT, DEFAULT_MAX_QUEUE_DEPTH) == (28, 64)


@pytest.mark.parametrize(
    ("settings", "named"),
    [({"max_weight": 0}, "max_weight"), ({"max_queue_depth": 0}, "max_queue_depth")],
)
def test_limits_below_one_are_rejected(settings: dict[str, int], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        HostLimits(**settings)
