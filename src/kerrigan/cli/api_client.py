"""The client side of the lab's REST API for commands a person runs against a live lab (``kerrigan
sessions``, ``kerrigan reserve``, ``kerrigan reservations``): where the lab is (``--url`` or
``KERRIGAN_URL``), the token (``--token`` or ``KERRIGAN_TOKEN``), and one request at a time."""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any

from kerrigan.cli.usage import UsageError, first_line


def api_options(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token``, defaulting to ``KERRIGAN_URL`` and ``KERRIGAN_TOKEN``."""
    parser.add_argument("--url", help="the lab's address (default: KERRIGAN_URL)")
    parser.add_argument(
        "--token",
        help="an API token (default: KERRIGAN_TOKEN, which other users of the host cannot read in the "
        "process list as they can an option)",
    )


class ApiRefusedError(Exception):
    """The API answered with an error: its status, code and message."""

    def __init__(self, status: int, code: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.body = body or {}


def _api_target(args: argparse.Namespace) -> tuple[str, str | None]:
    url = args.url or os.environ.get("KERRIGAN_URL", "")
    if not url:
        raise UsageError("say where the lab is: --url or KERRIGAN_URL (like https://kerrigan.example.com)")
    if not re.match(r"https?://[^/\s]+", url):
        raise UsageError(f"--url must be an http:// or https:// address, not {url[:80]!r}")
    return url.rstrip("/"), args.token or os.environ.get("KERRIGAN_TOKEN") or None


async def api_call(
    args: argparse.Namespace,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    *,
    timeout_s: float = 60.0,
) -> dict[str, Any]:
    """One request to ``/api/v1`` (with ``body`` as JSON, if given); the JSON answer. An API error is
    :class:`ApiRefusedError` (its ``body`` the whole answer); a lab that cannot be reached (or silent for
    ``timeout_s``) is a :class:`UsageError` of one line."""
    _, parsed = await api_call_status(args, method, path, query, body, timeout_s=timeout_s)
    return parsed


async def api_call_status(
    args: argparse.Namespace,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
    *,
    timeout_s: float = 60.0,
) -> tuple[int, dict[str, Any]]:
    """As :func:`api_call`, with the answer's status (a 201 made something, a 200 found it made)."""
    url, status, answer, _ = await _send(args, method, path, query, body, timeout_s=timeout_s)
    try:
        parsed = json.loads(answer)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise UsageError(f"{url} did not answer as Kerrigan's API does (no JSON object at {path})")
    return status, parsed


async def api_call_text(
    args: argparse.Namespace,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[str, dict[str, str]]:
    """As :func:`api_call`, for an answer that is text: the text and the answer's headers."""
    _, _, answer, headers = await _send(args, method, path, query, body)
    return answer.decode("utf-8", "replace"), headers


async def _send(
    args: argparse.Namespace,
    method: str,
    path: str,
    query: dict[str, str] | None,
    body: dict[str, Any] | None,
    *,
    timeout_s: float = 60.0,
) -> tuple[str, int, bytes, dict[str, str]]:
    """The lab's address, the answer's status, bytes and headers; an API error raised as
    :class:`ApiRefusedError`."""
    import aiohttp

    url, token = _api_target(args)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as http,
            http.request(method, f"{url}/api/v1{path}", params=query, headers=headers, json=body) as response,
        ):
            answer = await response.read()
            if response.status >= 400:
                try:
                    parsed = json.loads(answer)
                except ValueError:
                    parsed = None
                error = parsed.get("error") if isinstance(parsed, dict) else None
                if not isinstance(error, dict):
                    error = {"code": "error", "message": f"{url} answered HTTP {response.status}"}
                raise ApiRefusedError(
                    response.status,
                    str(error.get("code")),
                    str(error.get("message")),
                    parsed if isinstance(parsed, dict) else {},
                )
            return url, response.status, answer, dict(response.headers)
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise UsageError(f"cannot reach {url}: {first_line(exc) or type(exc).__name__}") from None
