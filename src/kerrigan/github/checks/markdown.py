"""The Markdown pieces every summary is built of: code spans, table cells, requested labels, the header."""

from __future__ import annotations

import re
from typing import Final

from kerrigan.github.checks.body import SessionContext


def code(text: str) -> str:
    """``text`` as inline code (a backtick in it made a quote)."""
    quoted = text.replace("`", "'")
    return f"`{quoted}`"


# What free text (a note a person typed, a reason a runner sent, a name from a manifest) may not do in a
# summary: start a tag (``<details>``, ``<img>``), a link or an image (``[...](...)``: its ``](`` escaped;
# brackets alone, as in ``tags[0]``, are words), a code span, emphasis or strikethrough, escape what follows
# it, or end its line or table cell. A zero-width space after ``@`` and ``#`` keeps GitHub from reading a
# mention (which notifies) or a reference to an issue.
_ESCAPES: Final = str.maketrans(
    {
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "~": "\\~",
        "|": "\\|",
        "<": "&lt;",
        "@": "@\u200b",
        "#": "#\u200b",
        "\n": " ",
        "\r": " ",
    }
)


def cell(text: str) -> str:
    """``text`` as plain words, safe in a table cell or a list item: on one line, and nothing in it read as
    Markdown, HTML, a mention or an issue reference."""
    return text.translate(_ESCAPES).replace("](", "]\\(")


_BACKTICKS: Final = re.compile(r"`+")


def fenced(text: str) -> str:
    """``text`` as a fenced code block whose fence is longer than any run of backticks in it, so nothing in
    the text can close the block early (and the Markdown, HTML and mentions in it stay text)."""
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def labels_text(requested: dict[str, list[str]]) -> str:
    """Requested labels as code: ``os=linux``, ``board in [a, b]``; ``none``."""
    return (
        ", ".join(
            code(f"{key}={values[0]}") if len(values) == 1 else code(f"{key} in [{', '.join(values)}]")
            for key, values in requested.items()
        )
        or "none"
    )


def header(name: str, context: SessionContext) -> str:
    """The summary's first line: the workflow, the commit and event, a link to the session."""
    where = f" ({context.event}" + (f" to {code(context.ref)}" if context.ref else "") + ")"
    return (
        f"**{cell(name)}** at {code(context.head_sha[:12])}{where}, "
        f"session [{code(context.session_id[:8])}]({context.details_url})\n"
    )
