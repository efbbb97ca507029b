"""Reading the few fields every router needs from webhook payloads."""

from __future__ import annotations

import re
from typing import Final

from kerrigan.core.forks import GONE
from kerrigan.github.payload import Payload, PayloadError

# GitHub's owner and repository names; anything else would reach GitHub's API as another path.
_FULL_NAME: Final = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")


def installation_id(data: Payload) -> int | None:
    """The installation a delivery came through (``None`` when the payload has none)."""
    installation = data.optional_object("installation")
    return installation.integer("id") if installation is not None else None


def repository_name(data: Payload) -> str | None:
    """``owner/name`` of the repository a delivery is about (``None`` when the payload has none)."""
    repository = data.optional_object("repository")
    if repository is None:
        return None
    name = repository.optional_string("full_name")
    if not name:
        return None
    if _FULL_NAME.fullmatch(name) is None:
        raise PayloadError(f"payload field repository.full_name not owner/name ({name[:50]!r})")
    return name


def fork_owner(head_name: str | None, field: str) -> str:
    """The owner of a fork from its repository's ``owner/name`` (payload field ``field``); a fork GitHub
    no longer names (deleted: ``null``) is :data:`~kerrigan.core.forks.GONE`'s."""
    if head_name is None:
        return GONE
    if _FULL_NAME.fullmatch(head_name) is None:
        raise PayloadError(f"payload field {field} not owner/name ({head_name[:50]!r})")
    return head_name.split("/", 1)[0]
