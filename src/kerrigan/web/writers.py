"""Who writes to a repository, as GitHub says: write, maintain or admin there (the repository's writers
manage its secrets and cancel its sessions from the web, as GitHub Actions lets them). The web keeps no
user's GitHub token: the App asks, with the repository's installation (:data:`REPOSITORY_WRITERS`, set once
the App is connected; ``None`` on a server without it, which then asks nobody)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from kerrigan.core.roles import Principal
from kerrigan.web.errors import ApiError

log = logging.getLogger(__name__)

AskWriter = Callable[[int, str, str], Awaitable[tuple[bool, str]]]
"""``(installation_id, owner/name, login)`` to whether the login writes there, and its role's name."""


class RepositoryWriters:
    """How the web asks GitHub whether a login writes to a repository (``ask``); ``None``: it cannot."""

    def __init__(self, ask: AskWriter | None = None) -> None:
        self.ask = ask


REPOSITORY_WRITERS = web.AppKey("repository_writers", RepositoryWriters)


class WritersUnknownError(Exception):
    """GitHub did not answer."""


async def writes_to(
    request: web.Request, principal: Principal, installation_id: int | None, full_name: str
) -> tuple[bool, str] | None:
    """Whether ``principal`` writes to ``full_name`` on GitHub, and the name of their role there; ``None``
    when this server cannot ask (no App, or no installation known for the repository);
    :class:`WritersUnknownError` when GitHub did not answer."""
    writers = request.config_dict.get(REPOSITORY_WRITERS)
    if writers is None or writers.ask is None or installation_id is None or not full_name:
        return None
    try:
        return await writers.ask(installation_id, full_name, principal.login)
    except Exception as exc:  # whatever GitHub's client raised (the web cannot name its errors)
        log.warning("cannot ask GitHub who writes to %s: %s", full_name, type(exc).__name__)
        raise WritersUnknownError(
            f"GitHub did not say whether {principal.login} writes to {full_name}"
        ) from exc


def github_unavailable(principal: Principal, full_name: str) -> ApiError:
    """The 503 of a question about ``full_name``'s writers that GitHub did not answer."""
    return ApiError(
        503,
        "github_unavailable",
        f"cannot ask GitHub whether {principal.login} writes to {full_name}; try again",
    )
