"""``/audit``: who changed which label, tag, state, owner or field, when, from what to what; newest first,
filterable by pool, device and user (``?pool=``, ``?device=``, ``?actor=``, ``?limit=``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from kerrigan.store.audit import AuditEntry, list_audit
from kerrigan.web.pages.rendering import render
from kerrigan.web.reading import read_access
from kerrigan.web.signin import page_reader
from kerrigan.web.state import DATABASE

routes = web.RouteTableDef()

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
SHORT = 80  # a value longer than this is folded, its start shown


@dataclass(frozen=True, slots=True)
class Value:
    """A before or after value: compact JSON, and the start of it when it is long."""

    text: str
    pretty: str
    short: str | None  # None when the whole value is short enough to show
    empty: bool = False  # nothing there (a field created or removed)


def value(raw: object) -> Value:
    """How a stored before/after value is shown: text as it is, anything else as JSON."""
    if raw is None:
        return Value("", "", None, empty=True)
    if isinstance(raw, str) and raw:  # a label value, a state: as written, without JSON's quotes
        return Value(raw, raw, f"{raw[:SHORT]}…" if len(raw) > SHORT else None)
    text = json.dumps(raw, sort_keys=True, ensure_ascii=False)
    pretty = json.dumps(raw, sort_keys=True, ensure_ascii=False, indent=2)
    short = f"{text[:SHORT]}…" if len(text) > SHORT else None
    return Value(text, pretty, short)


@dataclass(frozen=True, slots=True)
class AuditLine:
    """One row of the page."""

    at: datetime
    actor: str
    action: str
    subject_type: str
    subject_id: str
    pool_id: str | None
    field: str
    before: Value
    after: Value


def audit_lines(entries: list[AuditEntry]) -> list[AuditLine]:
    """The entries as the page shows them."""
    return [
        AuditLine(
            entry.at,
            entry.actor,
            entry.action,
            entry.subject_type,
            entry.subject_id,
            entry.pool_id,
            entry.field,
            value(entry.before),
            value(entry.after),
        )
        for entry in entries
    ]


@routes.get("/audit")
async def audit_page(request: web.Request) -> web.Response:
    """The audit log, newest first; a bad limit is shown next to its field, not a failure."""
    principal = await page_reader(request)
    filters = {name: request.query.get(name, "").strip() for name in ("pool", "device", "actor")}
    limit_text = request.query.get("limit", "").strip() or str(DEFAULT_LIMIT)
    context: dict[str, object] = {
        "filters": filters,
        "limit": limit_text,
        "max_limit": MAX_LIMIT,
        "lines": [],
        "error": None,
    }
    if re.fullmatch(r"[0-9]{1,4}", limit_text) is None or not 1 <= int(limit_text) <= MAX_LIMIT:
        context["error"] = f"limit must be a whole number from 1 to {MAX_LIMIT}"
        return await render(request, "audit.html", context, status=400)
    async with request.config_dict[DATABASE].sessions() as session:
        entries = await list_audit(
            session,
            pool_id=filters["pool"] or None,
            device_id=filters["device"] or None,
            actor=filters["actor"] or None,
            limit=int(limit_text),
        )
    context["lines"] = audit_lines(await read_access(request, principal).audit(entries))
    return await render(request, "audit.html", context)
