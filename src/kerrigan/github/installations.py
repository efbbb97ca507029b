"""Asking GitHub which installation of the App covers a repository that no event has told Kerrigan of.

``GET /repos/{owner}/{repo}/installation`` (with the App's JWT) names the installation; a token of that
installation narrowed to the repository (``metadata: read``) then names the repository as GitHub spells it,
with its id, which secrets are kept under. The token is revoked at once: it was only needed for its answer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Final

import aiohttp
from cachetools import TTLCache
from gidgethub import BadRequest, GitHubException

from kerrigan.github.budget import APP
from kerrigan.github.client import GitHubClient, InstallationTokens, acting_for
from kerrigan.github.payload import Payload, PayloadError
from kerrigan.store.installations import Discovered, DiscoveryError

log = logging.getLogger(__name__)

LOOKUP_PERMISSIONS: Final = {"metadata": "read"}  # the least a token may have: enough to name the repository
NOT_INSTALLED_S: Final = 300.0  # how long GitHub's "not installed" is believed before it is asked again


class RepositoryDiscovery:
    """:func:`discover_repository` for one process, remembering GitHub's "not installed" for
    :data:`NOT_INSTALLED_S`, so that names asked again and again (a typo retried, a probe) cost one request
    each per five minutes, not one each time. An installed repository is remembered in the database."""

    def __init__(
        self, client: GitHubClient, tokens: InstallationTokens, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._tokens = tokens
        self._absent: TTLCache[str, bool] = TTLCache(maxsize=4096, ttl=NOT_INSTALLED_S, timer=clock)

    async def __call__(self, full_name: str) -> Discovered | None:
        """GitHub's answer for ``owner/name`` (see :func:`discover_repository`)."""
        key = full_name.lower()
        if key in self._absent:
            return None
        found = await discover_repository(self._client, self._tokens, full_name)
        if found is None:
            self._absent[key] = True
        return found


async def discover_repository(
    client: GitHubClient, tokens: InstallationTokens, full_name: str
) -> Discovered | None:
    """What GitHub says of ``owner/name``'s installation of the App; ``None`` when the App is not installed
    there; a :class:`DiscoveryError` when GitHub cannot be asked or answers what it should not."""
    owner, _, name = full_name.partition("/")
    try:
        with acting_for(APP, essential=True):
            answer = await client.getitem(
                "/repos/{owner}/{repo}/installation", {"owner": owner, "repo": name}, jwt=tokens.app_jwt()
            )
        installation = Payload(answer, "installation")
        installation_id = installation.integer("id")
        account = installation.optional_object("account")
        login = (account.optional_string("login", max_length=100) if account is not None else None) or ""
        suspended = installation.has("suspended_at")
        data = await tokens.scoped_token(installation_id, full_name, LOOKUP_PERMISSIONS)
    except BadRequest as exc:
        if int(exc.status_code) == 404:
            return None
        raise DiscoveryError(f"GitHub answered {exc.status_code}: {exc}") from None
    except PayloadError as exc:
        raise DiscoveryError(f"GitHub's answer is not one Kerrigan can read: {exc}") from None
    except (GitHubException, aiohttp.ClientError, TimeoutError) as exc:
        raise DiscoveryError(f"GitHub cannot be asked: {str(exc) or type(exc).__name__}") from None
    await _revoke(client, str(data.get("token", "")))
    try:
        listed = Payload(data, "token").objects("repositories")
        named = [(item.integer("id"), item.string("full_name", max_length=200)) for item in listed]
    except PayloadError as exc:
        raise DiscoveryError(f"GitHub's answer is not one Kerrigan can read: {exc}") from None
    # The token was narrowed to this one repository: GitHub lists it alone, under the name it spells.
    matching = [(github_id, spelt) for github_id, spelt in named if spelt.lower() == full_name.lower()]
    if len(matching) != 1:
        raise DiscoveryError(f"GitHub's token for {full_name} did not name that repository")
    repository_id, spelt = matching[0]
    return Discovered(installation_id, login, suspended, repository_id, spelt)


async def _revoke(client: GitHubClient, token: str) -> None:
    """Revoke a token whose answer was all that was wanted; it expires within the hour anyway."""
    if not token:
        return
    try:
        with acting_for(APP):
            await client.delete("/installation/token", oauth_token=token)
    except (GitHubException, aiohttp.ClientError, TimeoutError) as exc:
        log.info("a repository lookup's token was not revoked (it expires within the hour): %s", exc)
