"""``POST /app-manifests/{code}/conversions``: the code GitHub hands back, as the App's credentials."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import aiohttp


class ConversionError(Exception):
    """GitHub did not convert the code; the message is one line."""


@dataclass(frozen=True)
class AppCredentials:
    """What the conversion answers that Kerrigan keeps."""

    id: int
    slug: str
    name: str
    html_url: str
    pem: str
    webhook_secret: str | None
    client_id: str
    client_secret: str


def credentials_of(body: Any) -> AppCredentials:
    """The credentials in a conversion's answer; a ConversionError naming what is missing."""
    if not isinstance(body, dict):
        raise ConversionError("GitHub's answer to the conversion is not a JSON object")
    for name, kind in (
        ("id", int),
        ("slug", str),
        ("name", str),
        ("html_url", str),
        ("pem", str),
        ("client_id", str),
        ("client_secret", str),
    ):
        if not isinstance(body.get(name), kind) or isinstance(body.get(name), bool):
            raise ConversionError(f"GitHub's answer to the conversion has no {name}")
    secret = body.get("webhook_secret")
    return AppCredentials(
        id=body["id"],
        slug=body["slug"],
        name=body["name"],
        html_url=body["html_url"].rstrip("/"),
        pem=body["pem"],
        webhook_secret=secret if isinstance(secret, str) else None,
        client_id=body["client_id"],
        client_secret=body["client_secret"],
    )


async def convert_code(http: aiohttp.ClientSession, api_url: str, code: str) -> AppCredentials:
    """Exchange the manifest flow's one-time ``code`` for the App's credentials."""
    url = f"{api_url}/app-manifests/{quote(code, safe='')}/conversions"
    headers = {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28"}
    try:
        async with http.post(url, headers=headers, timeout=aiohttp.ClientTimeout(total=60)) as response:
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
            status = response.status
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise ConversionError(f"cannot reach {api_url}: {str(exc) or type(exc).__name__}") from None
    if status != 201:
        message = body.get("message") if isinstance(body, dict) else None
        raise ConversionError(
            f"GitHub refused the code (HTTP {status}{': ' + str(message)[:200] if message else ''}): a code "
            "converts once, within an hour"
        )
    return credentials_of(body)
