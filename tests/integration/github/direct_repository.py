"""A :class:`~kerrigan.github.repository.Repository` of ``octo/firmware`` talking straight to the stand-in, on
a fake clock, without the rest of Kerrigan: for the tests of the GitHub client and of reading manifests."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp

from kerrigan.github.client import GitHubClient, InstallationTokens
from kerrigan.github.repository import Repository
from kerrigan.testing.clock import FakeTime
from kerrigan.testing.github import GitHubStandIn
from tests.integration.github.conftest import INSTALLATION, REPO


@dataclass
class Direct:
    """A Repository of ``octo/firmware`` talking to the stand-in, without the rest of Kerrigan."""

    repo: Repository
    client: GitHubClient
    github: GitHubStandIn
    clock: FakeTime

    def requests(self, method: str, path_end: str) -> list[Any]:
        return [r for r in self.github.requests if r.method == method and r.path.endswith(path_end)]


@contextlib.asynccontextmanager
async def direct_to(github: GitHubStandIn) -> AsyncIterator[Direct]:
    """A client, tokens and Repository of ``octo/firmware`` on ``github``, on a fake clock."""
    clock = FakeTime()
    async with aiohttp.ClientSession() as http:
        client = GitHubClient(http, base_url=github.url, sleeper=clock.sleep, clock=clock)
        assert github.private_key is not None
        tokens = InstallationTokens(client, github.app_id, github.private_key)
        yield Direct(Repository(client, tokens, INSTALLATION, REPO), client, github, clock)
