"""Where a browser may be sent back to from input (``?next=`` on sign-in): a path on this site, nothing else.

Browsers are lenient where this rule must not be: they strip tabs and newlines from a URL (``/\\t/evil``
becomes ``//evil``, another host), read ``\\`` as ``/``, and a target may be percent-encoded more than once
before something decodes it. So the target is decoded until it stops changing, and the decoded form must be
an absolute path with no control character, no whitespace, no backslash and no ``//`` at its start (which
would name a host). Anything else is refused and the fallback is used instead.
"""

from __future__ import annotations

import unicodedata
from typing import Final

FALLBACK: Final = "/"
MAX_LENGTH: Final = 2048
# Each decoding round that changes the text peels one layer of encoding; more layers than this are not a
# link a person followed.
MAX_DECODINGS: Final = 4
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _percent_decoded(text: str) -> str | None:
    """``text`` with its ``%XX`` escapes decoded as UTF-8, or None when they are not valid UTF-8."""
    if "%" not in text:
        return text
    out = bytearray()
    index = 0
    while index < len(text):
        char = text[index]
        if char == "%" and index + 2 < len(text) and set(text[index + 1 : index + 3]) <= _HEX:
            out.append(int(text[index + 1 : index + 3], 16))
            index += 3
            continue
        out += char.encode()
        index += 1
    try:
        return out.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fully_decoded(text: str) -> str | None:
    """``text`` decoded until stable, or None when it is not valid UTF-8 or has too many layers."""
    for _ in range(MAX_DECODINGS + 1):
        decoded = _percent_decoded(text)
        if decoded is None:
            return None
        if decoded == text:
            return text
        text = decoded
    return None


def _harmless(char: str) -> bool:
    # Category C is control, format (zero-width, bidi), private use, surrogate and unassigned; Z is
    # every space and line or paragraph separator.
    return not (char.isspace() or unicodedata.category(char)[0] in "CZ" or char == "\\")


def is_local_path(target: str) -> bool:
    """Whether a browser sent to ``target`` stays on this site, however it reads the URL."""
    if not target or len(target) > MAX_LENGTH:
        return False
    # What goes into a Location header as given: printable ASCII only (a space or a non-ASCII character
    # would be re-encoded by someone, differently).
    if not all("!" <= char <= "~" for char in target):
        return False
    decoded = _fully_decoded(target)
    if decoded is None or not decoded.startswith("/") or decoded[1:2] in ("/", "\\"):
        return False
    return all(_harmless(char) for char in decoded)


def local_path(target: str | None, fallback: str = FALLBACK) -> str:
    """``target`` when it is a path on this site (:func:`is_local_path`), else ``fallback``."""
    if target is not None and is_local_path(target):
        return target
    return fallback
