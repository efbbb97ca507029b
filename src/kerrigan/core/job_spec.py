"""What a job is asked to do, as its manifest task says it: one value the store writes, reads back, copies
into a retry and offers to a runner host.

A task key the manifest gains touches :class:`JobSpec`, :func:`spec_of_task` and the store's mapping of
it to columns (:mod:`kerrigan.store.job_specs`), nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kerrigan.core.manifest.model import DEFAULT_VCPUS, PowerChoice, Task


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One job's task: its key, command, claim, timeout, requirements and what the runner hands it."""

    task_id: str  # the job key: the task's id, or ``smoke[board=modalix]`` for a matrix combination
    command: str | None = None
    vcpus: int = DEFAULT_VCPUS
    timeout_s: int | None = None
    requirements: Mapping[str, Any] | None = None  # {"labels": {key: [values]}, "tags": [...]}, once resolved
    env: Mapping[str, str] = field(default_factory=dict)  # the manifest's env for this job
    needs: tuple[str, ...] = ()  # tasks (ids as written) whose every job must succeed first
    results: tuple[str, ...] = ()  # globs of the JUnit XML files the runner sends after the command
    secrets: tuple[str, ...] = ()  # names of the repository secrets handed to it at acceptance
    artifacts: Mapping[str, Any] = field(default_factory=dict)  # {"download": [...], "upload": [...]}
    boardless: bool = False  # ``board: none``: it holds no device, only room on a runner host
    power: PowerChoice = PowerChoice.CYCLE  # whether the runner power-cycles its wired boards before it


def spec_of_task(task: Task) -> JobSpec:
    """The job a manifest's task (one combination of its matrix) asks for; its requirements are set when
    the session is resolved."""
    return JobSpec(
        task.id,
        command=task.run,
        vcpus=task.vcpus,
        timeout_s=task.timeout_s,
        env=dict(task.env),
        needs=task.needs,
        results=task.results,
        secrets=task.secrets,
        artifacts=task.artifacts.as_dict() if task.artifacts else {},
        boardless=task.boardless,
        power=task.power,
    )
