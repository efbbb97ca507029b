"""Kerrigan and the GitHub stand-in as processes of their own, the way an operator runs them.

Used by the end-to-end tests and the webhook benchmark, so that what they measure is the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from kerrigan.testing.github import generate_app_key

APP_ID = "4242"


def free_port() -> int:
    """A free loopback port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def wait_ready(base: str, timeout: float = 30.0) -> None:
    """Wait until the server at ``base`` answers ``/readyz``."""
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientConnectionError):
                async with http.get(f"{base}/readyz") as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.1)
    raise TimeoutError(f"{base} did not become ready in {timeout} s")


@dataclass(frozen=True)
class Served:
    """A running ``kerrigan serve`` and the GitHub stand-in it talks to (and the App's id and key, to ask
    the stand-in what it holds as the App would)."""

    base: str
    github_url: str
    app_id: str = APP_ID
    private_key: str = ""


@contextlib.asynccontextmanager
async def serve_with_github(
    folder: Path,
    *,
    database_url: str,
    repository: str,
    workflows: Path | None,
    webhook_secret: str,
    configure_app: bool = True,
    environment: Mapping[str, str] | None = None,
    files: Path | None = None,
    github_arguments: Sequence[str] = (),
) -> AsyncIterator[Served]:
    """Start the stand-in (holding ``workflows`` at every commit of ``repository``) and ``kerrigan serve``;
    stop both on the way out. ``files``: a folder whose files every commit holds (scripts beside the
    manifests); ``github_arguments``: more of the stand-in's options (``--artifact``).
    ``configure_app=False`` leaves the GitHub App unconfigured (deliveries are stored, not processed)."""
    private_key, public_key = generate_app_key()
    (folder / "app.pub").write_text(public_key, encoding="utf-8")
    github = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kerrigan.testing.github",
        "--public-key",
        str(folder / "app.pub"),
        "--app-id",
        APP_ID,
        "--repository",
        repository,
        *(["--workflows", str(workflows)] if workflows else []),
        *(["--files", str(files)] if files else []),
        *github_arguments,
        stdout=asyncio.subprocess.PIPE,
    )
    assert github.stdout is not None
    server: asyncio.subprocess.Process | None = None
    try:
        github_url = (await asyncio.wait_for(github.stdout.readline(), 30)).decode().strip()
        port = free_port()
        env = {
            **os.environ,
            "KERRIGAN_DATABASE_URL": database_url,
            "KERRIGAN_PORT": str(port),
            "KERRIGAN_GITHUB_API_URL": github_url,
            "KERRIGAN_GITHUB_PRIVATE_KEY": private_key,
            "KERRIGAN_WEBHOOK_SECRET": webhook_secret,
            **({"KERRIGAN_GITHUB_APP_ID": APP_ID} if configure_app else {}),
            **(environment or {}),
        }
        server = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kerrigan.cli",
            "serve",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        base = f"http://127.0.0.1:{port}"
        await wait_ready(base)
        yield Served(base, github_url, APP_ID, private_key)
    finally:
        for process in (server, github):
            if process is not None and process.returncode is None:
                process.terminate()
                await process.wait()
