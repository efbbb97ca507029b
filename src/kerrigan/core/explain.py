"""``kerrigan explain``: a workflow resolved against an inventory, as JSON and as text for a terminal.

The JSON shape is DESIGN.md's contract (docs/explain.md); fields beyond it are additions, never changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kerrigan.core.gang_explain import GangVerdict, explain_gang
from kerrigan.core.inventory import Device, Inventory
from kerrigan.core.manifest import ManifestResult, Task
from kerrigan.core.matching import (
    DeviceVerdict,
    HostResolution,
    Outcome,
    ReasonCount,
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

TEXT_DEVICES_PER_REASON = 8
_TIMES = "\N{MULTIPLICATION SIGN}"


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


# -- JSON ------------------------------------------------------------------------------------------


def _verdict_json(verdict: DeviceVerdict) -> dict[str, object]:
    return {
        "device": verdict.id,
        "pool": verdict.device.pool_id,
        "reasons": [reason.text for reason in verdict.reasons],
        "never": verdict.never,
    }


def _histogram_json(histogram: tuple[ReasonCount, ...]) -> list[dict[str, object]]:
    return [
        {
            "reason": row.rule,
            "kind": row.kind.value,
            "count": row.count,
            "permanent": row.permanent,
            "got": dict(row.got),
        }
        for row in histogram
    ]


def resolution_json(resolution: TaskResolution) -> dict[str, object]:
    """The matching part of a task's JSON, shared by ``explain`` and the API."""
    return {
        "requested": resolution.requested.as_dict(),
        "outcome": resolution.outcome.value,
        "summary": resolution.summary(),
        "eligible_pools": list(resolution.eligible_pools),
        "rejected_pools": [
            {"pool": verdict.pool, "reasons": [reason.text for reason in verdict.reasons]}
            for verdict in resolution.rejected_pools
        ],
        "eligible_devices": [device.id for device in resolution.eligible],
        "rejected_devices": [_verdict_json(verdict) for verdict in resolution.rejected],
        "histogram": _histogram_json(resolution.histogram),
        "nearest_misses": [_verdict_json(verdict) for verdict in resolution.nearest_misses],
        "hints": [
            {"field": hint.field, "line": hint.line, "message": hint.message} for hint in resolution.hints
        ],
    }


def explanation_json(
    explanation: Explanation, descriptions: Mapping[str, str] | None = None
) -> dict[str, object]:
    """The ``kerrigan explain --format json`` document; ``descriptions`` are the approved keys' own."""
    tasks = []
    for item in explanation.tasks:
        body: dict[str, object] = {"id": item.task.id, "line": item.task.line}
        body.update(resolution_json(item.resolution))
        body["selected"] = [item.selected.id] if item.selected else []
        if item.gang is not None:
            body.update(_gang_json(item.gang))
        if item.hosts is not None:
            body.update(_hosts_json(item.hosts, item.selected_host))
        if descriptions:
            body["descriptions"] = {
                key: descriptions[key] for key in item.task.requirements.labels if key in descriptions
            }
        tasks.append(body)
    return {
        "workflow": explanation.manifest.name,
        "file": explanation.manifest.file,
        "errors": [problem.as_dict() for problem in explanation.errors],
        "warnings": [problem.as_dict() for problem in explanation.manifest.warnings],
        "repository": explanation.repository,
        "repositories_not_checked": list(explanation.unchecked_pools),
        "tasks": tasks,
    }


MAX_GANG_HOSTS_SHOWN = 20


def _gang_json(gang: GangVerdict) -> dict[str, object]:
    """A gang task's additions: the task's outcome and summary over its scarcest role's, each role's
    resolution, and the hosts that could hold them all."""
    return {
        "outcome": gang.outcome.value,
        "summary": gang.summary(),
        "selected": [role.selected.id for role in gang.roles if role.selected is not None],
        "roles": [
            {
                "role": role.role,
                **resolution_json(role.resolution),
                "summary": role.summary(),
                "selected": [role.selected.id] if role.selected else [],
            }
            for role in gang.roles
        ],
        "gang": {
            "hosts": list(gang.hosts[:MAX_GANG_HOSTS_SHOWN]),
            "host_count": len(gang.hosts),
            "never": gang.never,
        },
    }


BOARD_NONE: Final = "none"


def _hosts_json(hosts: HostResolution, selected: str | None) -> dict[str, object]:
    """A boardless task's additions (``board: none``): its outcome and summary are its runner hosts', its
    hints theirs, and ``hosts`` says which could run it and why each other could not."""
    return {
        "board": BOARD_NONE,
        "outcome": hosts.outcome.value,
        "summary": hosts.summary(),
        "hints": [{"field": hint.field, "line": hint.line, "message": hint.message} for hint in hosts.hints],
        "hosts": {
            "total": hosts.total_hosts,
            "eligible": list(hosts.eligible),
            "rejected": [
                {
                    "host": verdict.host,
                    "reasons": [reason.text for reason in verdict.reasons],
                    "never": verdict.never,
                }
                for verdict in hosts.rejected
            ],
            "histogram": _histogram_json(hosts.histogram),
            "selected": selected,
        },
    }


# -- text ------------------------------------------------------------------------------------------

_OUTCOME_TEXT: Mapping[Outcome, str] = {
    Outcome.ELIGIBLE: "eligible",
    Outcome.WAITING: "waiting: matching devices exist but none is free now",
    Outcome.UNSCHEDULABLE: "unschedulable: no device in the inventory can ever match",
}


def _labels_text(labels: Mapping[str, list[str]]) -> str:
    parts = [
        f"{key}={values[0]}" if len(values) == 1 else f"{key} in [{', '.join(values)}]"
        for key, values in labels.items()
    ]
    return "  ".join(parts) or "(none)"


def _device_list(ids: list[str], limit: int = TEXT_DEVICES_PER_REASON) -> str:
    shown = ", ".join(ids[:limit])
    return shown + (f", … and {len(ids) - limit} more" if len(ids) > limit else "")


def render_text(explanation: Explanation, descriptions: Mapping[str, str] | None = None) -> str:
    """What a person reads in a terminal; ``descriptions`` explain the approved label keys requested."""
    manifest = explanation.manifest
    lines = [f"workflow {manifest.name or '(unnamed)'}  ({manifest.file})"]
    if explanation.repository is not None:
        lines.append(f"repository {explanation.repository}")
    lines += [f"error: {problem}" for problem in explanation.errors]
    lines += [f"warning: {problem}" for problem in manifest.warnings]
    unchecked = list(explanation.unchecked_pools)
    if unchecked:
        which = (
            f"pool {unchecked[0]} admits" if len(unchecked) == 1 else f"pools {_device_list(unchecked)} admit"
        )
        lines.append(
            "warning: repositories: not checked (no --repository given); "
            f"{which} only the repositories listed"
        )
    for item in explanation.tasks:
        lines.append("")
        lines += _task_text(item, descriptions or {})
    if explanation.errors:
        lines.append("")
        lines.append(f"{len(explanation.errors)} error(s); nothing was resolved")
    return "\n".join(lines) + "\n"


def _pools_text(res: TaskResolution) -> list[str]:
    with_devices, none_match = res.pools_by_eligibility
    shown = ", ".join(f"{pool} ({count} eligible)" for pool, count in with_devices) or "(none)"
    lines = [f"  eligible pools    {shown}"]
    if none_match:
        lines.append(f"  none match in     {', '.join(none_match)}  (pools whose every device fails)")
    return lines


def _rejected_text(res: TaskResolution) -> list[str]:
    """The histogram, each row with the devices in it."""
    out = [f"  rejected devices  {len(res.rejected)}, by reason:"]
    by_rule: dict[str, list[str]] = {}
    for verdict in res.rejected:
        for reason in verdict.reasons:
            by_rule.setdefault(reason.rule, []).append(verdict.id)
    width = len(str(res.histogram[0].count)) if res.histogram else 1
    for row in res.histogram:
        when = "never" if row.permanent else "not yet"
        got = ""
        if row.got:
            got = "  (got " + ", ".join(f"{value} {_TIMES}{count}" for value, count in row.got[:5])
            got += ", …)" if len(row.got) > 5 else ")"
        out.append(f"    {row.count:>{width}}  {row.rule}  [{when}]{got}")
        out.append(f"    {'':>{width}}    {_device_list(by_rule[row.rule])}")
    return out


def _task_text(item: TaskExplanation, descriptions: Mapping[str, str]) -> list[str]:
    if item.hosts is not None:
        return _hosts_text(item, item.hosts)
    if item.gang is not None:
        return _gang_text(item, item.gang, descriptions)
    return _resolution_text(item, descriptions)


HOST_OUTCOME_TEXT: Final[Mapping[Outcome, str]] = {
    Outcome.ELIGIBLE: "eligible",
    Outcome.WAITING: "waiting: runner hosts that could run it are offline, paused or not yet reporting",
    Outcome.UNSCHEDULABLE: "unschedulable: no runner host can ever run it",
}


def _hosts_text(item: TaskExplanation, hosts: HostResolution) -> list[str]:
    """A task with ``board: none``: the runner hosts it may run on, and why each other may not."""
    labels = hosts.requested.as_dict()["labels"]
    assert isinstance(labels, dict)
    out = [
        f"task {item.task.id}: {HOST_OUTCOME_TEXT[hosts.outcome]} "
        f"({len(hosts.eligible)} of {hosts.total_hosts} runner hosts; board: none, it holds no device)",
        f"  requested hosts   {_labels_text(labels) if labels else '(any)'}",
        f"  selected host     {item.selected_host or '(none)'}",
    ]
    if hosts.eligible:
        out.append(f"  eligible hosts    {_device_list(list(hosts.eligible))}")
    if hosts.rejected:
        out.append(f"  rejected hosts    {len(hosts.rejected)}, by reason:")
        by_rule: dict[str, list[str]] = {}
        for verdict in hosts.rejected:
            for reason in verdict.reasons:
                by_rule.setdefault(reason.rule, []).append(verdict.host)
        width = len(str(hosts.histogram[0].count))
        for row in hosts.histogram:
            out.append(f"    {row.count:>{width}}  {row.rule}  [{'never' if row.permanent else 'not yet'}]")
            out.append(f"    {'':>{width}}    {_device_list(by_rule[row.rule])}")
    if hosts.hints:
        out.append("  hints")
        out += [f"    line {hint.line}, {hint.field}: {hint.message}" for hint in hosts.hints]
    return out


def _gang_text(item: TaskExplanation, gang: GangVerdict, descriptions: Mapping[str, str]) -> list[str]:
    outcome = f"unschedulable: {gang.never}" if gang.never else _OUTCOME_TEXT[gang.outcome]
    hosts = _device_list(list(gang.hosts)) or "(none)"
    out = [
        f"task {item.task.id}: {outcome} (a gang: {len(gang.roles)} devices at once, on one runner host)",
        f"  runner hosts with a device for every role  {hosts}",
    ]
    for role in gang.roles:
        res = role.resolution
        lines = _resolution_text(TaskExplanation(item.task, res, role.selected), descriptions)
        count = f"{len(res.eligible)} of {res.total_devices} devices"
        out.append(f"  role {role.role}: {_OUTCOME_TEXT[res.outcome]} ({count})")
        out += ["  " + line for line in lines[1:]]  # its first line is the role's, above
    return out


def _resolution_text(item: TaskExplanation, descriptions: Mapping[str, str]) -> list[str]:
    res = item.resolution
    requested = res.requested.as_dict()
    labels = requested["labels"]
    tags = requested["tags"]
    assert isinstance(labels, dict)
    assert isinstance(tags, list)
    out = [
        f"task {item.task.id}: {_OUTCOME_TEXT[res.outcome]} "
        f"({len(res.eligible)} of {res.total_devices} devices)",
        f"  requested labels  {_labels_text(labels)}",
        *(f"    {key}: {descriptions[key]}" for key in labels if key in descriptions),
        f"  requested tags    {'  '.join(tags) or '(none)'}",
        *_pools_text(res),
    ]
    for pool_verdict in res.rejected_pools:
        out.append(
            f"  rejected pool     {pool_verdict.pool}: "
            f"{'; '.join(reason.text for reason in pool_verdict.reasons)}"
        )
    if item.selected is not None:
        device = item.selected
        out.append(
            f"  selected          {device.id} (pool {device.pool_id}, host {device.host}, "
            f"board {device.board})"
        )
    else:
        out.append("  selected          (none)")
    if res.eligible:
        out.append(f"  eligible devices  {_device_list([d.id for d in res.eligible])}")
    if res.rejected:
        out += _rejected_text(res)
    if res.nearest_misses:
        out.append("  nearest misses")
        out += [
            f"    {verdict.id} ({verdict.device.pool_id}): "
            f"{'; '.join(reason.text for reason in verdict.reasons)}"
            for verdict in res.nearest_misses
        ]
    if res.hints:
        out.append("  hints")
        out += [f"    line {hint.line}, {hint.field}: {hint.message}" for hint in res.hints]
    return out
