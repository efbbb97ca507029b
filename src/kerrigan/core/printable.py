"""What "printable" means wherever Kerrigan takes text: label values, names, reasons, descriptions, notes.

A printable character is any code point that is not a control (Unicode category Cc), a format character
(Cf), a separator other than the space (Zs, Zl, Zp), a surrogate (Cs) or a private-use character (Co), as
Unicode 14 assigns them. That is Python 3.11's ``str.isprintable`` with one difference, on purpose: a code
point Unicode 14 leaves unassigned is printable here. ``isprintable`` follows the Unicode database of the
Python that runs it, so a text with an emoji newer than that database (or a stored label value, after an
upgrade) would be refused on one server and taken on another; a fixed table says the same everywhere, and
the REST API's document states it as a pattern clients can check before they send.
"""

from __future__ import annotations

import re
from typing import Final

# Code point ranges (inclusive) of Unicode 14's Cc, Cf, Zs but the space, Zl, Zp, Cs and Co. A unit test
# rebuilds the table from the unicodedata of a Python on Unicode 14.
NOT_PRINTABLE: Final[tuple[tuple[int, int], ...]] = (
    (0x0000, 0x001F),
    (0x007F, 0x00A0),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x1680, 0x1680),
    (0x180E, 0x180E),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x2064),
    (0x2066, 0x206F),
    (0x3000, 0x3000),
    (0xD800, 0xF8FF),  # the surrogates, then the private-use area that follows them
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
    (0xF0000, 0xFFFFD),
    (0x100000, 0x10FFFD),
)

_SURROGATES: Final = (0xD800, 0xDFFF)


def _escaped(code_point: int) -> str:
    # \uXXXX reads the same to Python's re and to ECMA-262; a code point past the BMP goes in as itself,
    # which both read (JSON carries it as a surrogate pair).
    return f"\\u{code_point:04x}" if code_point <= 0xFFFF else chr(code_point)


def _class_body(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        _escaped(first) if first == last else f"{_escaped(first)}-{_escaped(last)}" for first, last in ranges
    )


def _without_surrogates(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    low, high = _SURROGATES
    kept: list[tuple[int, int]] = []
    for first, last in ranges:
        if first < low:
            kept.append((first, min(last, low - 1)))
        if last > high:
            kept.append((max(first, high + 1), last))
    return tuple(kept)


_PRINTABLE: Final = re.compile(f"[^{_class_body(NOT_PRINTABLE)}]*")

# For documents: a JSON string cannot hold a lone surrogate as a character (the API's body reader refuses
# the escape that would make one), and pattern tools disagree on surrogates in a class, so it leaves them out.
PRINTABLE_CHARACTER: Final = f"[^{_class_body(_without_surrogates(NOT_PRINTABLE))}]"


def is_printable(text: str) -> bool:
    """Whether every character of ``text`` is printable (the empty text is)."""
    return _PRINTABLE.fullmatch(text) is not None


def printable_pattern(min_length: int, max_length: int) -> str:
    """An anchored pattern of ``min_length`` to ``max_length`` printable characters, for a schema."""
    return f"^{PRINTABLE_CHARACTER}{{{min_length},{max_length}}}$"
