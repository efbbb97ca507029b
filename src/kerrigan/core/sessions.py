"""Sessions and jobs: a triggered workflow at one commit, and one job per task."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class SessionState(enum.StrEnum):
    """Where a session stands; it matches the check run's status."""

    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


class Conclusion(enum.StrEnum):
    """How a completed session ended; it matches the check run's conclusion."""

    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    TIMED_OUT = "timed_out"


RETRYABLE = frozenset({Conclusion.FAILURE, Conclusion.CANCELLED, Conclusion.TIMED_OUT})


@dataclass(frozen=True, slots=True)
class Job:
    """One task of a session."""

    task_id: str
    device_id: str | None = None
    state: str = "queued"
    exit_status: int | None = None
    command: str | None = None
    vcpus: int = 2
    timeout_s: int | None = None


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
    conclusion: Conclusion | None = None
    check_run_id: int | None = None
    delivery_id: str | None = None
    workflow_run_id: int | None = None  # the GitHub Actions run that triggered it (workflow_run events)
    resolution: Mapping[str, Any] = field(default_factory=dict)
    jobs: tuple[Job, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether the session ended in a way ``/kerrigan retry`` re-runs."""
        return self.conclusion in RETRYABLE
