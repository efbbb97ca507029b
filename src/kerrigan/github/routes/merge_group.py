"""``merge_group`` (checks_requested): the merge queue's commits, as gate sessions."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.triggers import MergeGroup, branch_of
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import Payload
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import Trigger, start_workflows

router = Router()


@router.register("merge_group", action="checks_requested")
async def on_merge_group(event: Event, app: GitHubApp) -> None:
    """Start the workflows that run in the merge queue, with gate priority."""
    data = Payload(event.data)
    installation, name = installation_id(data), repository_name(data)
    group = data.optional_object("merge_group")
    if installation is None or name is None or group is None or not group.has("head_sha"):
        return
    base_ref = group.optional_string("base_ref", max_length=255)
    trigger = Trigger(
        sha=group.sha("head_sha"),
        event=MergeGroup(branch_of(base_ref) or base_ref or ""),
        event_name="merge_group",
        ref=branch_of(group.optional_string("head_ref", max_length=255)),
        delivery_id=event.delivery_id,
    )
    await start_workflows(app, app.repository(installation, name), trigger)
