"""How a message quotes what someone wrote: in full when short, cut short when long (it may be megabytes)."""

from __future__ import annotations

from typing import Final

SHOWN: Final = 60  # characters of a value quoted in a message


def quote(text: str, shown: int = SHOWN) -> str:
    """``text`` quoted for a message, cut short when longer than ``shown`` characters."""
    if len(text) <= shown:
        return repr(text)
    return f"{text[: shown - 20]!r}… ({len(text)} characters)"
