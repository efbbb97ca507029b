"""``kerrigan explain``: a workflow resolved against an inventory, as JSON and as text for a terminal.

The JSON shape is DESIGN.md's contract (docs/explain.md); fields beyond it are additions, never changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from kerrigan.core.inventory import Device, Inventory
from kerrigan.core.manifest import ManifestResult, Task
from kerrigan.core.matching import DeviceVerdict, Outcome, TaskResolution, resolve
from kerrigan.core.selection import select_devices
from kerrigan.core.yamlsource import Problem

EXIT_OK = 0
EXIT_UNMATCHED = 1
EXIT_INVALID = 2

TEXT_DEVICES_PER_REASON = 8
_TIMES = "\N{MULTIPLICATION SIGN}"


@dataclass(frozen=True, slots=True)
class TaskExplanation:
    """One task, how it resolved, and the device chosen for it."""

    task: Task
    resolution: TaskResolution
    selected: Device | None


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
        if any(not t.resolution.eligible for t in self.tasks):
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
    resolutions = [
        resolve(
            task.requirements,
            inventory,
            busy,
            repository=repository,
            vcpus=task.vcpus if check_vcpus else None,
        )
        for task in workflow.tasks
    ]
    selected = select_devices(
        [res.eligible for res in resolutions],
        workflow.scheduling.strategy,
        workflow.scheduling.max_devkits,
    )
    return Explanation(
        manifest,
        tuple(
            TaskExplanation(task, res, device)
            for task, res, device in zip(workflow.tasks, resolutions, selected, strict=True)
        ),
        repository=repository,
        unchecked_pools=unchecked,
    )


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
        "histogram": [
            {
                "reason": row.rule,
                "kind": row.kind.value,
                "count": row.count,
                "permanent": row.permanent,
                "got": dict(row.got),
            }
            for row in resolution.histogram
        ],
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


def _pools_text(res: TaskResolution) -> str:
    per_pool = Counter(device.pool_id for device in res.eligible)
    return ", ".join(f"{pool} ({per_pool[pool]} eligible)" for pool in res.eligible_pools) or "(none)"


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
        f"  eligible pools    {_pools_text(res)}",
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
