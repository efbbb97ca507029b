"""Rows as a person reads them in a terminal: each column as wide as its widest cell, two spaces apart."""

from __future__ import annotations

from collections.abc import Sequence


def columns(rows: Sequence[Sequence[str]]) -> str:
    """``rows`` (the first usually the header) as aligned columns, one line each, no trailing spaces."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows
    )
