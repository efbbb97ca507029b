"""A job with ``board: none`` in the queue: placed on a runner host with room for its vCPUs, holding no
device, in the same order as every other job (gate first, aged, rotating, background last)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kerrigan.core.dispatch_order import (
    BACKFILL_GRACE_S,
    DispatchPlan,
    QueuedJob,
    WaitKind,
    plan_dispatch,
)
from kerrigan.core.manifest import Priority

NOW = 10_000.0
HOSTS = {"d1": "lab-a-01", "d2": "lab-a-01", "d3": "lab-b-01"}


def boarded(
    job_id: str, *, candidates: Iterable[str] = ("d1",), vcpus: int = 2, waited: float = 1.0, **kw: object
) -> QueuedJob:
    return QueuedJob(
        job_id,
        str(kw.get("repository", "octo/a")),
        str(kw.get("session", f"s-{job_id}")),
        kw.get("priority", Priority.NORMAL),  # type: ignore[arg-type]
        NOW - waited,
        tuple(candidates),
        vcpus,
    )


def boardless(
    job_id: str, *, hosts: Iterable[str] = ("lab-a-01",), vcpus: int = 2, waited: float = 1.0, **kw: object
) -> QueuedJob:
    return QueuedJob(
        job_id,
        str(kw.get("repository", "octo/a")),
        str(kw.get("session", f"s-{job_id}")),
        kw.get("priority", Priority.NORMAL),  # type: ignore[arg-type]
        NOW - waited,
        (),
        vcpus,
        hosts=tuple(hosts),
        boardless=True,
    )


def plan(
    jobs: list[QueuedJob],
    free: Iterable[str] = (),
    *,
    host_room: Mapping[str, int] | None = None,
    room: Mapping[str, int] | None = None,
) -> DispatchPlan:
    return plan_dispatch(
        jobs,
        now=NOW,
        free_devices=free,
        session_room=room if room is not None else {job.session_id: 4 for job in jobs},
        last_dispatch={},
        device_hosts=HOSTS,
        host_room=host_room if host_room is not None else {"lab-a-01": 28, "lab-b-01": 28},
    )


def placed(result: DispatchPlan) -> list[tuple[str, str]]:
    return [(job.id, host) for job, host in result.placed]


def test_a_boardless_job_goes_to_a_runner_host_with_room_and_takes_no_device() -> None:
    result = plan([boardless("build", hosts=("lab-a-01", "lab-b-01"))], free=["d1", "d3"])
    assert placed(result) == [("build", "lab-a-01")]
    assert result.assignments == ()
    assert list(result.order) == ["build"]


def test_it_is_placed_when_no_device_is_free_and_behind_jobs_that_wait_for_one() -> None:
    jobs = [boarded(f"t{n}", waited=100.0 + n) for n in range(5)] + [boardless("build", waited=1.0)]
    result = plan(jobs, free=[])
    assert placed(result) == [("build", "lab-a-01")]
    assert {result.waiting[f"t{n}"].kind for n in range(5)} == {WaitKind.DEVICE}


def test_it_holds_no_device_so_its_sessions_max_devkits_does_not_hold_it_back() -> None:
    jobs = [boardless("build", session="s"), boarded("test", session="s")]
    result = plan(jobs, free=["d1"], room={"s": 1})
    assert placed(result) == [("build", "lab-a-01")]
    assert [(job.id, device) for job, device in result.assignments] == [("test", "d1")]


def test_the_host_with_the_most_room_left_is_chosen_and_one_not_reporting_last() -> None:
    hosts = ("lab-a-01", "lab-b-01", "lab-c-01")
    result = plan([boardless("build", hosts=hosts)], host_room={"lab-a-01": 4, "lab-b-01": 20})
    assert placed(result) == [("build", "lab-b-01")]
    only_unreported = plan(
        [boardless("build", hosts=hosts, vcpus=8)], host_room={"lab-a-01": 4, "lab-b-01": 6}
    )
    assert placed(only_unreported) == [("build", "lab-c-01")]


def test_its_vcpus_count_against_the_hosts_max_weight_like_any_job() -> None:
    jobs = [boardless("build", vcpus=6, waited=5.0), boarded("test", vcpus=4, waited=1.0)]
    result = plan(jobs, free=["d1"], host_room={"lab-a-01": 8})
    assert placed(result) == [("build", "lab-a-01")]
    assert result.assignments == ()
    assert result.waiting["test"].kind is WaitKind.CAPACITY


def test_a_gate_job_comes_first_whether_or_not_it_holds_a_board() -> None:
    older = boarded("test", vcpus=6, waited=500.0)
    gate = boardless("merge-build", vcpus=6, waited=1.0, priority=Priority.GATE, repository="octo/b")
    result = plan([older, gate], free=["d1"], host_room={"lab-a-01": 8})
    assert placed(result) == [("merge-build", "lab-a-01")]
    assert result.waiting["test"].kind is WaitKind.CAPACITY
    assert list(result.order) == ["merge-build", "test"]


def test_a_boardless_job_with_no_host_it_may_use_waits_on_a_host() -> None:
    result = plan([boardless("build", hosts=())])
    assert result.placed == ()
    assert result.waiting["build"].kind is WaitKind.HOST
    assert result.position("build") == 1


def test_a_boardless_job_blocked_for_vcpus_lets_smaller_jobs_by_in_its_grace() -> None:
    big = boardless("big", vcpus=8, waited=1.0)
    small = boardless("small", vcpus=2, waited=0.5, repository="octo/b")
    result = plan([big, small], host_room={"lab-a-01": 4})
    assert result.waiting["big"].kind is WaitKind.CAPACITY
    assert placed(result) == [("small", "lab-a-01")]


def test_past_its_grace_a_blocked_boardless_job_holds_the_host_with_the_most_room() -> None:
    big = boardless("big", hosts=("lab-a-01", "lab-b-01"), vcpus=8, waited=BACKFILL_GRACE_S + 1)
    small = boardless("small", hosts=("lab-a-01", "lab-b-01"), vcpus=2, waited=1.0, repository="octo/b")
    board = boarded("test", candidates=("d3",), vcpus=2, waited=0.5, repository="octo/c")
    result = plan([big, small, board], free=["d3"], host_room={"lab-a-01": 2, "lab-b-01": 4})
    assert result.waiting["big"].kind is WaitKind.CAPACITY
    # lab-b-01 (4 left) is held for it: neither job takes its room; lab-a-01 is not held.
    assert placed(result) == [("small", "lab-a-01")]
    assert result.assignments == ()
    assert result.waiting["test"].kind is WaitKind.FENCED
    assert result.waiting["test"].on == "big"


def test_a_host_held_for_a_blocked_boarded_job_takes_no_boardless_job() -> None:
    blocked = boarded("big", candidates=("d1",), vcpus=8, waited=BACKFILL_GRACE_S + 1)
    build = boardless("build", vcpus=2, waited=1.0, repository="octo/b")
    result = plan([blocked, build], free=["d1"], host_room={"lab-a-01": 4})
    assert result.waiting["big"].kind is WaitKind.CAPACITY
    assert result.placed == ()
    assert result.waiting["build"].kind is WaitKind.FENCED
    assert result.waiting["build"].on == "big"


def test_each_job_placed_leaves_less_room_for_the_next() -> None:
    jobs = [boardless(f"b{n}", vcpus=4, waited=10.0 - n, repository=f"octo/{n}") for n in range(4)]
    result = plan(jobs, host_room={"lab-a-01": 10})
    assert placed(result) == [("b0", "lab-a-01"), ("b1", "lab-a-01")]
    assert {result.waiting[f"b{n}"].kind for n in (2, 3)} == {WaitKind.CAPACITY}


def test_once_every_host_is_full_the_rest_wait_for_room_or_for_a_host() -> None:
    # One repository's line: once lab-a-01 has no room left the round ends, and the jobs it did not reach
    # are decided all at once, as those behind a busy device are.
    jobs = [boardless(f"b{n}", vcpus=4, waited=10.0 - n) for n in range(4)]
    jobs.append(boardless("nowhere", hosts=(), waited=1.0))
    result = plan(jobs, host_room={"lab-a-01": 8})
    assert placed(result) == [("b0", "lab-a-01"), ("b1", "lab-a-01")]
    assert {job: result.waiting[job].kind for job in ("b2", "b3", "nowhere")} == {
        "b2": WaitKind.CAPACITY,
        "b3": WaitKind.CAPACITY,
        "nowhere": WaitKind.HOST,
    }
    assert [result.position(job) for job in ("b2", "b3", "nowhere")] == [1, 2, 3]


def test_a_held_host_is_passed_over_for_the_next_with_room() -> None:
    blocked = boarded("big", candidates=("d1",), vcpus=8, waited=BACKFILL_GRACE_S + 1)
    builds = [
        boardless(f"b{n}", hosts=("lab-a-01", "lab-b-01"), waited=1.0 - n / 10, repository=f"octo/{n}")
        for n in range(3)
    ]
    result = plan([blocked, *builds], free=["d1"], host_room={"lab-a-01": 6, "lab-b-01": 4})
    # lab-a-01 is held for big (its device is free, its room too small): the builds go to lab-b-01 while
    # it has room, though lab-a-01 has more, then wait for room.
    assert placed(result) == [("b0", "lab-b-01"), ("b1", "lab-b-01")]
    assert result.waiting["b2"].kind is WaitKind.CAPACITY
