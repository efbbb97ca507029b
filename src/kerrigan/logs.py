"""One logging set-up for every Kerrigan process: one event a line, as JSON or as text.

Kerrigan's modules log through the standard library (``logging.getLogger(__name__)``, ``%``-style
arguments); structlog formats every record, theirs and the libraries', in one place. What the code
binds with ``structlog.contextvars`` (``delivery_id``, ``session_id``, ``job_id``, ``repository``,
``runner_host``) is added to each line logged while it is bound. Before a line is written, every
secret the process was given and everything shaped like a token is replaced by ``[redacted]``.

structlog rather than a JSON formatter of our own: its context variables follow asyncio tasks, and the
same processors render both formats, so text and JSON lines carry the same fields.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final, TextIO

import structlog
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web import BaseRequest, StreamResponse

REDACTED: Final = "[redacted]"
# Tokens GitHub and Kerrigan hand out, JWTs, bearer credentials and PEM blocks: never written, whoever
# logs them.
_TOKEN_SHAPES: Final = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,}|kg[nr]_[A-Za-z0-9_-]{20,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)"
    r"|(?i:bearer|token)\s+[A-Za-z0-9._~+/=-]{16,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
)
_MIN_SECRET: Final = 6  # shorter "secrets" would blank out ordinary words


_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f]")


def one_line(_: object, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Escape control characters in every string but the traceback, so a text line is one event and
    nothing a client sends (a path, a header) can start a line of its own."""
    for key, value in event.items():
        if key != "exception" and isinstance(value, str) and _CONTROL.search(value):
            event[key] = _CONTROL.sub(lambda found: repr(found.group())[1:-1], value)
    return event


class Redactor:
    """Replaces the secrets it was given, and anything token-shaped, in every string of an event."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        known = sorted({secret for secret in secrets if secret and len(secret) >= _MIN_SECRET}, key=len)
        self._known = re.compile("|".join(re.escape(secret) for secret in reversed(known))) if known else None

    def text(self, value: str) -> str:
        """``value`` with every secret in it replaced."""
        if self._known is not None:
            value = self._known.sub(REDACTED, value)
        return _TOKEN_SHAPES.sub(REDACTED, value)

    def __call__(self, _: object, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in event.items():
            if isinstance(value, str):
                event[key] = self.text(value)
            elif not isinstance(value, int | float | bool | type(None)):
                event[key] = self.text(str(value))
        return event


def _wants_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "auto":
        isatty = getattr(stream, "isatty", None)
        return not (callable(isatty) and isatty())
    return log_format == "json"


def configure_logging(
    log_format: str = "auto",
    *,
    level: int = logging.INFO,
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
) -> None:
    """Send every log record to ``stream`` (standard error) as ``log_format``: ``json`` (one object a
    line), ``text``, or ``auto`` (text on a terminal, JSON otherwise); ``secrets`` are never written."""
    stream = stream if stream is not None else sys.stderr
    redact = Redactor(secrets)
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    # Records from the standard library carry their ``extra`` fields into the event.
    foreign = [*shared, structlog.stdlib.ExtraAdder()]
    if _wants_json(log_format, stream):
        rendering: list[Any] = [
            structlog.processors.format_exc_info,
            redact,
            structlog.processors.JSONRenderer(sort_keys=False),
        ]
    else:
        rendering = [
            structlog.processors.format_exc_info,
            redact,
            one_line,  # JSON escapes them already
            structlog.dev.ConsoleRenderer(colors=False, pad_event_to=0),
        ]
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=foreign,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    # At debug aiosqlite logs every statement with its parameters (payloads, ids, hashes): never wanted.
    logging.getLogger("aiosqlite").setLevel(max(level, logging.INFO))
    # Alembic says which dialect it drives each time the schema's revision is read, which /readyz does on
    # every probe; its warnings (and, at debug, the rest) still come through.
    logging.getLogger("alembic.runtime.migration").setLevel(
        level if level <= logging.DEBUG else logging.WARNING
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


class AccessLogger(AbstractAccessLogger):
    """aiohttp's access log as events: method, path (never the query: OAuth codes and states travel
    there), status, bytes and milliseconds."""

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        self.logger.info(
            "%s %s %s",
            request.method,
            request.rel_url.raw_path,  # as sent, percent-encoded: a %0A stays three characters
            response.status,
            extra={"bytes": response.body_length, "ms": round(time * 1000, 1)},
        )


@web.middleware
async def fresh_log_context(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Start each request with nothing bound: a request's handler runs in a copy of the context the
    server's connection was made in, so what was bound there (by the code that started the server, say)
    would otherwise name every request's lines."""
    structlog.contextvars.clear_contextvars()
    return await handler(request)
