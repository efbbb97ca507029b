"""``workflow_run``: workflows that follow the named GitHub Actions workflows (``completed`` by default)."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.forks import fork_branch
from kerrigan.core.triggers import WorkflowRun
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import Payload
from kerrigan.github.routes.payloads import fork_owner, installation_id, repository_name
from kerrigan.github.sessions import Trigger, start_workflows

router = Router()


@router.register("workflow_run")
async def on_workflow_run(event: Event, app: GitHubApp) -> None:
    """Start the workflows that wait on this run's workflow and action."""
    data = Payload(event.data)
    installation, name = installation_id(data), repository_name(data)
    run = data.optional_object("workflow_run")
    if installation is None or name is None or run is None or not run.has("head_sha"):
        return
    branch = run.optional_string("head_branch", max_length=255)
    head_repository = run.optional_object("head_repository")
    head_name = head_repository.optional_string("full_name") if head_repository is not None else None
    # A run of a fork's commit carries the fork's code: it waits for /kerrigan approve like the fork's pull
    # request does; so does one whose head repository is gone (a deleted fork: GitHub sends null).
    fork = head_name is None or head_name != name
    owner = fork_owner(head_name, "workflow_run.head_repository.full_name") if fork else None
    trigger = Trigger(
        sha=run.sha("head_sha"),
        event=WorkflowRun(run.optional_string("name") or "", data.optional_string("action") or "", branch),
        event_name="workflow_run",
        ref=branch if owner is None else fork_branch(owner, branch),
        awaiting_approval=fork,
        fork_owner=owner,
        delivery_id=event.delivery_id,
        workflow_run_id=run.optional_integer("id"),
    )
    await start_workflows(app, app.repository(installation, name), trigger)
