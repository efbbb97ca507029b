"""Reading the few fields the routers need from webhook payloads."""

from __future__ import annotations

from typing import Any


def installation_id(data: dict[str, Any]) -> int | None:
    """The installation a delivery came through (``None`` when the payload has none)."""
    installation = data.get("installation") or {}
    value = installation.get("id")
    return int(value) if value is not None else None


def repository_name(data: dict[str, Any]) -> str | None:
    """``owner/name`` of the repository a delivery is about."""
    repository = data.get("repository") or {}
    name = repository.get("full_name")
    return str(name) if name else None
