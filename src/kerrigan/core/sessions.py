"""Sessions and jobs: a triggered workflow at one commit, and one job per task."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from kerrigan.core.job_spec import JobSpec
from kerrigan.core.lifecycle import NO_RETRY, Conclusion, FailureClass, JobState, RetryPolicy, SessionState
from kerrigan.core.manifest import DEFAULT_MAX_DEVKITS, DEFAULT_QUEUE_WAIT_LIMIT_S, Priority, Strategy
from kerrigan.core.matching import Outcome
from kerrigan.core.resolution import EMPTY, Resolution

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
    """One task of a session: what it is asked to do (``spec``), and where it stands."""

    spec: JobSpec
    device_id: str | None = None
    state: JobState = JobState.QUEUED
    exit_status: int | None = None
    failure_class: FailureClass | None = None
    attempt: int = 1

    @property
    def task_id(self) -> str:
        """The job's key: its task's id (with its matrix combination)."""
        return self.spec.task_id


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
    priority: Priority
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
    resolution: Resolution = EMPTY
    retry: RetryPolicy = NO_RETRY  # the manifest's retry policy (a session stored without one: none)
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
        errors = self.resolution.errors
        if errors:
            first = errors[0]
            where = f"{first.path or self.manifest_path}:{first.line or '?'}"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            return f"its manifest has errors: {where}: {first.message[:200]}{more}"
        task = self.never_scheduled()
        if task is not None:
            return never_scheduled_reason(task)
        return None

    @property
    def has_manifest_errors(self) -> bool:
        """Whether its manifest had errors (a re-run at the same commit has them too)."""
        return bool(self.resolution.errors)

    def never_scheduled(self) -> str | None:
        """The first task its resolution found no device could ever run, as the inventory was then."""
        return next(
            (task.id for task in self.resolution.tasks if task.outcome is Outcome.UNSCHEDULABLE), None
        )


def never_scheduled_reason(task: str) -> str:
    """Why a re-run would fail again: ``task`` can never be scheduled on the lab's devices."""
    return f"task {task[:100]} can never be scheduled on the lab's devices"
