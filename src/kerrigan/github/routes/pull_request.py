"""``pull_request`` (opened, synchronize, reopened): workflows whose ``on.pull_request.branches`` match the
base branch. A fork's pull request waits for ``/kerrigan approve`` before anything runs on lab hardware."""

from __future__ import annotations

from gidgethub.routing import Router
from gidgethub.sansio import Event

from kerrigan.core.forks import fork_branch
from kerrigan.core.triggers import PullRequest
from kerrigan.github.github_app import GitHubApp
from kerrigan.github.payload import Payload
from kerrigan.github.routes.payloads import fork_owner, installation_id, repository_name
from kerrigan.github.sessions import Trigger, start_workflows

router = Router()

MAX_NUMBER = 2**31 - 1  # sessions keep the pull request's number in a 32-bit column


def head_name(pull: Payload) -> str | None:
    """``owner/name`` of the repository the pull request's head lives in (``None``: since deleted)."""
    head_repo = pull.object("head").optional_object("repo")
    return head_repo.optional_string("full_name") if head_repo is not None else None


def is_fork(pull: Payload) -> bool:
    """Whether the pull request's head lives in another repository (or one since deleted)."""
    base = pull.optional_object("base")
    base_repo = base.optional_object("repo") if base is not None else None
    base_name = base_repo.optional_string("full_name") if base_repo is not None else None
    name = head_name(pull)
    return name is None or name != base_name


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="reopened")
async def on_pull_request(event: Event, app: GitHubApp) -> None:
    """Start the workflows this pull request runs (or set them waiting for approval)."""
    data = Payload(event.data)
    installation, name = installation_id(data), repository_name(data)
    if installation is None or name is None:
        return
    pull = data.object("pull_request")
    head = pull.object("head")
    branch = head.optional_string("ref", max_length=255) or ""
    owner = fork_owner(head_name(pull), "pull_request.head.repo.full_name") if is_fork(pull) else None
    trigger = Trigger(
        sha=head.sha("sha"),
        event=PullRequest(pull.object("base").string("ref", max_length=255)),
        event_name="pull_request",
        ref=branch if owner is None else fork_branch(owner, branch),
        pull_request=pull.integer("number", maximum=MAX_NUMBER),
        awaiting_approval=owner is not None,
        fork_owner=owner,
        delivery_id=event.delivery_id,
    )
    await start_workflows(app, app.repository(installation, name), trigger)
