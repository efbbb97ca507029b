"""What the tests of a person's WebSockets share (``kerrigan console``, ``kerrigan shell``): a screen that
reads one, the ``kerrigan`` command started as a process, and the server with a short idle time."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import aiohttp
import pytest

from kerrigan.app import create_app
from kerrigan.config import Settings
from kerrigan.store.database import Database
from kerrigan.testing.clock import FakeClock
from kerrigan.testing.github import GitHubStandIn
from kerrigan.web.state import DATABASE
from tests.integration.api.conftest import ADMIN, OWNER_A, OWNER_B, READER, Api, seed_lab
from tests.integration.github.conftest import REPO
from tests.integration.test_cli_explain import ROOT


async def started(*args: str, env: dict[str, str], stdin: int) -> asyncio.subprocess.Process:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("KERRIGAN_")} | env
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kerrigan.cli", *args,
        cwd=ROOT, env=environment, stdin=stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


class Screen:
    """What one person's WebSocket showed: the board's bytes and the server's notices."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.seen = bytearray()
        self.frames: list[dict[str, Any]] = []

    async def until(self, text: str) -> None:
        """Read until the board's bytes contain ``text``."""
        while text.encode() not in self.seen:
            await self.read_one()

    async def read_one(self) -> None:
        message = await self.socket.receive(timeout=20)
        if message.type is aiohttp.WSMsgType.BINARY:
            self.seen += message.data
        elif message.type is aiohttp.WSMsgType.TEXT:
            self.frames.append(json.loads(message.data))
        else:
            raise AssertionError(f"the console closed: {message!r} after {self.frames}")

    async def frame(self, kind: str) -> dict[str, Any]:
        """The next text frame of ``kind``."""
        while not any(frame["type"] == kind for frame in self.frames):
            await self.read_one()
        found = next(frame for frame in self.frames if frame["type"] == kind)
        self.frames.remove(found)
        return found


@pytest.fixture
async def idle_api(
    aiohttp_client: Any, database_url: str, db: Database, clock: FakeClock, github: GitHubStandIn
) -> Api:
    """The ``api`` fixture's server, with KERRIGAN_CONSOLE_IDLE_S at one second."""
    for login in (OWNER_A, OWNER_B, READER):
        github.set_permission(REPO, login, "read")
    settings = Settings(
        database_url=database_url,
        admins=frozenset({ADMIN}),
        github_api_url=github.url,
        github_app_id=github.app_id,
        github_private_key=github.private_key,
        console_idle_s=1,
    )
    client = await aiohttp_client(create_app(settings, clock=clock))
    database = client.app[DATABASE]
    return Api(client, await seed_lab(database), database)
