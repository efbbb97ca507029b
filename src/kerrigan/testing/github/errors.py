"""GitHub's error answers: ``{"message", "documentation_url"}`` with a status code."""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any, Final

from aiohttp import web

DOCUMENTATION_URL: Final = "https://docs.github.com/rest"


class GitHubError(Exception):
    """An answer GitHub would give instead of doing what was asked."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        """The answer as GitHub sends it."""
        return error_response(self.status, self.message, self.headers)


def default_message(status: int) -> str:
    """The reason phrase of ``status`` ("Bad Gateway"), or ``"Error"`` for a code http does not know."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def error_body(message: str) -> dict[str, Any]:
    """The body of an error answer."""
    return {"message": message, "documentation_url": DOCUMENTATION_URL}


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> web.Response:
    """An error answer with GitHub's body."""
    return web.json_response(error_body(message), status=status, headers=dict(headers or {}))
