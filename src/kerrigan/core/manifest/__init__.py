"""Workflow manifests (``.kerrigan/workflows/*.yml``): YAML text to a typed workflow with source lines.

:func:`parse_manifest` never raises for a user's mistake. It returns every error and deprecation warning at
once, each with the file, line and field, ready to become a check-run annotation.

The parts: :mod:`.model` (the frozen dataclasses and limits), :mod:`.parser` (the document and its
top-level keys), :mod:`.triggers` (``on``), :mod:`.scheduling`, :mod:`.policies` (``concurrency`` and
``retry``), :mod:`.requirements` (``labels`` and ``tags``), :mod:`.tasks` (with
:mod:`.devices`, a gang's roles); :mod:`.files`, how many manifests a commit may hold and how large.
"""

from __future__ import annotations

from kerrigan.core.manifest.files import MAX_MANIFEST_BYTES, MAX_MANIFESTS
from kerrigan.core.manifest.model import (
    DEFAULT_CONCURRENCY_GROUP,
    DEFAULT_MAX_DEVKITS,
    DEFAULT_QUEUE_WAIT_LIMIT_S,
    DEFAULT_TIMEOUT_S,
    DEFAULT_VCPUS,
    MAX_CONCURRENCY_GROUP,
    MAX_EXIT_STATUSES,
    MAX_NODES,
    MAX_TASKS,
    PLACEHOLDERS,
    BranchFilter,
    CancelInProgress,
    Concurrency,
    DeviceRole,
    ManifestResult,
    PowerChoice,
    Priority,
    Scheduling,
    Strategy,
    Task,
    TaskType,
    Triggers,
    Workflow,
    WorkflowRunTrigger,
)
from kerrigan.core.manifest.parser import parse_manifest

__all__ = [
    "DEFAULT_CONCURRENCY_GROUP",
    "DEFAULT_MAX_DEVKITS",
    "DEFAULT_QUEUE_WAIT_LIMIT_S",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_VCPUS",
    "MAX_CONCURRENCY_GROUP",
    "MAX_EXIT_STATUSES",
    "MAX_MANIFESTS",
    "MAX_MANIFEST_BYTES",
    "MAX_NODES",
    "MAX_TASKS",
    "PLACEHOLDERS",
    "BranchFilter",
    "CancelInProgress",
    "Concurrency",
    "DeviceRole",
    "ManifestResult",
    "PowerChoice",
    "Priority",
    "Scheduling",
    "Strategy",
    "Task",
    "TaskType",
    "Triggers",
    "Workflow",
    "WorkflowRunTrigger",
    "parse_manifest",
]
