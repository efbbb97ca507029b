"""How much a runner host takes on at once (seed 003's capacity rules), decided without I/O.

``max_weight`` (default 28) bounds the vCPU claims of running jobs and of jobs being started; each start
counts as soon as it is chosen. ``max_queue_depth`` (default 64) bounds jobs accepted but not yet running; an
offer beyond it is refused ``runner_full`` before anything is recorded. A claim that fits the host but not
the weight left waits until it fits, and does not stop smaller jobs behind it from starting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from kerrigan.core.cpus import ClaimRefused, CpuAllocator

DEFAULT_MAX_WEIGHT: Final = 28
DEFAULT_MAX_QUEUE_DEPTH: Final = 64
DEFAULT_CLAIM: Final = 2  # a job without a weight hint claims two vCPUs


@dataclass(frozen=True, slots=True)
class HostLimits:
    """A runner host's capacity settings."""

    max_weight: int = DEFAULT_MAX_WEIGHT
    max_queue_depth: int = DEFAULT_MAX_QUEUE_DEPTH

    def __post_init__(self) -> None:
        if self.max_weight < 1:
            raise ValueError(f"max_weight must be 1 or more, got {self.max_weight}")
        if self.max_queue_depth < 1:
            raise ValueError(f"max_queue_depth must be 1 or more, got {self.max_queue_depth}")


def claim_of(vcpus: int | None) -> int:
    """A job's exact claim: its weight hint, or two without one. Nothing else (``-j``, env) changes it."""
    return DEFAULT_CLAIM if vcpus is None else vcpus


@dataclass(frozen=True, slots=True)
class Refusal:
    """A ``runner_full`` refusal: a detail naming the limit, and whether the job may be offered again
    (``retry``: the host is busy now) or never fits this host."""

    detail: str
    retry: bool


def admission_refusal(
    claim: int, allocator: CpuAllocator, accepted_waiting: int, limits: HostLimits
) -> Refusal | None:
    """Why an offer must be refused ``runner_full``, or ``None`` to accept it."""
    try:
        allocator.check_claim(claim)
    except ClaimRefused as refused:
        return Refusal(refused.detail, retry=False)
    if accepted_waiting >= limits.max_queue_depth:
        return Refusal(
            f"max_queue_depth: {accepted_waiting} jobs are accepted and not yet running "
            f"(limit {limits.max_queue_depth})",
            retry=True,
        )
    return None


def startable(waiting: Iterable[tuple[str, int]], running_weight: int, limits: HostLimits) -> list[str]:
    """Which waiting jobs (id, claim; in arrival order) start now: each that fits the weight left, in order.

    Each chosen job's claim counts before the next is considered; one that does not fit is passed over,
    not waited for, so it never blocks smaller jobs behind it.
    """
    chosen: list[str] = []
    weight = running_weight
    for job_id, claim in waiting:
        if weight + claim <= limits.max_weight:
            chosen.append(job_id)
            weight += claim
    return chosen
