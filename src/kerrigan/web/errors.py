"""API errors as JSON: ``{"error": {"code", "message", "field"}}`` with the right status, never a 500 for
bad input."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web

from kerrigan.store.inventory import ConflictError, NotFoundError, StaleError

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_HTTP_CODES: Final = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    412: "precondition_failed",
    413: "too_large",
    415: "unsupported_media_type",
}


class ApiError(Exception):
    """An error the client can act on."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field


def bad_request(message: str, field: str | None = None, code: str = "invalid") -> ApiError:
    """A 400 naming the field and the rule it broke."""
    return ApiError(400, code, message, field)


def error_response(
    status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    """The JSON body every API error has."""
    body = {"error": {"code": code, "message": message, "field": field}}
    return web.json_response(body, status=status, headers=headers)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn every failure under ``/api/`` into the JSON error shape; unexpected ones are logged as 500s."""
    try:
        if "\x00" in request.path or "%00" in request.raw_path:
            raise ApiError(400, "invalid", "NUL characters are not allowed in paths or queries")
        return await handler(request)
    except ApiError as exc:
        headers = {"WWW-Authenticate": 'Bearer realm="kerrigan"'} if exc.status == 401 else None
        return error_response(exc.status, exc.code, exc.message, exc.field, headers)
    except NotFoundError as exc:
        return error_response(404, "not_found", str(exc))
    except ConflictError as exc:
        return error_response(409, "conflict", str(exc))
    except StaleError as exc:
        headers = {"ETag": exc.current_etag} if exc.current_etag else None
        return error_response(412, "precondition_failed", str(exc), headers=headers)
    except json.JSONDecodeError as exc:
        return error_response(400, "invalid_json", f"the body is not valid JSON: {exc.msg} at {exc.pos}")
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _HTTP_CODES.get(exc.status, "error")
        # Keep what the client needs (Allow on a 405), not the plain-text body's own Content-Type.
        kept = {name: value for name, value in exc.headers.items() if name.lower() == "allow"}
        return error_response(exc.status, code, exc.reason, headers=kept or None)
    except Exception:
        log.exception("%s %s failed", request.method, request.path)
        return error_response(
            500, "internal", "Kerrigan failed to answer this request; the failure is logged"
        )


@web.middleware
async def client_gone(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A client that goes away while its body is read (a runner agent stopping mid-call, a browser closing
    a tab mid-upload) ends its request quietly: there is nobody to answer, and it is not the server's fault,
    so it is one line in the log, never a traceback."""
    try:
        return await handler(request)
    except ConnectionResetError as err:
        path = request.rel_url.raw_path
        log.info(
            "%s %s: the client went away before its request was read whole (%s)", request.method, path, err
        )
        return web.Response(status=400, text="the connection was lost before the request was read whole\n")
