"""One gidgethub router per concern, composed in :data:`router`."""

from __future__ import annotations

from gidgethub.routing import Router

from kerrigan.github.routes import (
    checks,
    comments,
    installations,
    merge_group,
    pull_request,
    push,
    workflow_run,
)

router = Router(
    push.router,
    pull_request.router,
    workflow_run.router,
    merge_group.router,
    checks.router,
    comments.router,
    installations.router,
)
