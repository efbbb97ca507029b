"""Opaque list cursors, bound to the query they were made for.

A cursor carries where its page ended and a digest of the filters of its query: sent with other filters, it
is refused (400 naming ``cursor``) rather than silently paging a different list. Clients only pass them on.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from kerrigan.web.errors import ApiError, bad_request


def binding(scope: str, filters: Mapping[str, str]) -> str:
    """The digest of a list's scope and filters that its cursors carry."""
    canonical = json.dumps([scope, sorted(filters.items())], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def make_cursor(bound: str, place: Mapping[str, Any]) -> str:
    """A cursor of the query ``bound`` resuming at ``place`` (short keys: it travels in URLs)."""
    raw = json.dumps({"q": bound, **place}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_cursor(cursor: str, bound: str) -> dict[str, Any]:
    """Where ``cursor`` resumes; a 400 naming ``cursor`` when this server did not give it out, or gave it
    out for another query. The caller checks the place's own fields (:func:`not_ours` when they are bad)."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, RecursionError):
        raise not_ours() from None
    if not isinstance(raw, dict) or "q" not in raw:
        raise not_ours()
    if raw["q"] != bound:
        raise bad_request(
            "cursor belongs to another query: page with the filters it came with, or start again without it",
            field="cursor",
        )
    return raw


def not_ours() -> ApiError:
    """The error for a cursor this server did not give out."""
    return bad_request("cursor is not one this server gave out", field="cursor")
