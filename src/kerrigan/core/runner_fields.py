"""The ranges of what a runner host may send, and the per-job output cap: checked before anything is stored.

A runner host is trusted to report on its own jobs, not to send anything at all: a number past the
database's integer range, a string Python holds but UTF-8 cannot (a lone surrogate from ``"\\ud800"`` in the
JSON), or a non-finite float (``NaN``, which Python's JSON reader accepts) would otherwise fail deep in the
store, as a 500 that leaves the job as it was. Each check here raises :class:`FieldError` naming the field,
which the protocol answers with 400; nothing is changed.

The ranges, as docs/runner.md states them:

- ids in a path: ASCII digits, 1 to ``MAX_ID`` (the database's 32-bit integer key);
- ``exit_status``: ``EXIT_STATUS_MIN``..``EXIT_STATUS_MAX`` (0-255 is the command's status, -1 unknown, -N the
  signal N that killed it, as the agent reports it);
- ``seq``, ``truncated_before_seq``: 0..``MAX_SEQ`` (32-bit, with room for the next chunk's number);
- ``offset``, milliseconds waited: 0..``MAX_COUNT`` (2**53 - 1, the integers JSON carries exactly);
  resource values and a refusal's ``free_bytes``/``floor_bytes``: 0..``MAX_RESOURCE`` (2**63 - 1, what the
  database's BIGINT holds); accounting figures: finite, 0..``MAX_COUNT``;
- ``data``: text of at most ``MAX_CHUNK_BYTES`` in UTF-8, without NUL; a whole call: ``MAX_BODY_BYTES``;
- a reservation's ``settings``: at most ``MAX_SETTINGS`` environment variable names, each to text of at
  most ``MAX_TEXT`` characters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from kerrigan.core.log_streams import LogStream

MAX_ID: Final = 2**31 - 1
MAX_SEQ: Final = 2**31 - 2
MAX_COUNT: Final = 2**53 - 1
MAX_RESOURCE: Final = 2**63 - 1
EXIT_STATUS_MIN: Final = -64  # SIGRTMAX on Linux
EXIT_STATUS_MAX: Final = 255
# The agent cuts pages of 64 KiB of bytes (kerrigan.runner.records.PAGE_BYTES); bytes that are not UTF-8
# become U+FFFD, three bytes each, so a page is at most 192 KiB of UTF-8, and at most 384 KiB of JSON
# (``\ufffd`` is six characters).
MAX_CHUNK_BYTES: Final = 256 * 1024
MAX_BODY_BYTES: Final = 1024 * 1024
MAX_TEXT: Final = 2000  # a refusal's detail, a CPU list
MAX_NAME: Final = 255  # a device id, a resource or capability name
MAX_ENTRIES: Final = 4096  # devices, jobs waiting, resources named in one report
MAX_DEPTH: Final = 16
DEFAULT_OUTPUT_MAX_BYTES: Final = 64 * 1024 * 1024
OUTPUT_MAX_SETTING: Final = "KERRIGAN_OUTPUT_MAX_BYTES"


class FieldError(ValueError):
    """A field a runner host sent is out of range; ``field`` names it (``resources.vcpus``, ``data``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field, self.message = field, message


def check_document(body: Any, path: str = "") -> None:
    """Every string (key or value) of a parsed JSON body is valid UTF-8, every number finite, the nesting
    at most ``MAX_DEPTH`` deep; the first field that is not raises :class:`FieldError`."""
    _walk(body, path, 0)


def _walk(value: Any, path: str, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise FieldError(path or "body", f"{path or 'the body'} is nested more than {MAX_DEPTH} deep")
    if isinstance(value, str):
        _utf8(value, path or "body")
    elif isinstance(value, float) and not math.isfinite(value):
        raise FieldError(path or "body", f"{path or 'the body'} must be a finite number, not {value}")
    elif isinstance(value, dict):
        for key, item in value.items():
            named = f"{path}.{key}" if path else str(key)
            if not _is_utf8(key):
                raise FieldError(path or "body", f"a name in {path or 'the body'} is not valid UTF-8 text")
            _walk(item, named, depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, f"{path}[{index}]", depth + 1)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _utf8(text: str, field: str) -> None:
    if not _is_utf8(text):
        raise FieldError(field, f"{field} is not valid UTF-8 text (it holds a lone surrogate)")


def job_id(text: str) -> int:
    """A job id from a URL path: ASCII digits (``²`` is a digit to ``str.isdigit``, not to ``int``)."""
    if not (text.isascii() and text.isdigit() and len(text) <= 10) or not 1 <= int(text) <= MAX_ID:
        raise FieldError("job_id", f"a job id is a whole number from 1 to {MAX_ID}")
    return int(text)


def whole(value: Any, field: str, low: int = 0, high: int = MAX_COUNT) -> int:
    """An integer (not a boolean) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FieldError(field, f"{field} must be a whole number from {low} to {high}")
    return value


def exit_status(value: Any) -> int:
    """An exit status as the agent reports it: the command's, -1 when unknown, -N when signal N killed it."""
    return whole(value, "exit_status", EXIT_STATUS_MIN, EXIT_STATUS_MAX)


def sequence(value: Any, field: str = "seq") -> int:
    """A chunk number."""
    return whole(value, field, 0, MAX_SEQ)


def chunk_data(value: Any) -> str:
    """A chunk's text: UTF-8 without NUL (PostgreSQL text cannot hold it), at most ``MAX_CHUNK_BYTES``."""
    if not isinstance(value, str):
        raise FieldError("data", "data must be text")
    if "\x00" in value:
        raise FieldError("data", "output text cannot hold NUL characters")
    _utf8(value, "data")
    if len(value) > MAX_CHUNK_BYTES or len(value.encode()) > MAX_CHUNK_BYTES:
        raise FieldError("data", f"a chunk holds at most {MAX_CHUNK_BYTES} bytes of UTF-8 text")
    return value


def text(value: Any, field: str, limit: int = MAX_TEXT) -> str:
    """Text of at most ``limit`` characters."""
    if not isinstance(value, str) or len(value) > limit:
        raise FieldError(field, f"{field} must be text of at most {limit} characters")
    _utf8(value, field)
    return value


def sized(value: Any, field: str, limit: int = MAX_ENTRIES) -> None:
    """An object or list of at most ``limit`` entries whose names (for an object) are at most ``MAX_NAME``
    characters; the shape of each entry is the caller's to check."""
    if len(value) > limit:
        raise FieldError(field, f"{field} holds at most {limit} entries")
    if isinstance(value, Mapping):
        for key in value:
            if not isinstance(key, str) or not 0 < len(key) <= MAX_NAME:
                raise FieldError(field, f"a name in {field} must be 1 to {MAX_NAME} characters")


_SETTING_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
MAX_SETTINGS: Final = 256  # a device's settings a reservation's holder is shown


def settings(value: Any, field: str = "settings") -> dict[str, str]:
    """A device's settings as its host reports them for a reservation's holder: at most ``MAX_SETTINGS``
    environment variable names, each to text of at most ``MAX_TEXT`` characters."""
    if not isinstance(value, Mapping):
        raise FieldError(field, f"{field} must map environment variable names to text")
    sized(value, field, MAX_SETTINGS)
    for name, setting in value.items():
        if _SETTING_NAME.fullmatch(name) is None:
            raise FieldError(field, f"{field}: {name[:40]!r} is not an environment variable name")
        text(setting, f"{field}.{name}")
        if "\0" in setting:  # an environment variable's value cannot hold one (the devices file refuses it)
            raise FieldError(f"{field}.{name}", f"{field}.{name} must not hold a NUL character")
    return dict(value)


def figures(value: Any, field: str) -> None:
    """Every number in ``value`` (an accounting or health object) is finite and non-negative."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        if not (math.isfinite(value) and 0 <= value <= MAX_COUNT):
            raise FieldError(field, f"{field} must be a finite number from 0 to {MAX_COUNT}")
    elif isinstance(value, Mapping):
        sized(value, field, 256)
        for key, item in value.items():
            figures(item, f"{field}.{key}")
    elif isinstance(value, list):
        sized(value, field, 256)
        for index, item in enumerate(value):
            figures(item, f"{field}[{index}]")


def size_text(count: int) -> str:
    """A byte count for people: ``64 MiB``, ``1.5 KiB``, ``900 bytes``."""
    for unit, size in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if count >= size:
            value = count / size
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{count} bytes"


def cut_notice(limit: int, stream: LogStream = LogStream.OUTPUT) -> str:
    """What the output (or the console) shows where the server stopped storing it."""
    return f"[{stream.value} cut at {size_text(limit)} ({OUTPUT_MAX_SETTING})]\n"


_CUT_NOTICE: Final = re.compile(
    r"\[((?:output|console) cut at [0-9.]+ (?:bytes|KiB|MiB|GiB) \(KERRIGAN_OUTPUT_MAX_BYTES\))\]"
)


def cut_of(output_tail: str) -> str | None:
    """``output cut at 64 MiB (KERRIGAN_OUTPUT_MAX_BYTES)`` when the tail ends with the cut notice (the store
    puts it last), else None."""
    lines = output_tail.rstrip("\n").rsplit("\n", 1)
    found = _CUT_NOTICE.fullmatch(lines[-1])
    return found[1] if found else None


def fitting(data: str, room: int) -> str:
    """The start of ``data`` that fits in ``room`` bytes of UTF-8, cut between characters."""
    encoded = data.encode()
    if len(encoded) <= room:
        return data
    return encoded[: max(room, 0)].decode("utf-8", "ignore")
