"""Sessions and jobs: a triggered workflow at one commit, and one job per task."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kerrigan.core.lifecycle import Conclusion, FailureClass, JobState, SessionState
from kerrigan.core.manifest import DEFAULT_MAX_DEVKITS, DEFAULT_QUEUE_WAIT_LIMIT_S, Strategy
from kerrigan.core.matching import Outcome

__all__ = ["RETRYABLE", "Conclusion", "Job", "Session", "SessionState"]


# Every end but success: a lab's problem (action_required, neutral) is re-run once the lab is fixed.
RETRYABLE = frozenset(
    {
        Conclusion.FAILURE,
        Conclusion.CANCELLED,
        Conclusion.TIMED_OUT,
        Conclusion.ACTION_REQUIRED,
        Conclusion.NEUTRAL,
    }
)


@dataclass(frozen=True, slots=True)
class Job:
    """One task of a session."""

    task_id: str
    device_id: str | None = None
    state: JobState = JobState.QUEUED
    exit_status: int | None = None
    command: str | None = None
    vcpus: int = 2
    timeout_s: int | None = None
    failure_class: FailureClass | None = None
    attempt: int = 1
    requirements: Mapping[str, Any] | None = None  # {"labels": {key: [values]}, "tags": [...]}
    env: Mapping[str, str] = field(default_factory=dict)  # the manifest's env for this job
    needs: tuple[str, ...] = ()  # tasks (ids as written) whose every job must succeed first
    results: tuple[str, ...] = ()  # globs of the JUnit XML files the runner sends after the command
    secrets: tuple[str, ...] = ()  # names of the repository secrets handed to it at acceptance
    artifacts: Mapping[str, Any] = field(default_factory=dict)  # {"download": [...], "upload": [...]}
    boardless: bool = False  # ``board: none``: it holds no device, only room on a runner host


@dataclass(frozen=True, slots=True)
class Session:
    """A workflow triggered at one commit of one repository."""

    id: str
    repository: str
    installation_id: int | None
    head_sha: str
    workflow: str
    manifest_path: str
    event: str
    priority: str
    state: SessionState
    created_at: datetime
    head_branch: str | None = None
    pull_request: int | None = None
    awaiting_approval: bool = False
    fork_owner: str | None = None  # the owner of the fork whose code it runs; None: the repository's own
    conclusion: Conclusion | None = None
    check_run_id: int | None = None
    delivery_id: str | None = None
    workflow_run_id: int | None = None  # the GitHub Actions run that triggered it (workflow_run events)
    resolution: Mapping[str, Any] = field(default_factory=dict)
    jobs: tuple[Job, ...] = ()
    # What dispatch needs of the manifest's scheduling block, typed (never read back out of ``resolution``).
    strategy: Strategy = Strategy.SPREAD
    max_devkits: int = DEFAULT_MAX_DEVKITS
    queue_wait_limit_s: float = float(DEFAULT_QUEUE_WAIT_LIMIT_S)
    # The check run: the version our state is at, the version GitHub shows, GitHub's last refusal.
    version: int = 0
    shown_version: int = 0
    check_run_error: str | None = None
    secrets_allowed: bool = True  # its jobs get the secrets they name (a fork's: only if approved so)

    @property
    def failed(self) -> bool:
        """Whether the session ended in a way ``/kerrigan retry`` re-runs."""
        return self.conclusion in RETRYABLE

    def cannot_pass(self) -> str | None:
        """Why a re-run of this session, at the same commit, would fail the same way: its manifest has
        errors (the commit does not change), or a task can never be scheduled (until the inventory
        changes); ``None`` when a re-run may pass. ``/kerrigan retry`` skips such sessions, saying this."""
        errors = self.resolution.get("errors")
        if isinstance(errors, list) and errors:
            first = errors[0] if isinstance(errors[0], Mapping) else {}
            where = f"{first.get('path') or self.manifest_path}:{first.get('line') or '?'}"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return f"its manifest has errors: {where}: {str(first.get('message', ''))[:200]}{more}"
        task = self.never_scheduled()
        if task is not None:
            return never_scheduled_reason(task)
        return None

    @property
    def has_manifest_errors(self) -> bool:
        """Whether its manifest had errors (a re-run at the same commit has them too)."""
        errors = self.resolution.get("errors")
        return isinstance(errors, list) and bool(errors)

    def never_scheduled(self) -> str | None:
        """The first task its resolution found no device could ever run, as the inventory was then."""
        tasks = self.resolution.get("tasks")
        for task in tasks if isinstance(tasks, list) else ():
            if isinstance(task, Mapping) and task.get("outcome") == Outcome.UNSCHEDULABLE.value:
                return str(task.get("id"))
        return None


def never_scheduled_reason(task: str) -> str:
    """Why a re-run would fail again: ``task`` can never be scheduled on the lab's devices."""
    return f"task {task[:100]} can never be scheduled on the lab's devices"
