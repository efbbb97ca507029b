"""``workflow_run``: workflows that follow the named GitHub Actions workflows (``completed`` by default)."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.triggers import WorkflowRun
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import GitHubApp, Trigger, start_workflows

router = Router()


@router.register("workflow_run")
async def on_workflow_run(event: Event, app: GitHubApp) -> None:
    """Start the workflows that wait on this run's workflow and action."""
    data = event.data
    installation, name = installation_id(data), repository_name(data)
    run = data.get("workflow_run") or {}
    if installation is None or name is None or not run.get("head_sha"):
        return
    branch = run.get("head_branch")
    head_repository = (run.get("head_repository") or {}).get("full_name")
    trigger = Trigger(
        sha=str(run["head_sha"]),
        event=WorkflowRun(str(run.get("name", "")), str(data.get("action", "")), branch),
        event_name="workflow_run",
        ref=branch,
        # A run of a fork's commit carries the fork's code: it waits for /kerrigan approve like the fork's
        # pull request does.
        awaiting_approval=head_repository is not None and head_repository != name,
        delivery_id=event.delivery_id,
        workflow_run_id=run["id"] if isinstance(run.get("id"), int) else None,
    )
    await start_workflows(app, app.repository(installation, name), trigger)
