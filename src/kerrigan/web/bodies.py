"""Reading JSON request bodies: each rule broken is a 400 naming the field."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

from aiohttp import web

from kerrigan.core.inventory import DeviceState
from kerrigan.core.labels import LabelError, is_valid_name, validate_tag, validate_user_key, validate_value
from kerrigan.core.logins import is_login
from kerrigan.core.printable import is_printable
from kerrigan.web.errors import ApiError, bad_request

MAX_BODY: Final = 1024 * 1024
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")  # only such an escape can make a lone surrogate


async def json_object(request: web.Request, allowed: tuple[str, ...]) -> dict[str, Any]:
    """The body as a JSON object holding only ``allowed`` keys."""
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, "too_large", f"the body is over {MAX_BODY} bytes")
    text = await body_text(request)
    if not text.strip():
        raise bad_request("the body must be a JSON object", code="invalid_json")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad_request(
            f"the body is not valid JSON: {exc.msg} at {exc.pos}", code="invalid_json"
        ) from None
    except (ValueError, RecursionError):  # numbers too long to convert, nesting too deep
        raise bad_request("the body is not JSON Kerrigan can read", code="invalid_json") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object", code="invalid_json")
    if _SURROGATE_ESCAPE.search(text) is not None and _holds_lone_surrogate(body):
        raise bad_request(
            "the body holds a lone surrogate escape (\\uD800-\\uDFFF without its pair): not a character",
            code="invalid_json",
        )
    for key in body:
        if key not in allowed:
            raise bad_request(f"unknown field {key!r}; expected some of: {', '.join(allowed)}", field=key)
    return body


def _holds_lone_surrogate(body: Any) -> bool:
    # JSON's \u escapes can spell half a surrogate pair, which no Unicode text holds (nor PostgreSQL).
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except RecursionError:  # nested past what dumps walks: the fields' own rules refuse such a value
        return False
    return False


async def body_text(request: web.Request) -> str:
    """The body as text; a body that is not UTF-8 is a 400."""
    raw = await request.read()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_request(f"the body is not UTF-8 (byte {exc.start})", code="invalid_encoding") from None


def required(body: Mapping[str, Any], field: str) -> Any:
    """A field that must be present."""
    if field not in body:
        raise bad_request(f"{field} is required", field=field)
    return body[field]


def string(value: Any, field: str, *, max_length: int = 200) -> str:
    """A non-empty string of at most ``max_length`` printable characters."""
    if not isinstance(value, str):
        raise bad_request(f"{field} must be a string", field=field)
    if not value or len(value) > max_length or not is_printable(value):
        raise bad_request(f"{field} must be 1-{max_length} printable characters", field=field)
    return value


def identifier(value: Any, field: str) -> str:
    """An id: 1-63 of lowercase letters, digits, '.', '_' and '-'."""
    if not isinstance(value, str) or not is_valid_name(value):
        raise bad_request(f"{field} must be 1-63 of lowercase letters, digits, '.', '_' and '-'", field=field)
    return value


def label_value(value: Any, field: str, key: str) -> str:
    """A label value (also used for board, target type, OS type and firmware fields)."""
    if not isinstance(value, str):
        raise bad_request(f"{field} must be a string", field=field)
    try:
        return validate_value(value, key=key)
    except LabelError as exc:
        raise bad_request(str(exc), field=field, code="invalid_label") from None


def labels(value: Any, field: str) -> dict[str, str]:
    """A whole map of explicit labels: valid user keys, non-empty values."""
    if not isinstance(value, dict):
        raise bad_request(f"{field} must be an object of key: value", field=field)
    result: dict[str, str] = {}
    for raw_key, raw_value in value.items():
        key_field = f"{field}.{raw_key}"
        try:
            key = validate_user_key(raw_key)
        except LabelError as exc:
            raise bad_request(str(exc), field=key_field, code="invalid_label") from None
        if key in result:
            raise bad_request(f"label {key!r} is given twice (keys are case-insensitive)", field=key_field)
        result[key] = label_value(raw_value, key_field, key)
    return result


def tags(value: Any, field: str) -> frozenset[str]:
    """A list of tags."""
    if not isinstance(value, list):
        raise bad_request(f"{field} must be a list of tags", field=field)
    found = set()
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise bad_request(f"{field}[{index}] must be a string", field=f"{field}[{index}]")
        try:
            found.add(validate_tag(item))
        except LabelError as exc:
            raise bad_request(str(exc), field=f"{field}[{index}]", code="invalid_tag") from None
    return frozenset(found)


def logins(value: Any, field: str) -> tuple[str, ...]:
    """A list of GitHub logins."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise bad_request(f"{field} must be a list of GitHub logins", field=field)
    for index, login in enumerate(value):
        if not is_login(login):
            raise bad_request(f"{login!r} is not a GitHub login", field=f"{field}[{index}]")
    return tuple(dict.fromkeys(value))


def state(value: Any, field: str) -> DeviceState:
    """A device state."""
    try:
        return DeviceState(value)
    except ValueError:
        choices = ", ".join(member.value for member in DeviceState)
        raise bad_request(f"{field} must be one of {choices}", field=field) from None
