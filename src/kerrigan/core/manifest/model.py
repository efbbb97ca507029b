"""A valid manifest as frozen dataclasses, with the limits and defaults the parser applies."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Final

from kerrigan.core.lifecycle import RetryPolicy
from kerrigan.core.manifest.artifacts import Artifacts
from kerrigan.core.matrix import Combination, task_of
from kerrigan.core.requirements import Origin, Requirements
from kerrigan.core.yamlsource import Problem

MAX_TASKS: Final = 256
MAX_JOBS: Final = 1024  # jobs of one session, every task's matrix expanded
MAX_NODES: Final = 100_000  # keys and values, aliases expanded: far beyond 256 tasks written out in full
DEFAULT_MAX_DEVKITS: Final = 1
DEFAULT_QUEUE_WAIT_LIMIT_S: Final = 300
DEFAULT_VCPUS: Final = 2
DEFAULT_TIMEOUT_S: Final = 3600
DEFAULT_CONCURRENCY_GROUP: Final = "{workflow}/{branch}"
MAX_CONCURRENCY_GROUP: Final = 300  # the stored group's length (sessions.concurrency_group)
PLACEHOLDERS: Final = ("workflow", "branch", "pull_request", "sha")
MAX_EXIT_STATUSES: Final = 255


class Strategy(enum.StrEnum):
    """How a session's devices are chosen among the eligible ones."""

    SPREAD = "spread"
    PACK = "pack"


class Priority(enum.StrEnum):
    """Where a session's jobs stand in the queue."""

    GATE = "gate"
    NORMAL = "normal"
    BACKGROUND = "background"


class TaskType(enum.StrEnum):
    """What a task does on its device."""

    COMMAND = "command"


class PowerChoice(enum.StrEnum):
    """A task's ``power``: what the runner agent does with a wired board's power before the job (a board
    whose runner host's devices file gives it ``power``; any other is left alone)."""

    CYCLE = "cycle"  # off, ``off_s``, on, then wait for the boot (the default)
    KEEP = "keep"  # left as it is; switched on (and its boot waited for) only when it is off


@dataclass(frozen=True, slots=True)
class BranchFilter:
    """Branch name globs; ``None`` means every branch.

    ``*`` matches within one path segment, ``**`` across ``/``, as GitHub Actions' filters do.
    """

    patterns: tuple[str, ...] | None = None

    def matches(self, branch: str) -> bool:
        """Whether ``branch`` passes the filter."""
        if self.patterns is None:
            return True
        return any(_glob(pattern).fullmatch(branch) for pattern in self.patterns)


def _glob(pattern: str) -> re.Pattern[str]:
    parts = re.split(r"(\*\*|\*|\?)", pattern)
    wildcard = {"**": ".*", "*": "[^/]*", "?": "[^/]"}
    return re.compile("".join(wildcard.get(part, re.escape(part)) for part in parts))


@dataclass(frozen=True, slots=True)
class WorkflowRunTrigger:
    """Run after named GitHub Actions workflows reach one of ``types``."""

    workflows: tuple[str, ...]
    types: tuple[str, ...] = ("completed",)
    branches: BranchFilter = BranchFilter()


@dataclass(frozen=True, slots=True)
class Triggers:
    """The events a workflow runs on; ``None`` means not on that event."""

    push: BranchFilter | None = None
    pull_request: BranchFilter | None = None
    workflow_run: WorkflowRunTrigger | None = None
    merge_group: bool = False


@dataclass(frozen=True, slots=True)
class Scheduling:
    """The session-wide ``scheduling`` block."""

    strategy: Strategy = Strategy.SPREAD
    max_devkits: int = DEFAULT_MAX_DEVKITS
    priority: Priority = Priority.NORMAL
    queue_wait_limit_s: int = DEFAULT_QUEUE_WAIT_LIMIT_S
    requirements: Requirements = field(default_factory=Requirements)
    line: int = 1


@dataclass(frozen=True, slots=True)
class DeviceRole:
    """One role of a gang task (``devices``): its name and its requirements (the task's refined by the
    role's own)."""

    name: str
    requirements: Requirements
    line: int = 1


@dataclass(frozen=True, slots=True)
class Task:
    """One job's worth of work: a task as written, or one combination of its ``matrix``.

    ``id`` is the job's key (:func:`kerrigan.core.matrix.job_key`: the task's id, or
    ``smoke[board=modalix]`` for a combination); ``requirements`` are the session's refined by the task's
    own, and ``env`` the workflow's with the task's laid over it, both with the combination's values in.
    ``needs`` names tasks as written: every job of each must succeed first; ``results`` are globs of
    the JUnit XML files the command writes. A task with ``devices`` (a gang) takes one device per role;
    its ``requirements`` are then what every role shares. A ``boardless`` task (``board: none``) holds no
    device: it runs on a runner host, and its ``requirements`` name only ``kerrigan.host``. ``power`` says
    whether its boards (every role's) are power-cycled before it or kept as they are.
    """

    id: str
    run: str
    type: TaskType = TaskType.COMMAND
    vcpus: int = DEFAULT_VCPUS
    timeout_s: int = DEFAULT_TIMEOUT_S
    requirements: Requirements = field(default_factory=Requirements)
    line: int = 1
    env: tuple[tuple[str, str], ...] = ()
    needs: tuple[str, ...] = ()
    combination: Combination = field(default_factory=Combination)
    results: tuple[str, ...] = ()  # globs of JUnit XML files in the workspace, read after the command
    secrets: tuple[str, ...] = ()  # repository secrets (upper-case names) the job finds in its environment
    artifacts: Artifacts = field(default_factory=Artifacts)
    devices: tuple[DeviceRole, ...] = ()  # a gang's roles: several devices at once, on one runner host
    secret_origins: tuple[Origin, ...] = ()  # where each of ``secrets`` is written, in the same order
    boardless: bool = False  # ``board: none``: no device, a runner host (its vCPUs still claimed)
    power: PowerChoice = PowerChoice.CYCLE

    @property
    def task_id(self) -> str:
        """The id of the task as written (the job key without its combination)."""
        return task_of(self.id)

    @property
    def name(self) -> str:
        """The job as people read it: ``smoke (board=modalix)``, or the task id."""
        return self.combination.name(self.task_id)


class CancelInProgress(enum.StrEnum):
    """Which of an older commit's sessions a newer one cancels (``concurrency.cancel``)."""

    QUEUED = "queued"  # those none of whose jobs started
    IN_PROGRESS = "in_progress"  # running ones too: their runners stop them
    NONE = "none"  # none: every commit runs to its end


@dataclass(frozen=True, slots=True)
class Concurrency:
    """The manifest's ``concurrency``: sessions whose ``group`` expands alike supersede each other."""

    group: str = DEFAULT_CONCURRENCY_GROUP
    cancel: CancelInProgress = CancelInProgress.QUEUED

    def expand(self, *, workflow: str, branch: str | None, pull_request: int | None, sha: str) -> str:
        """The group of one session, cut to what is stored. ``{branch}`` of a pull request is
        ``pull/<number>``: a fork's ``main`` is not the repository's ``main``."""
        values = {
            "workflow": workflow,
            "branch": f"pull/{pull_request}" if pull_request is not None else (branch or ""),
            "pull_request": str(pull_request) if pull_request is not None else "",
            "sha": sha,
        }
        return PLACEHOLDER.sub(lambda found: values[found.group(1)], self.group)[:MAX_CONCURRENCY_GROUP]


PLACEHOLDER: Final = re.compile(r"\{([a-z_]+)\}")


@dataclass(frozen=True, slots=True)
class Workflow:
    """A valid manifest."""

    name: str
    file: str
    triggers: Triggers
    scheduling: Scheduling
    tasks: tuple[Task, ...]
    concurrency: Concurrency = Concurrency()
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True, slots=True)
class ManifestResult:
    """What parsing found: a workflow when there are no errors, and every error and warning."""

    file: str
    name: str | None
    workflow: Workflow | None
    errors: tuple[Problem, ...]
    warnings: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        """Whether the manifest is valid (warnings allowed)."""
        return self.workflow is not None
