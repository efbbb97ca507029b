"""A job's spec (:class:`~kerrigan.core.job_spec.JobSpec`) as the columns of its row, and back: the one
place the store maps it, for a new job, its retry and its offer."""

from __future__ import annotations

from typing import Any

from kerrigan.core.job_spec import JobSpec
from kerrigan.store.models import JobRow


def spec_columns(spec: JobSpec) -> dict[str, Any]:
    """The ``JobRow`` columns that hold ``spec`` (each collection copied, so the row owns its own)."""
    return {
        "task_id": spec.task_id,
        "command": spec.command,
        "vcpus": spec.vcpus,
        "timeout_s": spec.timeout_s,
        "requirements": dict(spec.requirements) if spec.requirements is not None else None,
        "env": dict(spec.env),
        "needs": list(spec.needs),
        "results": list(spec.results),
        "secrets": list(spec.secrets),
        "artifacts": dict(spec.artifacts),
        "boardless": spec.boardless,
        "power": spec.power,
    }


def spec_of(row: JobRow) -> JobSpec:
    """The spec a job's row holds."""
    return JobSpec(
        row.task_id,
        command=row.command,
        vcpus=row.vcpus,
        timeout_s=row.timeout_s,
        requirements=row.requirements,
        env=dict(row.env or {}),
        needs=tuple(row.needs or ()),
        results=tuple(row.results or ()),
        secrets=tuple(row.secrets or ()),
        artifacts=dict(row.artifacts or {}),
        boardless=bool(row.boardless),
        power=row.power,
    )
