"""``kerrigan explain`` as text for a terminal: each task's outcome, its pools, and why devices were
rejected."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kerrigan.core.explain.explanation import Explanation, TaskExplanation
from kerrigan.core.gang_explain import GangVerdict
from kerrigan.core.matching import (
    HostResolution,
    Outcome,
    TaskResolution,
)

TEXT_DEVICES_PER_REASON = 8
_TIMES = "\N{MULTIPLICATION SIGN}"


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
