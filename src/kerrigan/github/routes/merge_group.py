"""``merge_group`` (checks_requested): the merge queue's commits, as gate sessions."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.triggers import MergeGroup, branch_of
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import GitHubApp, Trigger, start_workflows

router = Router()


@router.register("merge_group", action="checks_requested")
async def on_merge_group(event: Event, app: GitHubApp) -> None:
    """Start the workflows that run in the merge queue, with gate priority."""
    data = event.data
    installation, name = installation_id(data), repository_name(data)
    group = data.get("merge_group") or {}
    if installation is None or name is None or not group.get("head_sha"):
        return
    base = branch_of(group.get("base_ref")) or str(group.get("base_ref", ""))
    trigger = Trigger(
        sha=str(group["head_sha"]),
        event=MergeGroup(base),
        event_name="merge_group",
        ref=branch_of(group.get("head_ref")),
        delivery_id=event.delivery_id,
    )
    await start_workflows(app, app.repository(installation, name), trigger)
