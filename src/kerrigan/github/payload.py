"""Reading webhook payloads field by field, with one clear error for a field that is missing or mistyped.

GitHub's payloads are trusted for what they say, not for their shape: a delivery whose payload lacks a field a
route needs, or holds it with the wrong type, fails with :class:`PayloadError` naming the field (``payload
field pull_request.head.sha missing``). Such a delivery cannot succeed however often it is tried, so the
worker records it as failed and does not retry it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kerrigan.core.instants import MAX_TIME_TEXT, TimeError, read_time

MAX_ID: Final = 2**63 - 1  # GitHub's ids fit a signed 64-bit column (ours are BigInteger)
MAX_TEXT: Final = 1024  # longer than any name, ref or identifier a route reads
_SHA: Final = re.compile(r"[0-9a-f]{40}")


class PayloadError(ValueError):
    """A payload lacks a field a route needs, or holds it with the wrong type."""


def _kind(value: object) -> str:
    """What a JSON value is, for an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


class Payload:
    """A JSON object of a payload, read through typed accessors that name the field in their errors.

    ``name`` arguments are keys of this object; ``optional_*`` accessors answer ``None`` for a key that is
    absent or null, the others raise :class:`PayloadError` then.
    """

    __slots__ = ("_data", "path")

    def __init__(self, data: object, path: str = "") -> None:
        if not isinstance(data, Mapping):
            raise PayloadError(f"payload{' field ' + path if path else ''} not an object ({_kind(data)})")
        self._data: Mapping[str, Any] = data
        self.path = path

    def field(self, name: str) -> str:
        """The dotted path of ``name`` in the whole payload, as errors show it."""
        return f"{self.path}.{name}" if self.path else name

    def has(self, name: str) -> bool:
        """Whether ``name`` is present and not null."""
        return self._data.get(name) is not None

    def _absent(self, name: str, what: str) -> PayloadError:
        if name in self._data:
            return PayloadError(f"payload field {self.field(name)} not {what} (null)")
        return PayloadError(f"payload field {self.field(name)} missing")

    def _wrong(self, name: str, what: str, value: object) -> PayloadError:
        return PayloadError(f"payload field {self.field(name)} not {what} ({_kind(value)})")

    # -- objects and lists -------------------------------------------------------------------------

    def object(self, name: str) -> Payload:
        """A nested object."""
        found = self.optional_object(name)
        if found is None:
            raise self._absent(name, "an object")
        return found

    def optional_object(self, name: str) -> Payload | None:
        """A nested object, or ``None``."""
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise self._wrong(name, "an object", value)
        return Payload(value, self.field(name))

    def objects(self, name: str) -> list[Payload]:
        """A list of objects; an absent or null list is empty."""
        value = self._data.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(name, "a list", value)
        return [Payload(item, f"{self.field(name)}[{index}]") for index, item in enumerate(value)]

    # -- scalars -----------------------------------------------------------------------------------

    def string(self, name: str, *, max_length: int = MAX_TEXT) -> str:
        """A string of text (no NUL, no lone surrogate) of at most ``max_length`` characters."""
        text = self.optional_string(name, max_length=max_length)
        if text is None:
            raise self._absent(name, "a string")
        return text

    def optional_string(self, name: str, *, max_length: int = MAX_TEXT) -> str | None:
        """A string, or ``None``."""
        value = self._data.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._wrong(name, "a string", value)
        if len(value) > max_length:
            raise PayloadError(
                f"payload field {self.field(name)} too long ({len(value)} characters; at most {max_length})"
            )
        if "\x00" in value or (not value.isascii() and not _encodable(value)):
            raise PayloadError(f"payload field {self.field(name)} not valid text (NUL or a lone surrogate)")
        return value

    def sha(self, name: str) -> str:
        """A commit SHA: 40 lowercase hex digits."""
        value = self.string(name)
        if _SHA.fullmatch(value) is None:
            raise PayloadError(f"payload field {self.field(name)} not a commit SHA ({value[:50]!r})")
        return value

    def optional_sha(self, name: str) -> str | None:
        """A commit SHA, or ``None``."""
        return self.sha(name) if self.has(name) else None

    def integer(self, name: str, *, maximum: int = MAX_ID) -> int:
        """A whole number from 0 to ``maximum``."""
        value = self.optional_integer(name, maximum=maximum)
        if value is None:
            raise self._absent(name, "an integer")
        return value

    def optional_integer(self, name: str, *, maximum: int = MAX_ID) -> int | None:
        """A whole number from 0 to ``maximum``, or ``None``."""
        value = self._data.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._wrong(name, "an integer", value)
        if not 0 <= value <= maximum:
            shown = str(value) if value.bit_length() <= 64 else f"{value.bit_length()} bits long"
            raise PayloadError(f"payload field {self.field(name)} out of range ({shown}; 0 to {maximum})")
        return value

    def optional_time(self, name: str) -> datetime | None:
        """An ISO 8601 time with its offset (GitHub writes ``2026-11-29T12:20:05Z``), in UTC; or ``None``."""
        text = self.optional_string(name, max_length=MAX_TIME_TEXT)
        if text is None:
            return None
        try:
            return read_time(text)
        except TimeError:
            raise PayloadError(f"payload field {self.field(name)} not a time ({text[:50]!r})") from None

    def optional_boolean(self, name: str) -> bool | None:
        """``true`` or ``false``, or ``None``."""
        value = self._data.get(name)
        if value is not None and not isinstance(value, bool):
            raise self._wrong(name, "a boolean", value)
        return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
