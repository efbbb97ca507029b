"""``pull_request`` (opened, synchronize, reopened): workflows whose ``on.pull_request.branches`` match the
base branch. A fork's pull request waits for ``/kerrigan approve`` before anything runs on lab hardware."""

from __future__ import annotations

from typing import Any

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.triggers import PullRequest
from kerrigan.github.routes.payloads import installation_id, repository_name
from kerrigan.github.sessions import GitHubApp, Trigger, start_workflows

router = Router()


def is_fork(pull: dict[str, Any]) -> bool:
    """Whether the pull request's head lives in another repository (or one since deleted)."""
    head_repo = (pull.get("head") or {}).get("repo")
    base_repo = (pull.get("base") or {}).get("repo") or {}
    return head_repo is None or head_repo.get("full_name") != base_repo.get("full_name")


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
async def on_pull_request(event: Event, app: GitHubApp) -> None:
    """Start the workflows this pull request runs (or set them waiting for approval)."""
    data = event.data
    installation, name = installation_id(data), repository_name(data)
    if installation is None or name is None:
        return
    pull = data["pull_request"]
    trigger = Trigger(
        sha=str(pull["head"]["sha"]),
        event=PullRequest(str(pull["base"]["ref"])),
        event_name="pull_request",
        ref=str(pull["head"].get("ref") or ""),
        pull_request=int(pull["number"]),
        awaiting_approval=is_fork(pull),
        delivery_id=event.delivery_id,
    )
    await start_workflows(app, app.repository(installation, name), trigger)
