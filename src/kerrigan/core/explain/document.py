"""The ``kerrigan explain --format json`` document (and the matching part of a task's JSON the API shares).

The shape is DESIGN.md's contract (docs/explain.md); fields beyond it are additions, never changes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from kerrigan.core.explain.explanation import Explanation
from kerrigan.core.gang_explain import GangVerdict
from kerrigan.core.matching import (
    DeviceVerdict,
    HostResolution,
    ReasonCount,
    TaskResolution,
)

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
