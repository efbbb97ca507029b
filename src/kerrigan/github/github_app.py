"""The GitHub App as Kerrigan's GitHub side uses it: the database, the settings and an authenticated client,
handed to every route, the reconciler and the delivery worker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import aiohttp

from kerrigan.config import Settings
from kerrigan.core.runner_protocol import JobCredentials
from kerrigan.github.client import GitHubClient, InstallationTokens
from kerrigan.github.repository import Repository
from kerrigan.store.database import Database


@dataclass(frozen=True)
class GitHubApp:
    """What handling an event needs: the database, the settings and an authenticated GitHub client."""

    database: Database
    settings: Settings
    client: GitHubClient
    tokens: InstallationTokens

    @classmethod
    def connect(cls, database: Database, settings: Settings, http: aiohttp.ClientSession) -> GitHubApp:
        """The app for ``settings`` (which must carry the App id and private key)."""
        if settings.github_app_id is None or settings.github_private_key is None:
            raise ValueError("KERRIGAN_GITHUB_APP_ID and a private key are needed to talk to GitHub")
        client = GitHubClient(http, base_url=settings.github_api_url)
        tokens = InstallationTokens(client, settings.github_app_id, settings.github_private_key)
        return cls(database, settings, client, tokens)

    def repository(self, installation_id: int, full_name: str) -> Repository:
        """The calls for one repository, as its installation."""
        return Repository(self.client, self.tokens, installation_id, full_name)

    async def job_credentials(self, installation_id: int, full_name: str) -> JobCredentials:
        """A token a runner fetches one repository with: read-only, that repository only, short-lived."""
        data = await self.tokens.scoped_token(installation_id, full_name, JOB_TOKEN_PERMISSIONS)
        return JobCredentials(
            str(data["token"]), str(data.get("expires_at", "")), self.settings.github_api_url
        )

    def details_url(self, session_id: str) -> str:
        """The session page a check run links to."""
        return f"{self.settings.public_url}/sessions/{session_id}"


JOB_TOKEN_PERMISSIONS: Final = {"contents": "read", "actions": "read"}
