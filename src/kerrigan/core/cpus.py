"""A runner host's CPU topology and the allocator that gives each job specific logical CPUs.

Seed 003's rules. The topology is the host's online CPUs grouped into physical cores (hyperthread siblings).
On a host with at least four physical cores the first core, with all its siblings, is kept for the runner and
the system; smaller hosts keep nothing back.

A job claims an exact number of vCPUs. A claim of 0, or more than the host's allocatable CPUs, is refused
with ``runner_full``. Placement takes free CPUs first: whole free cores, and the part of a claim that does not
fill a whole core (the odd thread of an odd claim on a two-thread host) goes to a core that is already split,
so a fresh core is split only when no split core has room. When whole cores run out, free threads of split
cores come next. Only when no free CPU is left does a claim overlap the least-claimed CPUs, so CPU sets are
exclusive only while the host has free CPUs. Running jobs are never moved. Every tie goes to the lowest CPU
ids, so the same history always gives the same placement.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

# Below this many physical cores, keeping one back would cost a job too large a share of the host.
MIN_CORES_TO_RESERVE: Final = 4

_CPU_LIST_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """The CPU ids of a kernel CPU list such as ``0-3,8,10-11``, in ascending order.

    The kernel writes ranges in ascending order without overlaps and an empty line for an empty set; anything
    else (a reversed or overlapping range, a stray comma, a sign) raises ``ValueError`` naming the list.
    """
    stripped = text.strip()
    if not stripped:
        return ()
    ids: list[int] = []
    for item in stripped.split(","):
        match = _CPU_LIST_ITEM.fullmatch(item)
        if match is None:
            raise ValueError(f"malformed CPU list {text!r}: {item!r} is not a CPU id or a range of them")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last < first:
            raise ValueError(f"malformed CPU list {text!r}: the range {item!r} runs backwards")
        if ids and first <= ids[-1]:
            raise ValueError(f"malformed CPU list {text!r}: {item!r} is not above the CPUs before it")
        ids.extend(range(first, last + 1))
    return tuple(ids)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's list form of a set of CPU ids (``0-3,8``), as ``AllowedCPUs=`` takes it."""
    ranges: list[str] = []
    ordered = sorted(set(cpus))
    start = 0
    for index, cpu in enumerate(ordered):
        if index + 1 < len(ordered) and ordered[index + 1] == cpu + 1:
            continue
        first = ordered[start]
        ranges.append(str(first) if first == cpu else f"{first}-{cpu}")
        start = index + 1
    return ",".join(ranges)


@dataclass(frozen=True, slots=True)
class Cpu:
    """One online logical CPU: its kernel id, its physical package (socket) and its core id there."""

    id: int
    package: int
    core: int


@dataclass(frozen=True, slots=True)
class Topology:
    """A host's online CPUs and their sibling groups (the logical CPUs sharing one physical core).

    Both are kept in ascending order of CPU id, each group by its lowest CPU; the groups partition the CPUs.
    """

    cpus: tuple[Cpu, ...]
    sibling_groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        cpus = tuple(sorted(self.cpus, key=lambda cpu: cpu.id))
        groups = tuple(sorted((tuple(sorted(group)) for group in self.sibling_groups), key=lambda g: g[0:1]))
        ids = [cpu.id for cpu in cpus]
        if not ids:
            raise ValueError("a topology needs at least one online CPU")
        if len(set(ids)) != len(ids):
            raise ValueError(f"a topology lists a CPU twice: {ids}")
        grouped = [cpu for group in groups for cpu in group]
        if any(not group for group in groups) or sorted(grouped) != ids:
            raise ValueError(
                f"sibling groups {groups} do not partition the online CPUs {format_cpu_list(ids)}"
            )
        # Normalised once here so every caller can rely on the order.
        object.__setattr__(self, "cpus", cpus)
        object.__setattr__(self, "sibling_groups", groups)

    @classmethod
    def from_cpus(cls, cpus: Iterable[Cpu]) -> Topology:
        """The topology in which CPUs with the same package and core id are siblings."""
        cpus = tuple(cpus)
        cores: defaultdict[tuple[int, int], list[int]] = defaultdict(list)
        for cpu in cpus:
            cores[cpu.package, cpu.core].append(cpu.id)
        return cls(cpus, tuple(tuple(group) for group in cores.values()))

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        """Every online CPU id, ascending."""
        return tuple(cpu.id for cpu in self.cpus)

    @property
    def physical_cores(self) -> int:
        """How many physical cores have at least one online CPU."""
        return len(self.sibling_groups)

    def reserved(self) -> tuple[int, ...]:
        """The CPUs kept for the runner and the system, on hosts of four or more physical cores.

        That is the first core with all its siblings: the core of CPU 0, or of the lowest online CPU when
        CPU 0 is offline.
        """
        if self.physical_cores < MIN_CORES_TO_RESERVE:
            return ()
        return self.sibling_groups[0]

    def allocatable(self) -> tuple[int, ...]:
        """The CPUs jobs may be given, ascending."""
        reserved = set(self.reserved())
        return tuple(cpu for cpu in self.cpu_ids if cpu not in reserved)

    def allocatable_groups(self) -> tuple[tuple[int, ...], ...]:
        """The sibling groups of the allocatable CPUs, each group by its lowest CPU."""
        reserved = self.reserved()
        return tuple(group for group in self.sibling_groups if group != reserved)


class ClaimRefused(Exception):  # noqa: N818 -- the runner protocol's word: a refusal, not a fault
    """A claim this host can never run, refused before start with a reason and a detail naming the limit."""

    reason: Literal["runner_full"] = "runner_full"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"{self.reason}: {self.detail}"


def _vcpus(count: int) -> str:
    return f"{count} vCPU" if count == 1 else f"{count} vCPUs"


class CpuAllocator:
    """Which allocatable CPUs each live job holds, and where the next claim goes."""

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._groups = topology.allocatable_groups()
        self._claims: dict[int, int] = dict.fromkeys(topology.allocatable(), 0)
        self._jobs: dict[str, tuple[int, ...]] = {}

    @property
    def limit(self) -> int:
        """The largest claim this host accepts: its allocatable CPU count."""
        return len(self._claims)

    def check_claim(self, claim: int) -> None:
        """Raise ``ClaimRefused`` for a claim this host can never run: under one vCPU or over the limit."""
        if claim < 1:
            raise ClaimRefused(f"claims {_vcpus(claim)}; a job claims at least 1 vCPU")
        if claim > self.limit:
            raise ClaimRefused(f"claims {_vcpus(claim)}; this host has {self.limit} allocatable")

    def allocate(self, job_id: str, claim: int) -> tuple[int, ...]:
        """Give ``job_id`` exactly ``claim`` distinct CPUs and return them, ascending."""
        self.check_claim(claim)
        if job_id in self._jobs:
            raise ValueError(f"job {job_id} already holds CPUs {format_cpu_list(self._jobs[job_id])}")
        chosen = self._place_on_free_cpus(claim)
        if len(chosen) < claim:
            # No free CPU is left: share the CPUs the fewest jobs hold.
            taken = set(chosen)
            others = sorted((cpu for cpu in self._claims if cpu not in taken), key=self._load)
            chosen += others[: claim - len(chosen)]
        cpus = tuple(sorted(chosen))
        self._hold(job_id, cpus)
        return cpus

    def register(self, job_id: str, cpus: Iterable[int]) -> None:
        """Record that ``job_id`` still holds ``cpus``, as its job record says after a runner restart."""
        recorded = tuple(sorted(cpus))
        if job_id in self._jobs:
            raise ValueError(f"job {job_id} already holds CPUs {format_cpu_list(self._jobs[job_id])}")
        if not recorded:
            raise ValueError(f"job {job_id} has no recorded CPUs")
        if len(set(recorded)) != len(recorded):
            raise ValueError(f"job {job_id} records a CPU twice: {recorded}")
        outside = [cpu for cpu in recorded if cpu not in self._claims]
        if outside:
            raise ValueError(
                f"job {job_id} records CPUs {format_cpu_list(outside)} that are not allocatable on this host "
                f"({format_cpu_list(self._claims)})"
            )
        self._hold(job_id, recorded)

    def release(self, job_id: str) -> tuple[int, ...]:
        """Free the CPUs ``job_id`` held and return them; a job that holds none gives back nothing."""
        cpus = self._jobs.pop(job_id, ())
        for cpu in cpus:
            self._claims[cpu] -= 1
        return cpus

    def claims_per_cpu(self) -> dict[int, int]:
        """How many live jobs hold each allocatable CPU (0 for a free one), by CPU id."""
        return dict(self._claims)

    def allocations(self) -> Mapping[str, tuple[int, ...]]:
        """The CPUs each live job holds."""
        return dict(self._jobs)

    def _load(self, cpu: int) -> tuple[int, int]:
        return self._claims[cpu], cpu

    def _hold(self, job_id: str, cpus: tuple[int, ...]) -> None:
        self._jobs[job_id] = cpus
        for cpu in cpus:
            self._claims[cpu] += 1

    def _place_on_free_cpus(self, claim: int) -> list[int]:
        """Up to ``claim`` free CPUs, a core at a time: whole cores first, the rest into split cores."""
        free = [[cpu for cpu in group if self._claims[cpu] == 0] for group in self._groups]
        split = [0 < len(free[index]) < len(group) for index, group in enumerate(self._groups)]
        chosen: list[int] = []
        while len(chosen) < claim:
            remaining = claim - len(chosen)
            ranked = [
                (_preference(cpus, split[index], remaining), index) for index, cpus in enumerate(free) if cpus
            ]
            if not ranked:
                break
            _, best = min(ranked)
            chosen += free[best][:remaining]
            free[best] = free[best][remaining:]
        return chosen


def _preference(free: list[int], split: bool, remaining: int) -> tuple[int, int, bool, int]:
    """How well taking from a core with these ``free`` threads suits a claim that still needs ``remaining``.

    Lower is better. ``split`` says whether other jobs already hold some of the core's threads.
    """
    if len(free) <= remaining:
        # Takes every free thread of the core, so the job leaves no free thread beside it. The largest such
        # core first keeps whole cores whole; a split core goes before a whole one of the same size.
        return 0, -len(free), not split, free[0]
    # Takes only part of the core: the one with the fewest free threads, a split core before a whole one, so
    # a fresh core is split only when no split core has room.
    return 1, len(free), not split, free[0]


def topology_report(topology: Topology, claims: Iterable[int] = ()) -> dict[str, object]:
    """What ``kerrigan runner topology`` prints: the topology, and the CPUs each claim gets, in order.

    Claims are placed one after another on a fresh allocator, as if each job still runs when the next
    starts; a claim the host refuses says why instead of a CPU set.
    """
    allocator = CpuAllocator(topology)
    placements: list[dict[str, object]] = []
    for index, claim in enumerate(claims):
        try:
            cpus = allocator.allocate(f"claim-{index}", claim)
        except ClaimRefused as refused:
            placements.append({"claim": claim, "refused": refused.reason, "detail": refused.detail})
            continue
        placements.append({"claim": claim, "cpus": format_cpu_list(cpus)})
    return {
        "online": format_cpu_list(topology.cpu_ids),
        "physical_cores": topology.physical_cores,
        "sibling_groups": [format_cpu_list(group) for group in topology.sibling_groups],
        "reserved": format_cpu_list(topology.reserved()),
        "allocatable": format_cpu_list(topology.allocatable()),
        "claims": placements,
    }


def render_topology_report(report: Mapping[str, object]) -> str:
    """The report as text an operator reads."""
    groups = report["sibling_groups"]
    assert isinstance(groups, list)
    lines = [
        f"online CPUs:     {report['online']}",
        f"physical cores:  {report['physical_cores']}",
        f"sibling groups:  {' '.join(groups)}",
        f"reserved:        {report['reserved'] or 'none (fewer than 4 physical cores)'}",
        f"allocatable:     {report['allocatable']}",
    ]
    claims = report["claims"]
    assert isinstance(claims, list)
    for placement in claims:
        if "cpus" in placement:
            lines.append(f"claim {placement['claim']:>3} vCPUs -> CPUs {placement['cpus']}")
        else:
            refusal = f"refused {placement['refused']}: {placement['detail']}"
            lines.append(f"claim {placement['claim']:>3} vCPUs -> {refusal}")
    return "\n".join(lines) + "\n"
