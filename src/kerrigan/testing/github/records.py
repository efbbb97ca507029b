"""What the stand-in holds and records: repositories and the requests it received."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

HTML_URL: Final = "https://github.com"  # where GitHub's pages would be: the stand-in serves none of them
LONG_AGO: Final = "2020-01-01T00:00:00Z"  # when what a test did not date was created, pushed or changed


def now_iso() -> str:
    """The current time as GitHub writes timestamps."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_id(kind: str, number: int) -> str:
    """A GraphQL node id in GitHub's style: a type prefix and an opaque part."""
    return f"{kind}_" + base64.b64encode(f"{kind}{number}".encode()).decode().rstrip("=")


@dataclass
class FakeRepository:
    """A repository: whether it is private, files per commit, pull requests and collaborators' permissions."""

    full_name: str
    id: int
    installation_id: int
    private: bool = True
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the stand-in received; ``status`` is 0 when the connection was dropped unanswered."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any
    status: int
