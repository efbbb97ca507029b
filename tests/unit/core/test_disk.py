"""Disk admission, LRU workspace eviction and retention on a runner host (seed 003)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerrigan.core.disk import (
    GIB,
    AdmissionPlan,
    DiskFull,
    DiskPolicy,
    Workspace,
    WorkspaceKind,
    job_history_expired,
    plan_admission,
    workspace_expired,
)
from kerrigan.core.unpacking import UnpackLimits

NOW = 100_000.0
MINUTE = 60.0
HOUR = 60 * MINUTE
# A 10 GiB floor keeps the arithmetic readable: the soft goal is 20 GiB.
POLICY = DiskPolicy(floor_bytes=10 * GIB)


def ws(
    name: str,
    gib: float,
    minutes_ago: float,
    *,
    running: bool = False,
    reserved: bool = False,
    kind: WorkspaceKind = WorkspaceKind.TASK,
) -> Workspace:
    return Workspace(
        name=name,
        size_bytes=int(gib * GIB),
        last_used_s=NOW - minutes_ago * MINUTE,
        running=running,
        reserved=reserved,
        kind=kind,
    )


def plan(free_gib: float, *workspaces: Workspace, protected: frozenset[str] = frozenset()) -> AdmissionPlan:
    return plan_admission(int(free_gib * GIB), workspaces, POLICY, NOW, protected)


def test_default_policy_is_an_8_gib_floor_a_soft_goal_of_twice_that_and_30_minutes_idle() -> None:
    policy = DiskPolicy()
    assert policy.floor_bytes == 8 * GIB
    assert policy.soft_goal_bytes == 16 * GIB
    assert policy.idle_s == 30 * 60


@pytest.mark.parametrize("free_gib", [20, 40, 76])
def test_a_64_gb_runner_host_takes_jobs_with_the_default_floor_evicting_nothing(free_gib: int) -> None:
    # Seed 003's 128 GiB floor was a build machine's: it refused every job on a host with 76 GiB free.
    workspace = ws("old", 2, minutes_ago=120)
    admission = plan_admission(free_gib * GIB, [workspace], DiskPolicy(), NOW)
    assert admission.admitted
    assert admission.evict == ()


def test_the_default_floor_holds_twice_the_largest_repository_the_agent_unpacks() -> None:
    assert DiskPolicy().floor_bytes >= 2 * UnpackLimits().max_bytes


def test_free_space_under_the_floor_is_said_with_both_figures_and_what_follows() -> None:
    policy = DiskPolicy(floor_bytes=8 * GIB)
    assert policy.shortfall(7 * GIB + GIB // 2) == (
        "free disk 7.5 GiB is under the floor of 8.0 GiB (--free-space-floor-bytes): every job is refused "
        "runner_disk_full until space is freed or the floor lowered"
    )
    assert policy.shortfall(8 * GIB) is None
    assert DiskPolicy(floor_bytes=0).shortfall(0) is None


@pytest.mark.parametrize(("floor_bytes", "idle_s"), [(-1, 0.0), (0, -1.0)])
def test_disk_policy_rejects_negative_settings(floor_bytes: int, idle_s: float) -> None:
    with pytest.raises(ValueError, match="must be 0 or more"):
        DiskPolicy(floor_bytes=floor_bytes, idle_s=idle_s)


def test_disk_soft_cleanup_evicts_lru_before_the_hard_floor() -> None:
    result = plan(15, ws("newer", 3, 40), ws("oldest", 3, 120), ws("older", 3, 60))
    assert result.evicted_names == ("oldest", "older")
    assert result.free_bytes == 21 * GIB
    assert result.admitted


def test_disk_soft_pressure_evicts_only_candidates_used_over_30_minutes_ago() -> None:
    result = plan(15, ws("recent", 10, 29), ws("idle", 1, 31), ws("just-idle", 1, 30))
    assert result.evicted_names == ("idle", "just-idle")
    # Above the floor, recently used workspaces stay even though the soft goal is not reached.
    assert result.free_bytes == 17 * GIB
    assert result.admitted


def test_disk_hard_pressure_evicts_recent_candidates_in_lru_order_until_soft_goal() -> None:
    result = plan(
        5,
        ws("r3", 5, 1),
        ws("r1", 5, 20),
        ws("idle", 2, 60),
        ws("r2", 8, 10),
    )
    # Idle first, then recent ones oldest first; past the floor (12 GiB after r1) it goes on to the goal.
    assert result.evicted_names == ("idle", "r1", "r2")
    assert result.free_bytes == 20 * GIB
    assert result.admitted


@pytest.mark.parametrize("free_gib", [20, 25])
def test_disk_soft_cleanup_does_nothing_at_twice_the_floor(free_gib: float) -> None:
    result = plan(free_gib, ws("idle", 5, 600))
    assert result == AdmissionPlan(evict=(), free_bytes=int(free_gib * GIB))
    assert result.admitted


def test_disk_soft_cleanup_stops_as_soon_as_the_soft_goal_is_reached() -> None:
    result = plan(19, ws("a", 1, 90), ws("b", 1, 60))
    assert result.evicted_names == ("a",)


def test_disk_admission_refuses_typed_when_reflinks_reclaim_too_little() -> None:
    # Kerrigan's workspaces are plain copies (no reflinks): eviction is what reclaims, and too little is
    # refused runner_disk_full with the bytes.
    result = plan(2, ws("idle", 1, 90), ws("recent", 2, 5))
    assert result.evicted_names == ("idle", "recent")
    assert not result.admitted
    assert result.refusal == DiskFull(free_bytes=5 * GIB, floor_bytes=10 * GIB)
    assert result.refusal.reason == "runner_disk_full"


def test_disk_admission_admits_above_the_floor_with_nothing_to_evict() -> None:
    result = plan(12, ws("recent", 5, 1))
    assert result.evict == ()
    assert result.admitted


def test_disk_eviction_skips_reserved_and_running_workspaces() -> None:
    result = plan(
        5,
        ws("running", 50, 600, running=True),
        ws("reserved", 50, 600, reserved=True),
        ws("free", 1, 60),
    )
    assert result.evicted_names == ("free",)
    assert result.refusal == DiskFull(free_bytes=6 * GIB, floor_bytes=10 * GIB)


def test_disk_admission_preserves_incoming_ordinary_workspace_and_sibling() -> None:
    result = plan(
        5,
        ws("firmware", 50, 600),
        ws("firmware-sibling", 50, 600),
        ws("other", 20, 5),
        protected=frozenset({"firmware", "firmware-sibling"}),
    )
    assert result.evicted_names == ("other",)
    assert result.admitted


@pytest.mark.parametrize("free_bytes", [0, GIB])
def test_zero_floor_disables_admission(free_bytes: int) -> None:
    result = plan_admission(free_bytes, [ws("idle", 5, 600)], DiskPolicy(floor_bytes=0), NOW, frozenset())
    assert result == AdmissionPlan(evict=(), free_bytes=free_bytes)
    assert result.admitted


def test_head_workspace_is_lru_evictable_outside_task_roots() -> None:
    # A head workspace survives idle expiry, but under disk pressure it is evicted like any other, in LRU
    # order (Kerrigan has one workspace root, so "outside task roots" is: not only task workspaces).
    result = plan(12, ws("head", 5, 90, kind=WorkspaceKind.HEAD), ws("task", 5, 60))
    assert result.evicted_names == ("head", "task")


def test_eviction_ties_on_last_use_go_by_name() -> None:
    result = plan(5, ws("b", 1, 60), ws("a", 1, 60))
    assert result.evicted_names == ("a", "b")


def test_head_workspace_survives_idle_expiry_and_task_defaults_expire() -> None:
    task = ws("task", 1, 24 * 60)
    head = ws("head", 1, 24 * 60, kind=WorkspaceKind.HEAD)
    assert Workspace("default", 0, 0.0).kind is WorkspaceKind.TASK
    assert workspace_expired(task, NOW)
    assert not workspace_expired(head, NOW)
    assert not workspace_expired(ws("task", 1, 24 * 60 - 1), NOW)


@pytest.mark.parametrize("flag", ["running", "reserved"])
def test_task_workspace_in_use_does_not_expire(flag: str) -> None:
    workspace = replace(ws("task", 1, 48 * 60), **{flag: True})
    assert not workspace_expired(workspace, NOW)


@pytest.mark.parametrize(
    ("ended_hours_ago", "id_hours_ago", "expired"),
    [
        (25, 26, True),  # both older than a day
        (23, 26, False),  # ended within the day
        (26, 23, False),  # the id's time is later than the recorded end: it counts
        (24, 30, True),  # exactly 24 hours after the later of the two
    ],
)
def test_job_history_is_kept_24_hours_from_the_later_of_end_and_id_time(
    ended_hours_ago: float, id_hours_ago: float, expired: bool
) -> None:
    ended_s = NOW - ended_hours_ago * HOUR
    id_time_s = NOW - id_hours_ago * HOUR
    assert job_history_expired(ended_s, id_time_s, NOW) is expired


def test_history_of_a_job_that_has_not_ended_is_kept() -> None:
    assert not job_history_expired(None, NOW - 48 * HOUR, NOW)


# Properties, on a floor of 1,000 bytes so sizes stay small.
SMALL = DiskPolicy(floor_bytes=1_000, idle_s=1_800)

workspace_lists = st.lists(
    st.builds(
        Workspace,
        name=st.text(alphabet="abcdef", min_size=1, max_size=3),
        size_bytes=st.integers(0, 1_500),
        last_used_s=st.floats(NOW - 7_200, NOW, allow_nan=False),
        running=st.booleans(),
        reserved=st.booleans(),
        kind=st.sampled_from(WorkspaceKind),
    ),
    max_size=12,
    unique_by=lambda workspace: workspace.name,
)


@st.composite
def admissions(draw: st.DrawFn) -> tuple[int, list[Workspace], frozenset[str], AdmissionPlan]:
    free = draw(st.integers(0, 2_500))
    workspaces = draw(workspace_lists)
    protected = frozenset(draw(st.sets(st.text(alphabet="abcdef", min_size=1, max_size=3), max_size=4)))
    return free, workspaces, protected, plan_admission(free, workspaces, SMALL, NOW, protected)


@settings(max_examples=200)
@given(admissions())
def test_never_evicts_a_protected_running_or_reserved_workspace(
    case: tuple[int, list[Workspace], frozenset[str], AdmissionPlan],
) -> None:
    _, _, protected, result = case
    for workspace in result.evict:
        assert not workspace.running
        assert not workspace.reserved
        assert workspace.name not in protected


@settings(max_examples=200)
@given(admissions())
def test_evicts_idle_before_recent_and_in_lru_order_within_each_tier(
    case: tuple[int, list[Workspace], frozenset[str], AdmissionPlan],
) -> None:
    free, _, _, result = case
    idle = [w for w in result.evict if NOW - w.last_used_s >= SMALL.idle_s]
    recent = [w for w in result.evict if NOW - w.last_used_s < SMALL.idle_s]
    assert list(result.evict) == idle + recent
    for tier in (idle, recent):
        assert [w.last_used_s for w in tier] == sorted(w.last_used_s for w in tier)
    if recent:
        assert free < SMALL.floor_bytes


@settings(max_examples=200)
@given(admissions())
def test_an_admitted_plan_leaves_at_least_the_floor_and_a_refused_one_less(
    case: tuple[int, list[Workspace], frozenset[str], AdmissionPlan],
) -> None:
    free, _, _, result = case
    assert result.free_bytes == free + sum(w.size_bytes for w in result.evict)
    if result.admitted:
        assert result.free_bytes >= SMALL.floor_bytes
    else:
        assert result.refusal == DiskFull(free_bytes=result.free_bytes, floor_bytes=SMALL.floor_bytes)
        assert result.free_bytes < SMALL.floor_bytes


@settings(max_examples=200)
@given(admissions())
def test_eviction_stops_once_the_soft_goal_is_reached(
    case: tuple[int, list[Workspace], frozenset[str], AdmissionPlan],
) -> None:
    free, _, _, result = case
    if result.evict:
        before_last = free + sum(w.size_bytes for w in result.evict[:-1])
        assert before_last < SMALL.soft_goal_bytes


@settings(max_examples=200)
@given(admissions())
def test_refused_only_when_every_allowed_candidate_is_already_evicted(
    case: tuple[int, list[Workspace], frozenset[str], AdmissionPlan],
) -> None:
    _, workspaces, protected, result = case
    if not result.admitted:
        allowed = {w.name for w in workspaces if not (w.running or w.reserved or w.name in protected)}
        assert set(result.evicted_names) == allowed
