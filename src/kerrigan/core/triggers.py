"""Which workflows an event starts: the manifest's ``on`` block against what happened on GitHub."""

from __future__ import annotations

from dataclasses import dataclass

from kerrigan.core.manifest import Priority, Workflow


@dataclass(frozen=True, slots=True)
class Push:
    """Commits pushed to a branch."""

    branch: str


@dataclass(frozen=True, slots=True)
class PullRequest:
    """A pull request opened, synchronised or reopened against ``base_branch``."""

    base_branch: str


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """A GitHub Actions workflow run reached ``action`` (``completed``, ...)."""

    workflow: str
    action: str
    branch: str | None


@dataclass(frozen=True, slots=True)
class MergeGroup:
    """The merge queue asks for checks on a merge group."""

    base_branch: str


Event = Push | PullRequest | WorkflowRun | MergeGroup

EVENT_NAMES = {
    Push: "push",
    PullRequest: "pull_request",
    WorkflowRun: "workflow_run",
    MergeGroup: "merge_group",
}


def runs_on(workflow: Workflow, event: Event) -> bool:
    """Whether ``workflow`` runs on ``event``."""
    triggers = workflow.triggers
    if isinstance(event, Push):
        return triggers.push is not None and triggers.push.matches(event.branch)
    if isinstance(event, PullRequest):
        return triggers.pull_request is not None and triggers.pull_request.matches(event.base_branch)
    if isinstance(event, WorkflowRun):
        run = triggers.workflow_run
        return (
            run is not None
            and event.workflow in run.workflows
            and event.action in run.types
            and (event.branch is None or run.branches.matches(event.branch))
        )
    return triggers.merge_group


def priority_for(workflow: Workflow, event: Event) -> Priority:
    """Merge-queue sessions are gate jobs; otherwise the manifest says."""
    return Priority.GATE if isinstance(event, MergeGroup) else workflow.scheduling.priority


def branch_of(ref: str | None) -> str | None:
    """``refs/heads/main`` -> ``main``; a tag or other ref -> ``None``."""
    if ref is None or not ref.startswith("refs/heads/"):
        return None
    return ref.removeprefix("refs/heads/")
