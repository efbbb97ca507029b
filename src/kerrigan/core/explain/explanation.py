"""A workflow explained against an inventory: every task of a valid manifest resolved, devices chosen for the
session, and what ``kerrigan explain`` exits with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kerrigan.core.gang_explain import GangVerdict, explain_gang
from kerrigan.core.inventory import Device, Inventory
from kerrigan.core.manifest import ManifestResult, Task
from kerrigan.core.matching import (
    HostResolution,
    Outcome,
    TaskResolution,
    resolve,
    resolve_hosts,
)
from kerrigan.core.requirements import Requirements
from kerrigan.core.selection import select_devices
from kerrigan.core.yamlsource import Problem

EXIT_OK = 0
EXIT_UNMATCHED = 1
EXIT_INVALID = 2


EXIT_CODE_HEADER: Final = "Kerrigan-Exit-Code"
"""The header that carries what ``kerrigan explain`` exits with, beside the API's text answer."""


@dataclass(frozen=True, slots=True)
class TaskExplanation:
    """One task, how it resolved, and the device chosen for it.

    A gang task (``devices``) has its ``gang`` verdict, each role resolved; its ``resolution`` and
    ``selected`` are then those of the role that holds it back most (:attr:`GangVerdict.bottleneck`).
    A task with ``board: none`` has its runner ``hosts`` resolved instead; its ``resolution`` considers no
    device and it selects none.
    """

    task: Task
    resolution: TaskResolution
    selected: Device | None
    gang: GangVerdict | None = None
    hosts: HostResolution | None = None

    @property
    def outcome(self) -> Outcome:
        """The task's outcome: its resolution's, or for a gang its verdict's, or its hosts'."""
        if self.hosts is not None:
            return self.hosts.outcome
        return self.gang.outcome if self.gang is not None else self.resolution.outcome

    @property
    def selected_host(self) -> str | None:
        """The runner host a task with ``board: none`` would run on now: the first eligible one."""
        return self.hosts.eligible[0] if self.hosts is not None and self.hosts.eligible else None

    def resolutions(self) -> tuple[tuple[str | None, TaskResolution], ...]:
        """(role, resolution) of each role of a gang, or (None, the task's resolution); none for a task
        that holds no device."""
        if self.hosts is not None:
            return ()
        if self.gang is None:
            return ((None, self.resolution),)
        return tuple((role.role, role.resolution) for role in self.gang.roles)

    def summary(self) -> str:
        """One line: ``0/12 devices available: ...``, each role's for a gang, or the runner hosts' for a
        task with ``board: none``."""
        if self.hosts is not None:
            return self.hosts.summary()
        return self.gang.summary() if self.gang is not None else self.resolution.summary()

    def requirements_record(self) -> dict[str, object]:
        """The requirements its jobs are dispatched by, as stored: ``{"labels", "tags"}`` and, for a gang,
        ``roles``: ``[{"role", "labels", "tags"}, ...]`` in the order written. A boardless task's are its
        runner hosts' (``kerrigan.host``, or nothing); its job says it holds no device."""
        record: dict[str, object] = dict(self.resolution.requested.as_dict())
        if self.task.devices:
            record = dict(self.task.requirements.as_dict())
            record["roles"] = [
                {"role": role.name, **role.requirements.as_dict()} for role in self.task.devices
            ]
        return record


@dataclass(frozen=True, slots=True)
class Explanation:
    """A whole manifest explained: its problems, and every task's resolution when it is valid."""

    manifest: ManifestResult
    tasks: tuple[TaskExplanation, ...]
    extra_errors: tuple[Problem, ...] = ()
    repository: str | None = None
    unchecked_pools: tuple[str, ...] = ()  # pools whose repositories were not applied: no repository given

    @property
    def errors(self) -> tuple[Problem, ...]:
        """The manifest's errors and any others (an invalid inventory file)."""
        return self.extra_errors + self.manifest.errors

    @property
    def exit_code(self) -> int:
        """0 when every task has an eligible device, 1 when some task has none, 2 on invalid input."""
        if self.errors:
            return EXIT_INVALID
        # A gang's resolution is its scarcest role's: no device there is none for the gang. A task that
        # holds no device needs an eligible runner host.
        if any(
            t.outcome is not Outcome.ELIGIBLE or (t.hosts is None and not t.resolution.eligible)
            for t in self.tasks
        ):
            return EXIT_UNMATCHED
        return EXIT_OK


def explain(
    manifest: ManifestResult,
    inventory: Inventory,
    busy: frozenset[str] = frozenset(),
    *,
    repository: str | None = None,
    check_vcpus: bool = False,
) -> Explanation:
    """Resolve every task of a valid manifest and choose devices for the session of ``repository``
    (``owner/name``; ``None`` applies no pool's ``repositories``, and the explanation says so).

    With ``check_vcpus`` each task's ``vcpus`` is checked against what the runner hosts reported; without
    it (``kerrigan explain`` reads no hosts' reports) it is not."""
    workflow = manifest.workflow
    unchecked = () if repository is not None else tuple(p.id for p in inventory.pools if p.repositories)
    if workflow is None:
        return Explanation(manifest, (), repository=repository, unchecked_pools=unchecked)
    vcpus = {task.id: task.vcpus if check_vcpus else None for task in workflow.tasks}
    gangs = {
        task.id: explain_gang(
            [role.name for role in task.devices],
            [
                resolve(role.requirements, inventory, busy, repository=repository, vcpus=vcpus[task.id])
                for role in task.devices
            ],
        )
        for task in workflow.tasks
        if task.devices
    }
    hosts = {
        task.id: resolve_hosts(task.requirements, inventory, repository=repository, vcpus=vcpus[task.id])
        for task in workflow.tasks
        if task.boardless
    }
    resolutions = [
        gangs[task.id].bottleneck.resolution
        if task.id in gangs
        else no_devices(task.requirements)
        if task.id in hosts
        else resolve(task.requirements, inventory, busy, repository=repository, vcpus=vcpus[task.id])
        for task in workflow.tasks
    ]
    # A gang's devices are its verdict's, a boardless task takes none; the others share what
    # select_devices spreads.
    selected = select_devices(
        [
            () if task.id in gangs or task.id in hosts else res.eligible
            for task, res in zip(workflow.tasks, resolutions, strict=True)
        ],
        workflow.scheduling.strategy,
        workflow.scheduling.max_devkits,
    )
    return Explanation(
        manifest,
        tuple(
            TaskExplanation(task, res, gangs[task.id].bottleneck.selected, gangs[task.id])
            if task.id in gangs
            else TaskExplanation(task, res, None, hosts=hosts[task.id])
            if task.id in hosts
            else TaskExplanation(task, res, device, None)
            for task, res, device in zip(workflow.tasks, resolutions, selected, strict=True)
        ),
        repository=repository,
        unchecked_pools=unchecked,
    )


def no_devices(requested: Requirements) -> TaskResolution:
    """The device resolution of a task that holds no device: no device considered, none needed."""
    return TaskResolution(requested, (), (), (), (), (), (), (), ())


def invalid_input(manifest: ManifestResult, errors: tuple[Problem, ...]) -> Explanation:
    """An explanation that only reports problems with the input files."""
    return Explanation(manifest, (), errors)
